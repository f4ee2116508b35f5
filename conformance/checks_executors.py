"""Which recovery mode a runtime chose after a fault, judged from the kit's own records (OWN-01, REC-13).

Seed 000: "Reconnect live executors; exclude dead executors through generation fencing" and "If death is
confirmed and a verifiable safe checkpoint exists, create a new attempt under the same execution." Two
things the kit sees without asking the runtime:

- OWN-01: a tool child the kit's witness log shows alive through a restart (started before the fault,
  finished after it, its result written) is a live executor. Reconnecting it means waiting for it and using
  what it did: the call is not started again, and the next request of that work carries the child's real
  result (its probe token, which only the child's own output contains). A runtime that took it for dead goes
  on without its result (a placeholder) or runs it again.
- REC-13 (its death half): a new attempt of a model step by another process than the previous attempt's is a
  new attempt under the same execution. While the previous attempt is unanswered, it is allowed only once
  that process's death is confirmed. The kit knows which processes it killed (the fault's pids, or every
  process for a tree kill or a restart); any other is alive as far as anyone can confirm. A previous attempt
  that had ended (answered, failed or cut) may have been given up by its live sender: not judged. Whether the
  checkpoint was safe is for the request checks (CTX-08, CTX-09) to see.

No such moment in the run: unknown, never valid.
"""

from __future__ import annotations

from collections.abc import Callable

from recoverykit.conformance.checker import ClauseResult, Evidence, _logical_call, _result, kit_evidence
from recoverykit.conformance.history import restarts
from recoverykit.conformance.provider_ledger import calls
from recoverykit.model.catalogue import Verdict

# Faults after which no process of the run before them survives (the kit's tree kills, the adapter's restarts).
WHOLE_RUN = {"tree_kill", "kill", "crash", "long_downtime", "host_identity_change", "crash_during_recovery",
             "normal_exit", "stop_all_exit", "graceful_worker_restart"}


def check_live_executor_reconnected(ev: Evidence) -> list[ClauseResult]:
    """OWN-01 (see the module doc)."""
    if ev.witness is None:
        return [_result("OWN-01", Verdict.UNKNOWN, "no witness log")]
    faults = restarts(ev.history)
    reqs = [c for c in calls(ev.ledger) if c.request.get("script_id") and isinstance(c.request.get("messages"), list)]
    judged, problems = 0, []
    for f in faults:
        survivors = [e for e in ev.witness.executions if e.started < f.time and e.finished is not None
                     and e.finished > f.time and e.emitted is not False and e.outcome == "ok"]  # lived through f
        for e in survivors:
            script_id = e.probe_token.split(".", 1)[0]
            later = [c for c in reqs if c.request["script_id"] == script_id and c.request["time"] > f.time]
            if not later:
                continue
            judged += 1
            again = [x for x in ev.witness.executions if x.started > f.time and x is not e
                     and _logical_call(x.probe_token) == _logical_call(e.probe_token)]
            if again:
                problems.append(f"tool child pid {e.pid} ({e.probe_token}) lived through {f.kind} at event {f.index}, "
                                f"yet its call was started again (pid {again[0].pid}, {again[0].probe_token}): a live "
                                "executor replaced, not reconnected")
                continue
            token = f'"probe_token": "{e.probe_token}"'
            if not any(m.get("role") == "tool" and token in (m.get("head") or "") for c in later
                       for m in c.request["messages"]):
                problems.append(f"tool child pid {e.pid} ({e.probe_token}) lived through {f.kind} at event {f.index} "
                                f"and wrote its result, but none of the {len(later)} later request(s) of script "
                                f"{script_id} carries it: the live executor was not reconnected")
    if problems:
        return [_result("OWN-01", Verdict.INVALID, problems[0], problems)]
    if not judged:
        return [_result("OWN-01", Verdict.UNKNOWN, "no tool child lived through a restart with its work going on")]
    return [_result("OWN-01", Verdict.VALID, f"{judged} tool child(ren) lived through a restart: each reconnected, "
                    "its real result sent on, never started again")]


def _killed(f, pid: int) -> bool:
    return f.kind in WHOLE_RUN or pid in (f.detail.get("pids") or [])


def check_attempt_after_death(ev: Evidence) -> list[ClauseResult]:
    """REC-13 (see the module doc)."""
    attempts = [c for c in calls(ev.ledger) if c.request.get("script_id") and c.request.get("sender_pid")
                and c.request.get("step") is not None]
    faults = restarts(ev.history)
    judged, problems = 0, []
    by_step: dict[tuple, list] = {}
    for c in attempts:
        by_step.setdefault((c.request["script_id"], c.request["step"]), []).append(c)
    for (script_id, step), mine in by_step.items():
        mine.sort(key=lambda c: c.request["time"])
        for i, b in enumerate(mine):
            pb = b.request["sender_pid"]
            a = next((c for c in reversed(mine[:i]) if c.request["sender_pid"] != pb), None)
            if a is None:
                continue
            pa = a.request["sender_pid"]
            if any(a.request["time"] <= f.time <= b.request["time"] and _killed(f, pa) for f in faults):
                judged += 1  # its death confirmed by the kit's own kill: a new attempt is allowed
            elif a.response is None or a.response["time"] > b.request["time"]:
                problems.append(f"script {script_id} step {step}: pid {pb} sent a new attempt "
                                f"({b.request.get('request_id')}) while pid {pa}'s attempt "
                                f"({a.request.get('request_id')}) was unanswered and pid {pa} was not "
                                "confirmed dead (the kit killed it at no point between)")
            # else: the earlier attempt had ended (answered, failed or cut) with its sender alive, which may
            # have given the work up itself: no death is needed for another process to try again
    if problems:
        return [_result("REC-13", Verdict.INVALID, problems[0], problems)]
    if not judged:
        return [_result("REC-13", Verdict.UNKNOWN, "no new attempt of a step followed another process's "
                                                   "unanswered one")]
    return [_result("REC-13", Verdict.VALID, f"{judged} new attempt(s) by another process, each after the kit "
                    "killed the process of the attempt before it")]


EXECUTOR_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (
    kit_evidence(check_live_executor_reconnected), kit_evidence(check_attempt_after_death))
