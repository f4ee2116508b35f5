"""The process killer: SIGKILL of one process, a whole tree, or a worker whose children live on.

Every target is named by (pid, create_time), so a pid the OS has recycled for another process is
never signalled. A tree is frozen before it is killed: every descendant found (children started
in new sessions included, since they keep their parent) gets SIGSTOP, the tree is walked again
until no new process appears, and only then does every member get SIGKILL, so nothing forks
away in between. Each kill is verified: a process counts as dead when it is gone or a zombie
(a zombie has stopped for good; its parent merely has not reaped it yet).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil
from recoverykit.model.errors import InvalidArgument

IDENTITY_TOLERANCE_S = 0.05  # create_time is derived from clock ticks (10 ms); recomputations agree well within this
_PROC = "/proc"


@functools.lru_cache(maxsize=1)
def _clock() -> tuple[float, int]:
    """This kit process's one boot time (read once) and the clock tick: every start time the kit computes itself
    uses this base, so its own records agree with each other even if the wall clock steps meanwhile."""
    return psutil.boot_time(), os.sysconf("SC_CLK_TCK")


def create_time(pid: int) -> float | None:
    """The start time of a live pid on the kit's fixed base (``_clock``), or None if it is gone."""
    st = proc_stat(pid)
    return None if st is None else st[2]


def since_boot(started: float) -> float:
    """A start time on the kit's base as seconds since boot: the same in every kit process, whatever the clock."""
    return started - _clock()[0]


def same_start(recorded: float | None, actual: float) -> bool:
    """Whether a recorded create_time names the process whose start time (on the kit's base) is ``actual``.

    A process's start is fixed in clock ticks since boot, but a create_time is that plus the boot time, which the
    system derives from the wall clock: a clock step (NTP, a virtual machine paused or forked, as on the machines
    CI runs on) moves every create_time computed after it. The kit computes its own with one boot time; a value
    another process computed (an adapter's ``processes``, a probe's witness record) may rest on the boot time
    before or after a step, so it matches if it agrees on either base. Without this, a step made every process
    look recycled: kills were skipped as "already gone" and waits ran into their timeouts (CI at 5e65cfa)."""
    if recorded is None:
        return False
    if abs(recorded - actual) <= IDENTITY_TOLERANCE_S:
        return True  # the same base (the common case: no step, or a record the kit made itself)
    return abs(recorded - (actual - _clock()[0] + psutil.boot_time())) <= IDENTITY_TOLERANCE_S  # the current base


def proc_stat(pid: int) -> tuple[str, int, float] | None:
    """(state, ppid, create_time) of a live pid, or None if it is gone.

    On Linux one read of ``/proc/<pid>/stat``, computed as psutil computes create_time; a kill phase
    asks this dozens of times, and building a psutil.Process each time was most of its cost.
    """
    if not os.path.isdir(_PROC):
        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                return proc.status(), proc.ppid(), proc.create_time()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()  # the command name may contain spaces and parentheses
    boot, ticks = _clock()
    return (psutil.STATUS_ZOMBIE if fields[0] == b"Z" else "alive"), int(fields[1]), boot + int(fields[19]) / ticks


@dataclass(frozen=True, order=True)
class ProcRef:
    """A process identity that survives pid reuse."""

    pid: int
    create_time: float

    @classmethod
    def of(cls, target: ProcRef | int | psutil.Process | object) -> ProcRef:
        if isinstance(target, ProcRef):
            return target
        pid = target.pid if hasattr(target, "pid") else target
        if not isinstance(pid, int):
            raise InvalidArgument(f"a process is named by a pid, a ProcRef or a psutil.Process, got {target!r}")
        started = create_time(pid)
        return cls(pid, -1.0 if started is None else started)  # -1: already gone, it can never match a live one

    def process(self) -> psutil.Process | None:
        """The live process with this identity, or None if it is gone, a zombie, or the pid was reused."""
        try:
            started = create_time(self.pid)
            if started is None or not same_start(self.create_time, started):
                return None
            proc = psutil.Process(self.pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None  # dead; reaping is the parent's business (a Popen must see its own exit)
            return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None

    def alive(self) -> bool:
        st = proc_stat(self.pid)
        if st is None or st[0] == psutil.STATUS_ZOMBIE:
            return False
        return same_start(self.create_time, st[2])


@dataclass
class KillReport:
    """What a kill did: every target, which died by our signal, which were gone, which survived."""

    targets: list[ProcRef] = field(default_factory=list)
    killed: list[ProcRef] = field(default_factory=list)
    already_gone: list[ProcRef] = field(default_factory=list)
    survivors: list[ProcRef] = field(default_factory=list)
    graceful: bool | None = None  # graceful_stop only: did SIGTERM suffice?

    @property
    def ok(self) -> bool:
        return not self.survivors


def _as_refs(targets: Iterable[ProcRef | int | psutil.Process]) -> list[ProcRef]:
    return [ProcRef.of(t) for t in targets]


def wait_dead(refs: Iterable[ProcRef], timeout: float) -> tuple[list[ProcRef], list[ProcRef]]:
    """(dead, still alive) after waiting up to ``timeout`` seconds."""
    pending = list(refs)
    dead: list[ProcRef] = []
    deadline, delay = time.monotonic() + timeout, 0.0005
    while True:
        still = []
        for ref in pending:
            (still if ref.alive() else dead).append(ref)
        pending = still
        if not pending or time.monotonic() >= deadline:
            return dead, pending
        time.sleep(delay)  # a SIGKILLed process is usually gone within milliseconds: poll finely, back off late
        delay = min(delay * 1.5, 0.005)


def _signal(ref: ProcRef, sig: int) -> bool:
    if not ref.alive():
        return False
    try:
        os.kill(ref.pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _protected() -> set[int]:
    """pid 1, this process and its ancestors: the kit never signals init, the process it runs in or its parents."""
    return {1, *_ancestry(os.getpid())}


@functools.lru_cache(maxsize=4)
def _ancestry(pid: int) -> tuple[int, ...]:
    # Cached per process: a kill phase checks this for every target, and the chain above the kit does not
    # change under it (an ancestor that exits is replaced by init or a subreaper, never by a new target).
    me = psutil.Process(pid)
    return (me.pid, *(p.pid for p in me.parents()))


def _refuse_self(refs: Iterable[ProcRef]) -> None:
    mine = _protected() & {r.pid for r in refs}
    if mine:
        raise InvalidArgument(f"refusing to signal pids {sorted(mine)}: they are init, this kit process or its "
                              "ancestors; kill the runtime's processes, not the kit's own")


def kill_all(targets: Iterable[ProcRef | int | psutil.Process], timeout: float = 5.0) -> KillReport:
    """SIGKILL every target (freeze first so none can react), then verify each is dead."""
    refs = sorted(set(_as_refs(targets)))
    _refuse_self(refs)
    report = KillReport(targets=refs)
    for ref in refs:
        _signal(ref, signal.SIGSTOP)
    for ref in refs:
        (report.killed if _signal(ref, signal.SIGKILL) else report.already_gone).append(ref)
    _, report.survivors = wait_dead(report.killed, timeout)
    return report


def kill(target: ProcRef | int | psutil.Process, timeout: float = 5.0) -> KillReport:
    """SIGKILL one process; its children (if any) live on."""
    return kill_all([target], timeout)


def descendants(root: ProcRef) -> list[ProcRef]:
    proc = root.process()
    if proc is None:
        return []
    out = []
    with contextlib.suppress(psutil.NoSuchProcess):
        for child in proc.children(recursive=True):
            started = create_time(child.pid)
            if started is not None:
                out.append(ProcRef(child.pid, started))
    return out


def freeze_tree(root: ProcRef | int | psutil.Process, rounds: int = 20) -> list[ProcRef]:
    """SIGSTOP the root and every descendant until the walk finds nothing new; returns the members."""
    return freeze_trees([root], rounds)


def freeze_trees(roots: Iterable[ProcRef | int | psutil.Process], rounds: int = 20) -> list[ProcRef]:
    """``freeze_tree`` for several roots at once: one scan of the process table per round for all of them."""
    roots = _as_refs(roots)
    _refuse_self(roots)
    members: set[ProcRef] = set()
    frontier, mine = roots, _protected()
    for _ in range(rounds):
        new = [r for r in frontier if r not in members and r.pid not in mine]  # a descendant is never the kit
        if not new:
            break
        for ref in new:
            _signal(ref, signal.SIGSTOP)
            members.add(ref)
        frontier = _descendants_of(members)
    return sorted(members)


def _process_table() -> dict[int, list[ProcRef]]:
    """ppid -> live children (as ProcRefs), from one pass over the process table."""
    children: dict[int, list[ProcRef]] = {}
    if not os.path.isdir(_PROC):
        for proc in psutil.process_iter(["ppid", "create_time"]):
            children.setdefault(proc.info["ppid"], []).append(ProcRef(proc.pid, proc.info["create_time"] or -1.0))
        return children
    for entry in os.listdir(_PROC):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st is not None:
                children.setdefault(st[1], []).append(ProcRef(int(entry), st[2]))
    return children


def _descendants_of(roots: Iterable[ProcRef]) -> list[ProcRef]:
    children = _process_table()
    out, todo = [], [ref.pid for ref in roots if ref.alive()]  # a reused pid is not the member we froze
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child.pid)
    return out


def kill_tree(root: ProcRef | int | psutil.Process, timeout: float = 5.0,
              extra: Iterable[ProcRef | int | psutil.Process] = ()) -> KillReport:
    """SIGKILL a process and all its descendants (plus ``extra``, e.g. a run's marked leftovers)."""
    return kill_all(freeze_trees([root, *extra]), timeout)


def kill_worker_only(worker: ProcRef | int | psutil.Process, timeout: float = 5.0) -> tuple[KillReport, list[ProcRef]]:
    """SIGKILL the worker alone; returns the report and the children that were alive and are left running."""
    worker = ProcRef.of(worker)
    children = descendants(worker)
    report = kill(worker, timeout)
    return report, [c for c in children if c.alive()]


def graceful_stop(target: ProcRef | int | psutil.Process, timeout: float = 10.0,
                  kill_timeout: float = 5.0) -> KillReport:
    """SIGTERM, wait up to ``timeout``; then SIGKILL. ``graceful`` says whether SIGTERM sufficed."""
    ref = ProcRef.of(target)
    _refuse_self([ref])
    report = KillReport(targets=[ref])
    if not _signal(ref, signal.SIGTERM):
        report.already_gone.append(ref)
        report.graceful = True
        return report
    _, alive = wait_dead([ref], timeout)
    if not alive:
        report.graceful = True
        return report
    report.graceful = False
    forced = kill(ref, kill_timeout)
    report.killed, report.survivors = forced.killed, forced.survivors
    return report


def exit_status(proc: subprocess.Popen | psutil.Process | int, timeout: float = 10.0) -> int | None:
    """Exit code of a child of this process (negative: killed by that signal); None if not our child.

    This is how the kit judges a ``crash`` failpoint: by the exit the kernel reports, not by what the
    runtime says.
    """
    if isinstance(proc, subprocess.Popen):
        return proc.wait(timeout=timeout)  # Popen reaps its own child; psutil would leave it confused
    try:
        p = proc if isinstance(proc, psutil.Process) else psutil.Process(proc)
        return p.wait(timeout=timeout)
    except psutil.NoSuchProcess:
        return None
