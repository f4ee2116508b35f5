"""Ending on a signal wherever the kit runs: the CLI (``recoverykit.signals``) and the pytest plugin share it.

A run can be ended by SIGTERM (a CI timeout, ``kill``), SIGINT (Ctrl-C) or SIGHUP (a closed terminal, a dropped
ssh session, some CI cancellations). Whichever came, the kit does the same: every process carrying a marker this
kit process made is killed (``reaper.reap_owned``), every process the kit froze with the pause nemesis and that is
somehow still alive is let go on (``paused.release_all``: a SIGSTOPped process left behind would hang whatever
waits on it), every orphan the kit adopted as their subreaper is killed (``subreaper.reap_adopted``), then the
caller writes what finished, marked incomplete, and exits 128 + the signal number.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from recoverykit.conformance.paused import release_all
from recoverykit.conformance.subreaper import reap_adopted

# SIGHUP does not exist on Windows: there the kit handles the two it has
SIGNALS: tuple[signal.Signals, ...] = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP")
                                            if hasattr(signal, name))


def exit_code(signum: int) -> int:
    """The shell's convention for a process ended by a signal: 128 + signum (143 SIGTERM, 130 SIGINT, 129 SIGHUP)."""
    return 128 + int(signum)


def stop_everything(rounds: int = 1) -> None:
    """Reap every process of this kit's runs; with ``rounds`` > 1, again until a round finds nothing (a case's
    thread may still have been starting an adapter while the round before ran), at most ``rounds`` times. Then
    SIGCONT whatever the pause nemesis froze that is still alive. Never raises: it runs on the way out."""
    from recoverykit.conformance.reaper import reap_owned
    for _ in range(rounds):
        with contextlib.suppress(Exception):
            if not reap_owned().targets:
                break
        time.sleep(0.05)
    with contextlib.suppress(Exception):
        release_all()
    with contextlib.suppress(Exception):
        reap_adopted()  # orphans that dropped the marker: the kit adopted them as their subreaper


@contextlib.contextmanager
def installed(handler: Callable[[int, Any], None], signals: tuple[signal.Signals, ...] = SIGNALS,
              keep: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """``handler`` for ``signals`` while the block runs, the previous handlers after (unless ``keep()`` says the
    process is on its way out). Off the main thread (where Python cannot install handlers) it does nothing; a
    SIGHUP that was ignored on entry stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # a SIGHUP ignored on entry (``nohup recoverykit certify ...``) stays ignored: the user asked the run to outlive
    # the terminal
    previous = {sig: signal.signal(sig, handler) for sig in signals
                if not (sig == getattr(signal, "SIGHUP", None) and signal.getsignal(sig) == signal.SIG_IGN)}
    try:
        yield
    finally:
        if not keep():
            for sig, old in previous.items():
                signal.signal(sig, old)
