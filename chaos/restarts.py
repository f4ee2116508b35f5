"""The restart kinds of seed 000, performed on a runtime held at an interruption point.

Kills are the kit's own (psutil, SIGKILL, verified by the process's exit, never by the adapter's
word) and only of pids that are provably of the case's run (``conformance.proc_guard``); a kill
that finds nothing to kill raises ``NothingKilled`` (the case is unknown, never a pass). The kinds
only the runtime can perform (frontend reload, normal exit, graceful worker restart, stop-all before
exit) go through the adapter's ``restart``. Each function leaves the
runtime started again and records a ``fault`` in the history with what it killed.

- worker_kill: SIGKILL every worker alone; tool children live on; start again.
- tree_kill: SIGKILL every runtime process and all their descendants (tools included); start again.
- long_downtime: tree kill, then start with the clock past the old two-hour window.
- host_identity_change: tree kill, then start with another host id (no silent takeover allowed).
- crash_during_recovery@R: tree kill, start armed to pause at recovery point R, kill there, start.
- frontend_reload / normal_exit / graceful_worker_restart: ask the adapter, then let the held process go.
- stop_all_exit: "quit and stop all tasks" (recorded as the user's stop_all), then the adapter's exit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from recoverykit.chaos.case_env import HOST_A, HOST_B, CaseEnv
from recoverykit.chaos.cases import Case
from recoverykit.conformance import killer, proc_guard
from recoverykit.conformance.broker import FailpointNotHit
from recoverykit.conformance.errors import NothingKilled  # a kill that killed nothing: unknown, never a pass
from recoverykit.conformance.history import NOTHING_KILLED
from recoverykit.model.catalogue import OLD_HIDDEN_EXPIRY_S, RestartKind
from recoverykit.model.errors import RecoveryKitError

LONG_DOWNTIME_S = OLD_HIDDEN_EXPIRY_S + 600  # ten minutes past the removed two-hour window
GRACE_BEFORE_RELEASE_S = 0.2  # let the adapter's SIGTERM land before the held process moves on


class KillFailed(RecoveryKitError):
    """A process the kit SIGKILLed is still alive: nothing after this can be trusted."""


@dataclass
class RestartOutcome:
    killed: list[int] = field(default_factory=list)
    second_reached: bool | None = None  # crash_during_recovery: was the recovery point reached?
    detail: dict = field(default_factory=dict)


def _refs(env: CaseEnv, procs, roles: set[str], during: str) -> list[killer.ProcRef]:
    """The listed processes of ``roles``, each vetted as a process of this case (``proc_guard``): a pid the
    adapter lists that is not of this run raises ``RefusedProcess`` before anything is signalled, recorded in
    the history as a ``kill_refused`` fault (so the bundle re-checks as the run judged)."""
    chosen = [p for p in procs if str(p.role.value if hasattr(p.role, "value") else p.role) in roles]
    vetted = proc_guard.vet_recorded(chosen, env.marker, adapter_pid=env.client.pid, during=during, fault=env.fault)
    return [killer.ProcRef(pid, ct) for pid, ct in vetted]


def _nonempty(env: CaseEnv, killed: list[int], what: str, procs, required: bool) -> list[int]:
    """``killed``; when it is empty, a ``nothing_killed`` fault in the history (so the bundle re-checks unknown,
    as the case was judged), and ``NothingKilled`` when the kill was ``required``."""
    if not killed:
        listed = [(p.pid, str(getattr(p.role, "value", p.role))) for p in procs]
        env.fault(NOTHING_KILLED, during=what.replace(" ", "_"), listed=listed, required=required)
    if required and not killed:
        raise NothingKilled(f"the {what} killed nothing: the adapter's processes reply listed {listed or 'no process'}"
                            ", so no runtime process was interrupted and the case proves nothing")
    return killed


def _verify(report: killer.KillReport, what: str) -> list[int]:
    if not report.ok:
        raise KillFailed(f"{what}: processes {[r.pid for r in report.survivors]} survived SIGKILL")
    return [r.pid for r in report.killed]


def worker_kill(env: CaseEnv, *, required: bool = True) -> list[int]:
    procs = env.processes()
    killed: list[int] = []
    for ref in _refs(env, procs, {"worker"}, RestartKind.WORKER_KILL.value):
        report, _children = killer.kill_worker_only(ref)
        killed += _verify(report, "worker kill")
    _nonempty(env, killed, "worker kill", procs, required)
    env.fault(RestartKind.WORKER_KILL.value, killed=killed, survivors=[p.pid for p in procs if p.pid not in killed])
    return killed


def tree_kill(env: CaseEnv, label: str = RestartKind.TREE_KILL.value, *, required: bool = True) -> list[int]:
    procs = env.processes()
    members = killer.freeze_trees(_refs(env, procs, {"control", "worker", "tool", "other"}, label))
    killed = _nonempty(env, _verify(killer.kill_all(members), "tree kill"), label.replace("_", " "), procs, required)
    env.fault(label, killed=killed)
    return killed


def _after_kill(env: CaseEnv) -> None:
    # holds in dead processes are gone with them; holds in survivors (control, a live probe) go on
    env.release_holds(cut_provider=True)


def wait_point_or_quiet(env: CaseEnv, point: str, timeout: float) -> bool:
    """True when a process paused at ``point``; False when the runtime went quiet without reaching it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            env.broker.wait_for_hit(point, timeout=0.5, held=True)
            return True
        except FailpointNotHit:
            pass
        reply = env.client.request(env.client._make("quiesce", timeout_s=0.1))
        if getattr(reply, "quiescent", False):
            try:  # the hit may have landed just before the quiesce answered
                env.broker.wait_for_hit(point, timeout=0.2, held=True)
                return True
            except FailpointNotHit:
                return False
    return False


def _start_twice(env: CaseEnv) -> None:
    """Two starts in flight at once: two recoverers race for the same work (a repeated notification)."""
    first, second = (env.request_async("start", failpoints="", clock_offset_s=0.0, host_id=HOST_A) for _ in "12")
    for thread in (first, second):
        thread.join(env.client.slow_timeout_s)
    if not all("reply" in t.result for t in (first, second)):  # type: ignore[attr-defined]
        raise RecoveryKitError("a doubled start did not complete; see history.jsonl")


def perform(env: CaseEnv, case: Case, double_start: bool = False) -> RestartOutcome:
    kind = RestartKind(case.kind)
    out = RestartOutcome()
    if kind is RestartKind.WORKER_KILL:
        out.killed = worker_kill(env)
        _after_kill(env)
        if double_start:
            _start_twice(env)
        else:
            env.start_runtime()
    elif kind in (RestartKind.TREE_KILL, RestartKind.LONG_DOWNTIME, RestartKind.HOST_IDENTITY_CHANGE):
        out.killed = tree_kill(env, kind.value)
        _after_kill(env)
        if kind is RestartKind.LONG_DOWNTIME:
            env.fault("clock_jump", seconds=LONG_DOWNTIME_S)
            env.start_runtime(clock_offset_s=LONG_DOWNTIME_S)
        elif kind is RestartKind.HOST_IDENTITY_CHANGE:
            env.start_runtime(host_id=HOST_B)
        elif double_start:
            _start_twice(env)
        else:
            env.start_runtime()
    elif kind is RestartKind.CRASH_DURING_RECOVERY:
        out.killed = tree_kill(env, "tree_kill")
        _after_kill(env)
        env.start_runtime(failpoints=f"{case.second}=1*pause")
        out.second_reached = wait_point_or_quiet(env, case.second, env.timeout_s)
        if out.second_reached:
            out.killed += tree_kill(env, kind.value)
            _after_kill(env)
            env.start_runtime()
        out.detail["second_point"] = case.second
    elif kind is RestartKind.FRONTEND_RELOAD:
        env.fault(kind.value)
        env.request("restart", kind=kind.value, failpoints=None, clock_offset_s=None, host_id=None)
        env.release_holds(cut_provider=False)
    elif kind in (RestartKind.NORMAL_EXIT, RestartKind.GRACEFUL_WORKER_RESTART, RestartKind.STOP_ALL_EXIT):
        if kind is RestartKind.STOP_ALL_EXIT:
            stop = env.request_async("stop_all")
            time.sleep(GRACE_BEFORE_RELEASE_S)
            env.release_holds(cut_provider=False)
            stop.join(env.timeout_s)
        env.fault(kind.value)
        restart = env.request_async("restart", kind=kind.value, failpoints="", clock_offset_s=None, host_id=None)
        time.sleep(GRACE_BEFORE_RELEASE_S)
        env.release_holds(cut_provider=False)
        restart.join(env.client.slow_timeout_s)
        if "reply" not in restart.result:  # type: ignore[attr-defined]
            raise RecoveryKitError(f"the adapter did not complete restart {kind.value}; see history.jsonl")
    else:  # pragma: no cover - every RestartKind is handled above
        raise RecoveryKitError(f"restart kind {kind} has no procedure")
    return out
