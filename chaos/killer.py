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
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil
from recoverykit.model.errors import InvalidArgument

IDENTITY_TOLERANCE_S = 0.05  # create_time is derived from clock ticks (10 ms); recomputations agree well within this


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
        try:
            return cls(pid, psutil.Process(pid).create_time())
        except psutil.NoSuchProcess:
            return cls(pid, -1.0)  # already gone: it can never match a live process

    def process(self) -> psutil.Process | None:
        """The live process with this identity, or None if it is gone, a zombie, or the pid was reused."""
        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.create_time) > IDENTITY_TOLERANCE_S:
                return None
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None  # dead; reaping is the parent's business (a Popen must see its own exit)
            return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None

    def alive(self) -> bool:
        return self.process() is not None


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
    deadline = time.monotonic() + timeout
    while True:
        still = []
        for ref in pending:
            (still if ref.alive() else dead).append(ref)
        pending = still
        if not pending or time.monotonic() >= deadline:
            return dead, pending
        time.sleep(0.005)


def _signal(ref: ProcRef, sig: int) -> bool:
    proc = ref.process()
    if proc is None:
        return False
    try:
        proc.send_signal(sig)
        return True
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _protected() -> set[int]:
    """This process and its ancestors: the kit never signals the process it runs in or its parents."""
    me = psutil.Process()
    return {me.pid, *(p.pid for p in me.parents())}


def _refuse_self(refs: Iterable[ProcRef]) -> None:
    mine = _protected() & {r.pid for r in refs}
    if mine:
        raise InvalidArgument(f"refusing to signal pids {sorted(mine)}: they are this kit process or its "
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
            with contextlib.suppress(psutil.NoSuchProcess):
                out.append(ProcRef(child.pid, child.create_time()))
    return out


def freeze_tree(root: ProcRef | int | psutil.Process, rounds: int = 20) -> list[ProcRef]:
    """SIGSTOP the root and every descendant until the walk finds nothing new; returns the members."""
    root = ProcRef.of(root)
    _refuse_self([root])
    members: set[ProcRef] = set()
    frontier = [root]
    for _ in range(rounds):
        new = [r for r in frontier if r not in members]
        if not new:
            break
        for ref in new:
            _signal(ref, signal.SIGSTOP)
            members.add(ref)
        frontier = _descendants_of(members)  # one scan of the process table per round, not one per member
    return sorted(members)


def _descendants_of(roots: Iterable[ProcRef]) -> list[ProcRef]:
    children: dict[int, list[int]] = {}
    for proc in psutil.process_iter(["ppid"]):
        children.setdefault(proc.info["ppid"], []).append(proc.pid)
    alive = {ref.pid for ref in roots if ref.alive()}  # a reused pid is not the member we froze
    out, todo = [], [pid for pid in alive]
    while todo:
        for child in children.get(todo.pop(), []):
            with contextlib.suppress(psutil.Error):
                out.append(ProcRef(child, psutil.Process(child).create_time()))
                todo.append(child)
    return out


def kill_tree(root: ProcRef | int | psutil.Process, timeout: float = 5.0,
              extra: Iterable[ProcRef | int | psutil.Process] = ()) -> KillReport:
    """SIGKILL a process and all its descendants (plus ``extra``, e.g. a run's marked leftovers)."""
    members = set(freeze_tree(root))
    for other in _as_refs(extra):
        members.update(freeze_tree(other))
    return kill_all(members, timeout)


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
