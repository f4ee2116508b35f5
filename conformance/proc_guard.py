"""Which pids the kit may signal: only processes of its own run; never itself, its ancestors or init.

The pids the kit kills come from the adapter's ``processes`` reply, which is the adapter's word. So
before any signal is sent, every listed pid is checked against the kernel:

- pid 1, the kit's own process and its ancestors are refused, whatever they carry;
- the adapter process itself is refused (the protocol lists runtime processes, never the adapter);
- the process must carry the run marker (``RECOVERYKIT_RUN_MARKER``) in its environment, or descend
  from a process that does (a runtime child that exec'd with a cleaned environment);
- its start time must match the listed ``create_time`` (a reused pid or a wrong listing is refused).

A listed pid that is already gone (or a zombie) is skipped: there is nothing left to kill. Anything
else is refused with ``RefusedProcess``, a protocol break (invalid) that names the pid, before any
process has been signalled. ``vet_recorded`` also writes the refusal into the run's history as a
``kill_refused`` fault (the pid and why), so ``recoverykit check`` on the stored bundle judges it as the
run did: the refusal is evidence, and evidence lives in the history.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import Any

import psutil
from recoverykit.conformance import proc_markers
from recoverykit.conformance.errors import RefusedProcess
from recoverykit.conformance.history import KILL_REFUSED
from recoverykit.conformance.killer import proc_stat, same_start

MARKER_ENV = "RECOVERYKIT_RUN_MARKER"


def protected() -> frozenset[int]:
    """pid 1, this process and its ancestors: never signalled by the kit (the ancestry is read once per
    process: the chain above the kit does not change under it)."""
    return frozenset({1, *_ancestry(os.getpid())})


@functools.lru_cache(maxsize=4)
def _ancestry(pid: int) -> tuple[int, ...]:
    try:
        me = psutil.Process(pid)
        return (me.pid, *(p.pid for p in me.parents()))
    except psutil.Error:
        return (pid, os.getppid())


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _refuse(pid: int, why: str) -> RefusedProcess:
    exc = RefusedProcess(f"the kit refused to kill pid {pid}: {why}; nothing was signalled (processes must name "
                         "only live processes of this run)", doc="docs/protocol.md#processes")
    exc.pid, exc.why = pid, why
    return exc


def vet_recorded(listed: Iterable[Any], marker: str, *, adapter_pid: int | None, during: str,
                 fault: Callable[..., Any]) -> list[tuple[int, float]]:
    """``vet``, and a refusal recorded first as a ``kill_refused`` fault by ``fault(kind, **detail)`` (the
    recorder's): the pid, why, the kit's action it stopped (``during``) and the whole message."""
    try:
        return vet(listed, marker, adapter_pid=adapter_pid)
    except RefusedProcess as exc:
        fault(KILL_REFUSED, pid=getattr(exc, "pid", None), why=getattr(exc, "why", exc.reason), during=during,
              text=str(exc)[:2000])
        raise


def of_run(pid: int, marker: str, stop: frozenset[int] = frozenset()) -> bool:
    """Does ``pid`` carry ``marker``, or descend from a process that does (up to, not through, ``stop``)?

    Walks up by ``/proc/<pid>/stat`` (``killer.proc_stat``), one read per step, and stops at the first
    ancestor that carries the marker: a runtime process usually carries it itself.
    """
    seen: set[int] = set()
    while pid > 0 and pid not in seen:
        if pid in stop:
            return False
        seen.add(pid)
        if proc_markers.value_of(pid, MARKER_ENV) == marker:
            return True
        st = proc_stat(pid)
        if st is None:
            return False
        pid = st[1]
    return False


def vet(listed: Iterable[Any], marker: str, *, adapter_pid: int | None = None) -> list[tuple[int, float]]:
    """(pid, create_time) of each listed process the kit may kill; raises ``RefusedProcess`` for any other."""
    guard = protected()
    out: list[tuple[int, float]] = []
    for item in listed:
        pid, listed_ct = _field(item, "pid"), _field(item, "create_time")
        if pid == 1:
            raise _refuse(pid, "pid 1 is the system's init")
        if pid in guard:
            raise _refuse(pid, "it is the kit's own process or one of its ancestors")
        if adapter_pid is not None and pid == adapter_pid:
            raise _refuse(pid, "it is the adapter process itself (processes lists runtime processes only)")
        if not isinstance(pid, int) or pid < 1:
            raise _refuse(pid, "it is not a process id")
        st = proc_stat(pid)
        if st is None:
            continue  # gone since it was listed: nothing left to kill
        status, _, actual = st
        if status == psutil.STATUS_ZOMBIE:
            continue  # already dead; only its parent's wait is missing
        if listed_ct is not None and not same_start(float(listed_ct), actual):
            raise _refuse(pid, f"it was listed with create_time {listed_ct} but the process with that pid started "
                               f"at {actual:.3f} (a reused pid, or not the process meant)")
        if not of_run(pid, marker, guard):
            raise _refuse(pid, f"it does not carry this run's marker ({MARKER_ENV}={marker}) and descends from no "
                               "process that does: it is not a process of this run")
        out.append((pid, actual))
    return out
