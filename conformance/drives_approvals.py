"""The drives of the approval scenarios (profile ``approvals``), declared in ``scenarios.SCENARIOS``.

Each starts the same way: an unknown-effect write (``probe_unknown`` holding after its effect) and a tree kill,
so the recovery turn is in the scope of an uncertain effect and its next write needs a one-time approval. What
ran, and under which approval, is judged by ``checks_approvals`` from the witness log, the kit's own approve /
deny operations and the provider's ledger; a drive adds a result only where it alone saw the moment.

The chat-core drives whose recovery turn asks for a write (``repair_twice``, ``effect_boundary``) use
``deny_pending`` on a runtime that declares approvals: the user denies, so the write stays unrun, as those
scenarios expect of a runtime that refuses outright.
"""

from __future__ import annotations

import time
from typing import Any

from recoverykit.conformance import scenarios as sc
from recoverykit.conformance import storage_fault
from recoverykit.conformance.checker import ClauseResult, _result
from recoverykit.conformance.environment import Run
from recoverykit.conformance.pacing import DWELL
from recoverykit.conformance.witness import read_witness
from recoverykit.model.catalogue import StorageFault, Verdict

CONSUME_POINT = "approval.consume.before"


def pending(snapshot: dict[str, Any], work_id: str | None = None) -> list[str]:
    return [a["approval_id"] for a in snapshot.get("approvals") or []
            if a["status"] == "pending" and (work_id is None or a["work_id"] == work_id)]


def wait_pending(run: Run, n: int = 1, timeout_s: float = sc.SETTLE_S) -> tuple[list[str], dict[str, Any]]:
    """Settle until at least ``n`` approvals are pending (a waiting item is quiescent); the ids and snapshot.
    ``timeout_s`` is a window (scaled by the run's pacing)."""
    deadline = time.monotonic() + run.window(timeout_s)
    while True:  # (each settle is given what is left: unscaled back, since settle scales its window)
        quiescent, snap = run.settle(max(1.0, deadline - time.monotonic()) / run.pacing.scale)
        found = pending(snap)
        waiting = any(w.get("reason_code") == "awaiting_approval" for w in snap.get("work_items") or [])
        if len(found) >= n or time.monotonic() >= deadline or (quiescent and not waiting):
            return found, snap
        time.sleep(0.1)


def decide_all(run: Run, ids: list[str], op: str = "approve") -> None:
    for approval_id in ids:
        run.op(op, approval_id=approval_id)


def deny_pending(run: Run, snapshot: dict[str, Any]) -> bool:
    """On a runtime that declares approvals: deny what is pending (the chat-core user never lets a write run
    in the scope of an unknown effect). True if something was denied."""
    if "approvals" not in run.profiles:
        return False
    ids = pending(snapshot)
    decide_all(run, ids, "deny")
    return bool(ids)


def wait_held_denying(run: Run, script_id: str, timeout_s: float = sc.SETTLE_S):
    """``run.wait_held`` for ``script_id``; meanwhile, on a runtime that declares approvals, deny what waits."""
    if "approvals" not in run.profiles:
        return run.wait_held(timeout_s, script_id=script_id)
    deadline = time.monotonic() + run.window(timeout_s)
    while True:  # (a slice of at most 1 s at scale 1: the deadline holds the whole window)
        try:
            return run.wait_held(min(1.0, max(0.05, deadline - time.monotonic())), script_id=script_id)
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise
        deny_pending(run, run.observe())


def _crash_after_write(run: Run, script_id: str, **start: Any) -> str | None:
    """Start, submit, the write holds after its effect, a tree kill, start again: an uncertain effect."""
    run.start(**start)
    work_id = sc.submit(run, script_id)
    run.wait_witness(lambda e: e.tool == "probe_unknown" and e.done, timeout_s=sc.SETTLE_S)
    sc.restart_kit_side(run, "tree_kill")
    return work_id


def _asked(ids: list[str]) -> list[ClauseResult]:
    if ids:
        return []
    return [_result("APR-02", Verdict.UNKNOWN, "the runtime asked for no approval for the write after the unknown "
                                               "effect (nothing to judge)")]


def drive_pending_restart(run: Run) -> list[ClauseResult]:
    """An approval asked for, a tree kill while it is pending: still pending, the work still waiting, nothing
    run; then the user approves and the write runs once."""
    _crash_after_write(run, "apa")
    ids, _ = wait_pending(run)
    sc.restart_kit_side(run, "tree_kill")
    _, after = run.settle(sc.SETTLE_S)
    decide_all(run, pending(after))
    run.settle(sc.SETTLE_S)
    return _asked(ids)


PAUSED_WATCH_S = 0.5  # how long the kit watches paused work after approving its write


def drive_consume_crash(run: Run) -> list[ClauseResult]:
    """Approve, then a tree kill while the approved call is about to consume its approval, then a start: the
    approval is consumed once and the write runs once at most."""
    _crash_after_write(run, "apc", failpoints=f"{CONSUME_POINT}=1*pause")
    ids, _ = wait_pending(run)
    decide_all(run, ids)
    if ids:
        run.wait_hit(CONSUME_POINT, sc.SETTLE_S, held=True)
        if storage_fault.supports(run, StorageFault.NEWER_SCHEMA) is None:
            _start_on_unreadable_state(run)
        sc.restart_kit_side(run, "tree_kill", failpoints="")
        # the approved write runs and holds after its effect: a second tree kill, so its outcome is unknown and
        # the approval, consumed, must not let it run again
        again = run.wait_witness(lambda e: e.tool == "probe_unknown" and e.done and e.probe_token.split(".")[-3] == "1",
                                 timeout_s=sc.SETTLE_S)
        if again:
            sc.restart_kit_side(run, "tree_kill")
    run.release_probes()
    _, final = run.settle(sc.SETTLE_S)
    decide_all(run, pending(final))  # a runtime that asks again after the crash: the user approves again
    run.settle(sc.SETTLE_S)
    return _asked(ids)


UNREADABLE_DWELL_S = DWELL.seconds  # how long the runtime runs on a store it cannot read, an approved write waiting


def _start_on_unreadable_state(run: Run) -> None:
    """APR-04: the approved write waits at its consumption; a tree kill, the kit puts the store at a newer schema
    (state this runtime cannot read), a start: the write must not run, until the store is back."""
    run.kill("tree_kill")
    applied = storage_fault.apply(run, StorageFault.NEWER_SCHEMA, script="apc")
    run.start(failpoints="")
    seen = len(read_witness(run.witness_path).executions) if run.witness_path.exists() else 0
    deadline = time.monotonic() + run.window(UNREADABLE_DWELL_S)
    while time.monotonic() < deadline and (
            not run.witness_path.exists() or len(read_witness(run.witness_path).executions) <= seen):
        time.sleep(0.05)  # a runtime that runs the write anyway shows itself in the witness log
    run.observe()
    storage_fault.restore(run, applied)


def drive_deny(run: Run) -> list[ClauseResult]:
    """The user pauses the waiting work and denies: nothing goes on until the Resume (APR-05); then the write never
    runs, and the work goes on without it."""
    work_id = _crash_after_write(run, "apd")
    ids, _ = wait_pending(run)
    # APR-05: the user pauses the waiting work, then denies; the decision alone must not resume it
    # a Pause answered by an indefinite error may have happened: the user resumes either way (a no-op if it did not)
    paused = run.op("pause", work_id=work_id).type if work_id else "fail"
    decide_all(run, ids, "deny")
    resumed = "ok"
    if paused != "fail":
        time.sleep(PAUSED_WATCH_S)  # a runtime whose decision resumes the work asks its model now
        resumed = run.op("resume", work_id=work_id).type
    quiet, final = run.settle(sc.SETTLE_S)
    results = _asked(ids)
    if ids and resumed == "info":  # the Resume may not have happened: the work may rightly stay paused
        results.append(_result("RI-02", Verdict.UNKNOWN, "the Resume after the denial may not have happened"))
    elif ids:
        results.append(sc.expect_desired(final, [work_id], {"done"}, "RI-02", "after the user denied the write", quiet))
    return results


def drive_effect_set_changed(run: Run) -> list[ClauseResult]:
    """Two writes asked for together, both approved; the first one's tool process is killed after its effect
    (its outcome now unknown: the unknown-effect set changed), so the second one's approval no longer covers it
    and a fresh one is asked for, which the user gives."""
    _crash_after_write(run, "aes")
    ids, _ = wait_pending(run, n=2)
    decide_all(run, ids)
    first = run.wait_witness(lambda e: e.tool == "probe_unknown" and e.done and e.probe_token.split(".")[-3] == "1",
                             timeout_s=sc.SETTLE_S)
    if first:
        run.kill("tool_kill", roles=("tool",), required=False)  # the tool may have exited since its effect
    for _ in range(3):  # the second write's fresh approval, then the third write's own
        again, _ = wait_pending(run, timeout_s=5.0)
        if not again:
            break
        decide_all(run, again)
    if len(ids) < 2 or not first:
        return [_result("APR-03", Verdict.UNKNOWN, "the two writes were not both asked for, or the first never ran")]
    return []


def needs_consume_point(run: Run) -> str | None:
    declared = {str(p) for p in (run.init_ok.failpoints if run.init_ok else [])}
    return None if CONSUME_POINT in declared else f"init_ok.failpoints lacks {CONSUME_POINT}"


def drive_two_sessions(run: Run) -> list[ClauseResult]:
    """Two sessions, each with an unknown write cut off by one tree kill; both recovery turns ask to approve a
    write. The user approves the first session's only: the second's stays unrun and pending, then is denied."""
    run.start()
    first = sc.submit(run, "ap1", session="s-ap1")
    sc.submit(run, "ap2", session="s-ap2")
    deadline = time.monotonic() + run.window(sc.SETTLE_S)
    while time.monotonic() < deadline and not _writes_done(run, 2):
        time.sleep(0.05)
    sc.restart_kit_side(run, "tree_kill")
    ids, snap = wait_pending(run, n=2)
    mine = pending(snap, first)
    decide_all(run, mine)
    time.sleep(1.0)  # a runtime that lets the approval spread runs the other session's write now
    _, later = run.settle(sc.SETTLE_S)
    decide_all(run, pending(later), "deny")
    run.settle(sc.SETTLE_S)
    if len(ids) < 2 or not mine:
        return [_result("APR-01", Verdict.UNKNOWN, "the two sessions' writes were not both asked for")]
    return []


def _writes_done(run: Run, n: int) -> bool:
    from recoverykit.conformance.witness import read_witness
    return run.witness_path.exists() and sum(
        1 for e in read_witness(run.witness_path).executions if e.tool == "probe_unknown" and e.done) >= n
