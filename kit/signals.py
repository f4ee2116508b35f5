"""SIGTERM and SIGINT end a run like the kit's other exits: reap, write partial results, say so, exit.

``certify`` and ``chaos`` run inside ``handled()``. The first SIGTERM or SIGINT kills every process
carrying a run marker this kit process made (adapters, runtimes, warm spares, the pytest workers of
``chaos --workers N`` and their cases), so threads waiting on those processes return at once, then
raises ``Interrupted`` (a KeyboardInterrupt) in the main thread. On its way out each command writes
what had finished, marked ``"incomplete": true``; ``finish`` reaps again (whatever started in
between), prints one line and exits 128 + the signal number: 143 for SIGTERM, 130 for SIGINT. A
second signal during that cleanup is ignored, so it cannot cut the partial results short.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import click
from recoverykit.model.errors import Interrupted

SIGNALS = (signal.SIGTERM, signal.SIGINT)
_STOPPING: list[int] = []  # the signal being handled, once one came


def stopping() -> bool:
    """True once a signal is being handled (progress output then stays quiet: later cases were cut by it)."""
    return bool(_STOPPING)


def exit_code(signum: int) -> int:
    """The shell's convention for a process ended by a signal: 128 + signum (143 SIGTERM, 130 SIGINT)."""
    return 128 + int(signum)


def _reap() -> None:
    from recoverykit.conformance.reaper import reap_owned
    with contextlib.suppress(Exception):
        reap_owned()


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Turn SIGTERM and SIGINT into ``Interrupted`` after reaping every process of this kit's runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    def on_signal(signum: int, frame: object) -> None:
        if _STOPPING:
            return  # already on the way out: let the cleanup and the partial results finish
        _STOPPING.append(signum)
        _reap()
        raise Interrupted(signum, signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in SIGNALS}
    try:
        yield
    finally:
        if not _STOPPING:  # once interrupted, stay deaf to signals until finish() exits
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def finish(exc: BaseException, results: Path | None) -> NoReturn:
    """Reap again, print one line, exit 128 + signum at once (threads still winding down are not waited for)."""
    signum = getattr(exc, "signum", signal.SIGINT)
    name = signal.Signals(signum).name
    _reap()
    code = exit_code(signum)
    where = (f"partial results marked incomplete in {results}" if results is not None
             else "no results.json was written (interrupted before the first case)")
    click.echo(f"interrupted by {name}: every process of the run was stopped; {where}; exit {code}", err=True)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
