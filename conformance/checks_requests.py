"""The history the runtime sends, judged from the kit's provider's record of every request.

After a crash the runtime repairs its history and asks the model again. What it asks is the kit's to see:
the scripted provider records each request's messages (role, the call ids an assistant message makes, the
call id a tool message answers, its text's digest) and the tools offered (``provider._conversation``).

- CTX-09: a tool result is sent only after an assistant message that made that call (in the same
  request): a result without its call is never a tool-protocol item;
- CTX-08: in every request each assistant message's calls are answered right after it (the results are
  adjacent to their call, before anything else), and the user messages of one script, request after request,
  keep their order (those a later request shares with earlier ones appear in the same order);
- EFF-02: the first request of a script after a restart that left one of its unsafe tool calls' outcome
  unknown (the witness shows the probe ran, but it never emitted its result) offers only tools that are safe
  for recovery (read-only or state probes), since nothing has reconciled that write yet.

A run that sent no such request says nothing: unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, kit_evidence
from recoverykit.conformance.history import restarts
from recoverykit.conformance.provider_ledger import calls
from recoverykit.conformance.registrations import SAFE, registry_at, safe
from recoverykit.model.catalogue import Verdict


def _requests(ev: Evidence) -> list[Any]:
    return [c for c in calls(ev.ledger) if isinstance(c.request.get("messages"), list)]


def check_results_follow_calls(ev: Evidence) -> list[ClauseResult]:
    """CTX-09 and CTX-08 on every recorded request."""
    reqs = _requests(ev)
    orphans, apart, rewritten = [], [], []
    with_results = 0
    users: dict[str, list[str]] = {}
    for c in reqs:
        messages = c.request["messages"]
        rid = c.request.get("request_id")
        made: set[str] = set()
        for i, m in enumerate(messages):
            if m["role"] == "tool":
                with_results += 1
                if m.get("answers") not in made:
                    orphans.append(f"request {rid}: a result for call {m.get('answers')} with no earlier call "
                                   "made in that request")
            if m["role"] == "assistant" and m["calls"]:
                made |= set(m["calls"])
                following = messages[i + 1:i + 1 + len(m["calls"])]
                if sorted(f.get("answers") or "" for f in following if f["role"] == "tool") != sorted(m["calls"]):
                    apart.append(f"request {rid}: the results of calls {m['calls']} do not follow them directly "
                                 f"(next: {[f['role'] for f in following]})")
        script = c.request.get("script_id")
        mine = [m["sha"] for m in messages if m["role"] == "user"]
        if script:
            # the user messages this request shares with the script's earlier ones keep their order (a runtime
            # may send a new work item of the session without the earlier turns; it may never reorder them)
            before = users.get(script, [])
            common = [sha for sha in mine if sha in before]
            if common != [sha for sha in before if sha in common]:
                rewritten.append(f"request {rid}: script {script}'s user messages are out of their order")
            users[script] = before + [sha for sha in mine if sha not in before]
    out = []
    if not with_results:
        out.append(_result("CTX-09", Verdict.UNKNOWN, "no request carried a tool result"))
    else:
        out.append(_result("CTX-09", Verdict.INVALID if orphans else Verdict.VALID,
                           orphans[0] if orphans else f"{with_results} tool result(s), each after its call", orphans))
    if not reqs:
        out.append(_result("CTX-08", Verdict.UNKNOWN, "no request recorded with its messages"))
    elif apart or rewritten:
        problems = apart + rewritten
        out.append(_result("CTX-08", Verdict.INVALID, problems[0], problems))
    elif not with_results:
        out.append(_result("CTX-08", Verdict.UNKNOWN, "no request carried a call and its result"))
    else:
        out.append(_result("CTX-08", Verdict.VALID, f"{len(reqs)} request(s): calls and results adjacent, user "
                           "messages kept in order (the original-history part is judged by the user messages)"))
    return out


def check_restricted_after_unknown_write(ev: Evidence) -> list[ClauseResult]:
    """EFF-02: after a restart that left an unsafe write's outcome unknown, only safe tools are offered."""
    if ev.witness is None:
        return [_result("EFF-02", Verdict.UNKNOWN, "no witness log")]
    faults = restarts(ev.history)
    reqs = _requests(ev)
    judged, problems = 0, []
    for f in faults:
        # the class each write ran under is in its witness record (the kit's registration at execution)
        unknown = {e.probe_token.split(".")[0] for e in ev.witness.executions
                   if e.effect_class not in SAFE and e.started < f.time and e.emitted is False}
        for script in sorted(unknown):
            first = next((c for c in reqs if c.request.get("script_id") == script and c.request["time"] > f.time),
                         None)
            if first is None:
                continue
            judged += 1
            offered = first.request.get("tools_offered") or []
            registry = registry_at(ev.history, first.request["time"])
            unsafe = [t for t in offered if not safe(registry, t)]
            if unsafe:
                problems.append(f"request {first.request.get('request_id')} (script {script}, the first after the "
                                f"restart at event {f.index}) offers {unsafe} while a write's outcome is unknown")
    if problems:
        return [_result("EFF-02", Verdict.INVALID, problems[0], problems)]
    if not judged:
        return [_result("EFF-02", Verdict.UNKNOWN, "no request followed a restart that left a write unknown")]
    return [_result("EFF-02", Verdict.VALID, f"{judged} recovery request(s) after an unknown write offered only "
                    "read-only or state-probe tools")]


def check_duplicate_call_ids(ev: Evidence) -> list[ClauseResult]:
    """CTX-11: a response whose tool calls share an id is an explicit error, never guessed execution facts:
    none of its calls runs (witness log), and its work item ends showing a reason, not finished as if the
    calls had been sorted out."""
    ambiguous = [c for c in calls(ev.ledger) if c.delivered and len(c.response.get("call_ids") or [])
                 != len(set(c.response.get("call_ids") or []))]
    if not ambiguous:
        return [_result("CTX-11", Verdict.UNKNOWN, "no response carried duplicate call ids")]
    problems = []
    ran = {e.probe_token for e in ev.witness.executions} if ev.witness is not None else set()
    for c in ambiguous:
        guessed = sorted(set(c.response.get("probe_tokens") or []) & ran)
        if guessed:
            problems.append(f"response {c.request.get('request_id')} had duplicate call ids, yet its calls "
                            f"{guessed} ran")
    final = ev.history.final_observation()
    work_of = ev.work_of_script()
    for c in ambiguous if final is not None and final.quiescent else []:  # the outcome: only once settled
        work_id = work_of.get(c.request.get("script_id"))
        item = next((w for w in (final.snapshot.get("work_items") or [] if final else []) if w["work_id"] == work_id),
                    None)
        if item is not None and (item.get("status") == "finished" or not item.get("reason_code")):
            problems.append(f"{work_id} is {item.get('status')} with reason_code {item.get('reason_code')!r} after "
                            "a response with duplicate call ids (no explicit error)")
    if problems:
        return [_result("CTX-11", Verdict.INVALID, problems[0], problems)]
    if final is None or not final.quiescent:
        return [_result("CTX-11", Verdict.UNKNOWN, "the run never settled after the ambiguous response")]
    return [_result("CTX-11", Verdict.VALID, f"{len(ambiguous)} ambiguous response(s): no call ran, the work says why")]


REQUEST_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (
    kit_evidence(check_results_follow_calls), kit_evidence(check_restricted_after_unknown_write),
    kit_evidence(check_duplicate_call_ids))
