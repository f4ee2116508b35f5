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
import time
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


def _reap(rounds: int = 1) -> None:
    """Reap every process of this kit's runs; with ``rounds`` > 1, again until a round finds nothing (a case's
    thread may still have been starting an adapter while the round before ran), at most ``rounds`` times."""
    from recoverykit.conformance.reaper import reap_owned
    for _ in range(rounds):
        with contextlib.suppress(Exception):
            if not reap_owned().targets:
                return
        time.sleep(0.05)


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
    _reap(rounds=10)
    code = exit_code(signum)
    where = (f"partial results marked incomplete in {results}" if results is not None
             else "no results.json was written (interrupted before the first case)")
    click.echo(f"interrupted by {name}: every process of the run was stopped; {where}; exit {code}", err=True)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
