"""SIGTERM, SIGINT and SIGHUP end a run like the kit's other exits: reap, write partial results, say so, exit.

``certify`` and ``chaos`` run inside ``handled()``. The first SIGTERM, SIGINT or SIGHUP (a closed terminal, a
dropped ssh session, some CI cancellations) kills every process carrying a run marker this kit process made
(adapters, runtimes, warm spares, the pytest workers of ``chaos --workers N`` and their cases), so threads
waiting on those processes return at once, lets go on (SIGCONT) whatever the pause nemesis had stopped
(``conformance.interrupts``), then raises ``Interrupted`` (a KeyboardInterrupt) in the main thread. On its way
out each command writes what had finished, marked ``"incomplete": true``; ``finish`` reaps again (whatever
started in between), prints one line and exits 128 + the signal number: 143 for SIGTERM, 130 for SIGINT, 129
for SIGHUP. A second signal during that cleanup is ignored, so it cannot cut the partial results short.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import click
from recoverykit.conformance import interrupts
from recoverykit.model.errors import Interrupted

SIGNALS = interrupts.SIGNALS
exit_code = interrupts.exit_code
_STOPPING: list[int] = []  # the signal being handled, once one came


def stopping() -> bool:
    """True once a signal is being handled (progress output then stays quiet: later cases were cut by it)."""
    return bool(_STOPPING)


def _reap(rounds: int = 1) -> None:
    interrupts.stop_everything(rounds)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Turn SIGTERM, SIGINT and SIGHUP into ``Interrupted`` after reaping every process of this kit's runs."""
    def on_signal(signum: int, frame: object) -> None:
        if _STOPPING:
            return  # already on the way out: let the cleanup and the partial results finish
        _STOPPING.append(signum)
        _reap()
        raise Interrupted(signum, signal.Signals(signum).name)

    # once interrupted, stay deaf to signals until finish() exits
    with interrupts.installed(on_signal, SIGNALS, keep=stopping):
        yield


def finish(exc: BaseException, results: Path | None) -> NoReturn:
    """Reap again, print one line, exit 128 + signum at once (threads still winding down are not waited for)."""
    signum = getattr(exc, "signum", signal.SIGINT)
    name = signal.Signals(signum).name
    _reap(rounds=10)
    code = exit_code(signum)
    where = (f"partial results marked incomplete in {results}" if results is not None
             else "no results.json was written (interrupted before the first case)")
    with contextlib.suppress(Exception):  # after a SIGHUP the terminal may be gone: the exit code still says it
        click.echo(f"interrupted by {name}: every process of the run was stopped; {where}; exit {code}", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
