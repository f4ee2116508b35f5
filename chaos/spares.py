"""Warm spare adapters: the next case's adapter process starts while the current case runs.

Every case starts its own adapter, and its interpreter start and imports (~150-200 ms for the
reference runtime, which also forks its zygote at launch) do not depend on the case: everything
that does (data dir, provider, failpoint broker, probe tools) arrives with ``init``. So inside a
``warm_spares()`` block (a run of many cases), once a case's runtime is up, spares for the same
adapter command are launched, each in its own private run dir, until ``DEPTH`` of them are idle
(``CaseEnv.start_runtime``); a later case adopts one instead of paying the start itself. Leaving the
block closes the idle spares; outside any block nothing is pooled.

A spare is exactly what a cold start would have produced a little earlier: the same argv, the same
environment (a spare is adopted only while ``os.environ`` is unchanged), a fresh private run dir and a
fresh run marker owned by this kit process. Hygiene is unchanged: a case reaps its marker whether it
adopted a spare or not; idle spares are closed by ``close_all`` (also at exit); if this process is
SIGKILLed, an idle spare reads EOF on stdin and exits, and ``reap_stale`` kills whatever it started.

A spare starts at a lower priority (``SPARE_NICE`` above this process): its imports are speculative
work and must not take CPU from the case being run, whose timings and races are what is under test.
Adopting it raises its whole process tree back to this process's priority; where the OS refuses
that (no CAP_SYS_NICE), the case runs at the spare's priority, like every other case, and the kit
alone keeps precedence.

``RECOVERYKIT_WARM_SPARES=0`` turns the pool off (every case starts its own adapter).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
from recoverykit.conformance.client import AdapterClient
from recoverykit.conformance.client_process import peek_exit
from recoverykit.conformance.reaper import new_marker, reap

ENV_SWITCH = "RECOVERYKIT_WARM_SPARES"
DEPTH = 2  # idle spares kept per adapter command: each one gets two cases' time to start
MAX_IDLE = 4  # idle spares in all (the oldest goes first)
# pytest rewrites this for every test item: a difference in it does not make a spare another adapter
VOLATILE = frozenset({"PYTEST_CURRENT_TEST"})
SPARE_NICE = 10


@dataclass
class Spare:
    run_dir: Path
    marker: str
    client: AdapterClient


def enabled() -> bool:
    """Is a ``warm_spares()`` block open in this process (and the pool not switched off)?"""
    return POOL.active > 0 and os.environ.get(ENV_SWITCH, "1") not in ("0", "false", "off")


@contextlib.contextmanager
def warm_spares() -> Iterator[SparePool]:
    """Pool adapters for the cases run inside; idle spares are closed (and their dirs removed) on exit."""
    with POOL._lock:
        POOL.active += 1
    try:
        yield POOL
    finally:
        with POOL._lock:
            POOL.active -= 1
            last = POOL.active == 0
        if last:
            POOL.close_all()


def _key(argv: list[str], base_dir: str | os.PathLike | None) -> str:
    env = "\0".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k not in VOLATILE)
    return hashlib.sha256(repr((argv, str(base_dir), env)).encode()).hexdigest()


class SparePool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[tuple[str, Spare]] = []  # in launch order: the oldest first
        self._closed = False
        self.active = 0

    def idle(self) -> list[Spare]:
        with self._lock:
            return [spare for _, spare in self._idle]

    def take(self, argv: list[str], base_dir: str | os.PathLike | None) -> Spare | None:
        """An idle spare for this command and environment, still running, or None."""
        key = _key(argv, base_dir)
        with self._lock:
            for entry in [e for e in self._idle if e[0] == key]:
                self._idle.remove(entry)
                spare = entry[1]
                if spare.client.pid is not None and peek_exit(spare.client.pid) is None:
                    _set_priority(spare.client.pid, os.getpriority(os.PRIO_PROCESS, 0), tree=True)
                    return spare
                _discard(spare)  # it died while idle: the case starts its own, as if there were no pool
        return None

    def top_up(self, argv: list[str], base_dir: str | os.PathLike | None, make_dir, depth: int = DEPTH) -> None:
        """Launch spares for this command until ``depth`` of them are idle."""
        key = _key(argv, base_dir)
        with self._lock:
            missing = depth - sum(1 for k, _ in self._idle if k == key)
        for _ in range(missing):
            self.launch(argv, base_dir, make_dir)

    def launch(self, argv: list[str], base_dir: str | os.PathLike | None, make_dir) -> None:
        """Start one spare for the next case (a cheap fork/exec here; its imports run in the child)."""
        key = _key(argv, base_dir)
        with self._lock:
            if self._closed:
                return
            while len(self._idle) >= MAX_IDLE:  # make room: the oldest spare goes
                _discard(self._idle.pop(0)[1])
            run_dir, marker = make_dir(base_dir, "rkc-"), new_marker()
            client = AdapterClient(argv, run_dir / "adapter", run_marker=marker)
            try:
                client.start()
            except Exception:  # the case that needs it will start (and fail) the same way and say why
                shutil.rmtree(run_dir, ignore_errors=True)
                return
            _set_priority(client.pid, os.getpriority(os.PRIO_PROCESS, 0) + SPARE_NICE, tree=False)
            self._idle.append((key, Spare(run_dir, marker, client)))

    def close_all(self) -> int:
        """Close every idle spare; how many there were."""
        with self._lock:
            spares = [spare for _, spare in self._idle]
            self._idle.clear()
        for spare in spares:
            _discard(spare)
        return len(spares)

    def shut(self) -> None:
        with self._lock:
            self._closed = True
        self.close_all()


def _set_priority(pid: int | None, nice: int, *, tree: bool) -> None:
    """Best effort: the process (and, with ``tree``, everything it started) gets this nice value."""
    if pid is None:
        return
    try:
        procs = [psutil.Process(pid)]
        if tree:
            procs += procs[0].children(recursive=True)
    except psutil.Error:
        return
    for proc in procs:
        with contextlib.suppress(OSError, psutil.Error):  # gone, or raising priority is not allowed here
            os.setpriority(os.PRIO_PROCESS, proc.pid, min(nice, 19))


def _discard(spare: Spare) -> None:
    with contextlib.suppress(Exception):  # an idle adapter holds nothing: no polite shutdown needed
        reap(spare.marker)
    with contextlib.suppress(Exception):
        spare.client.close()
    shutil.rmtree(spare.run_dir, ignore_errors=True)


POOL = SparePool()
atexit.register(POOL.shut)
