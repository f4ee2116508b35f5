"""Which recovery mode a runtime chose after a fault, judged from the kit's own records (OWN-01, REC-13, FA-11).

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

- FA-11: after another crash during recovery, no request answers one call twice, no step is delivered twice,
  no two processes ask for one script at once, and an unreconciled unknown write still restricts the recovered
  turn to safe tools (``check_second_crash``).

No such moment in the run: unknown, never valid.
"""

from __future__ import annotations

from collections.abc import Callable

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement, _logical_call, _result, kit_evidence
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
    return _judgement("OWN-01", problems, judged, "no tool child lived through a restart with its work going on",
                      f"{judged} tool child(ren) lived through a restart: each reconnected, its real result sent "
                      "on, never started again")


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
    return _judgement("REC-13", problems, judged, "no new attempt of a step followed another process's "
                      "attempt", f"{judged} new attempt(s) by another process, each after the kit killed the "
                      "process of the attempt before it")


def _mode_lost(ev: Evidence, crash, after: list) -> list[str]:
    """The first recovery's mode is bound to durable facts, so a second crash cannot change it: a script whose
    unknown-effect write ran before the crash without its result being written (the witness log) is recovered
    in the restricted mode, and the first request of it after the crash offers only tools safe for recovery."""
    from recoverykit.conformance.registrations import SAFE, registry_at, safe
    if ev.witness is None:
        return []
    unknown = {e.probe_token.split(".", 1)[0] for e in ev.witness.executions
               if e.effect_class not in SAFE and e.started < crash.time
               and e.emitted is False}
    out = []
    for script_id in sorted(unknown):
        first = next((c for c in after if c.request["script_id"] == script_id), None)
        offered = (first.request.get("tools_offered") or []) if first else []
        registry = registry_at(ev.history, first.request["time"]) if first else {}
        unsafe = [t for t in offered if not safe(registry, t)]
        if unsafe:
            out.append(f"request {first.request.get('request_id')} after the crash during recovery offers {unsafe}, "
                       f"though script {script_id}'s unknown write is unreconciled: the restricted recovery mode "
                       "was lost")
    return out


def _answers_per_call(messages: list[dict]) -> dict[tuple[int, str], int]:
    """(index of the assistant message that made the call, call id) -> how many tool messages answer it: each
    answer goes to the nearest earlier message making its id (providers reuse ids from one response to the next,
    so an id answered once after each of two responses is two calls answered once each)."""
    maker: dict[str, int] = {}
    out: dict[tuple[int, str], int] = {}
    for i, m in enumerate(messages):
        if m.get("role") == "assistant":
            maker.update(dict.fromkeys(m.get("calls") or [], i))
        elif m.get("role") == "tool" and m.get("answers"):
            key = (maker.get(m["answers"], -1), m["answers"])
            out[key] = out.get(key, 0) + 1
    return out


def check_second_crash(ev: Evidence) -> list[ClauseResult]:
    """FA-11: a second crash at a recovery phase leaves recovery idempotent: one owner, one mode, no duplicate
    repair or admission. After every crash the kit caused during recovery (``crash_during_recovery``), the
    provider's record of what followed shows: no request answers one tool call twice (a result merged or a
    placeholder written twice), no step of a script delivered twice (a continuation admitted twice, or a
    checkpoint resumed and a new turn started together), never two processes asking for one script at once, and
    the mode the first recovery chose kept (``_mode_lost``)."""
    from recoverykit.conformance.checks_owners import _overlaps
    crashes = [f for f in restarts(ev.history) if f.kind == "crash_during_recovery"]
    if not crashes:
        return [_result("FA-11", Verdict.UNKNOWN, "no crash during recovery in this run")]
    later_faults = sorted(f.time for f in restarts(ev.history))
    reqs = [c for c in calls(ev.ledger) if c.request.get("script_id")]
    judged, problems = 0, []
    for f in crashes:
        until = next((t for t in later_faults if t > f.time), float("inf"))
        after = [c for c in reqs if f.time < c.request["time"] < until]
        judged += len(after)
        for c in after:
            answers = _answers_per_call(c.request.get("messages") or [])
            problems += [f"request {c.request.get('request_id')} answers tool call {a} {n} times "
                         "after the crash during recovery: repaired or merged twice"
                         for (_, a), n in sorted(answers.items()) if a and n > 1]
        delivered: dict[tuple, int] = {}
        for c in after:
            if c.delivered:
                key = (c.request["script_id"], c.request.get("step"))
                delivered[key] = delivered.get(key, 0) + 1
        problems += [f"script {s} step {st} delivered {n} times after the crash during recovery: admitted twice"
                     for (s, st), n in delivered.items() if n > 1]
        problems += _overlaps([c for c in after if c.request.get("sender_pid")], [])
        problems += _mode_lost(ev, f, after)
    return _judgement("FA-11", problems, judged, "no provider request followed the crash during recovery",
                      f"{judged} request(s) after {len(crashes)} crash(es) during recovery: no call answered twice, "
                      "no step delivered twice, one sender per work item at a time, the recovery mode kept")


EXECUTOR_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (
    kit_evidence(check_live_executor_reconnected), kit_evidence(check_attempt_after_death),
    kit_evidence(check_second_crash))
