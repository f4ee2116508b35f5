"""What the kit froze, so that no way out leaves a process stopped: the pause nemesis's SIGSTOPs.

``environment.pause_process`` stops a runtime process (SIGSTOP) and ``continue_paused`` lets it go on
(SIGCONT). A signal that ends the kit between the two must not leave it stopped: a stopped process
outlives its kit, holds its locks and ports, and hangs whatever waits for it. Every pause is recorded
here until it is let go; ``release_all`` (called by every way a run is interrupted, ``interrupts``)
SIGCONTs each one that is still the same process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

from recoverykit.conformance.killer import ProcRef

_LOCK = threading.Lock()
_PAUSED: set[ProcRef] = set()


def paused(ref: ProcRef) -> None:
    """The kit just stopped ``ref``."""
    with _LOCK:
        _PAUSED.add(ref)


def released(ref: ProcRef) -> None:
    """The kit let ``ref`` go on (or it is gone)."""
    with _LOCK:
        _PAUSED.discard(ref)


def release_all() -> list[int]:
    """SIGCONT every process the kit stopped that is still the same process; the pids it let go on."""
    with _LOCK:
        refs = sorted(_PAUSED)
        _PAUSED.clear()
    went_on = []
    for ref in refs:
        if ref.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(ref.pid, signal.SIGCONT)
                went_on.append(ref.pid)
    return went_on
