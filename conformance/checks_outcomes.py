"""Reported outcomes judged against the work the kit saw done: no fabricated success (REC-10).

A runtime can say ``finished`` about an item whose final model call never ran, or whose tool call never ran
but is shown with a committed result: after a restart that lost its progress, "done" is the easiest thing to
show. The kit saw the real work. Its provider's ledger says whether the item's script ever had its final answer
delivered, and its probes' witness log says whether a tool call the provider handed to the item ever ran.

- REC-10 (fabricated success): every item observed ``finished`` had the final step of one of its scripts
  delivered by the provider (or an answer to a request sent after its last acknowledged input: two inputs
  answered in one turn, or a second input a kill cut before it landed), and every probe call delivered to it
  that the runtime shows with a committed result really ran (a witness execution carries its token). A call
  shown as never started or unknown is not fabricated success; it is judged by FA-05 / EFF-01.

An item with no script the kit can map, or a run with no finished item, says nothing: unknown.
"""

from __future__ import annotations

from collections.abc import Callable

from recoverykit.conformance.checker import ClauseResult, Evidence, _logical_call, _result, kit_evidence
from recoverykit.conformance.provider_ledger import calls
from recoverykit.model.catalogue import Verdict


def check_no_fabricated_success(ev: Evidence) -> list[ClauseResult]:
    final = ev.history.final_observation()
    if final is None:
        return [_result("REC-10", Verdict.UNKNOWN, "no observation")]
    scripts: dict[str, set[str]] = {}
    for script_id, work_id in ev.work_of_script().items():
        scripts.setdefault(work_id, set()).add(script_id)
    ledger = calls(ev.ledger)
    ran = {_logical_call(e.probe_token) for e in ev.witness.executions} if ev.witness is not None else None
    acked: dict[str, float] = {}  # work_id -> when the kit's last acknowledged input of it was acknowledged
    for invoke, done in ev.history.completions():
        if invoke.f == "submit" and done is not None and done.type == "ok" and done.value.get("work_id"):
            acked[done.value["work_id"]] = max(acked.get(done.value["work_id"], 0.0), done.time)
    problems, judged = [], 0
    for item in final.snapshot.get("work_items") or []:
        mine = scripts.get(item["work_id"])
        if item.get("status") != "finished" or not mine:
            continue
        judged += 1
        attempts = [c for c in ledger if c.request.get("script_id") in mine]
        # the script's final step delivered; or an answer (no tool call) delivered to a request sent after the
        # item's last acknowledged input: a runtime may answer two inputs in one turn, or an input a kill cut off
        # may never have landed, so the script's later steps are then never asked for
        last_input = acked.get(item["work_id"])
        answered = [c for c in attempts if c.delivered and c.request.get("script_steps") is not None
                    and not c.response.get("probe_tokens")
                    and (c.request.get("step") == c.request["script_steps"] - 1
                         or (last_input is not None and float(c.request.get("time", 0)) > last_input))]
        if not answered:
            problems.append(f"{item['work_id']} is finished, but the provider never delivered the final answer of "
                            f"its script{'s' if len(mine) > 1 else ''} {', '.join(sorted(mine))} "
                            f"({len(attempts)} request(s) seen)")
        if ran is None:
            continue
        delivered = {_logical_call(t) for c in attempts if c.delivered for t in c.response.get("probe_tokens") or []}
        missing = sorted(str(x) for x in delivered - ran - {None})
        shown = [c for c in final.snapshot.get("tool_calls") or [] if c.get("work_id") == item["work_id"]]
        if missing and shown and all(c.get("status") == "result_committed" for c in shown):
            problems.append(f"{item['work_id']} is finished with every call committed, but {len(missing)} tool "
                            f"call(s) the provider handed it never ran: {', '.join(missing)}")
    if problems:
        return [_result("REC-10", Verdict.INVALID, problems[0], problems)]
    if not judged:
        return [_result("REC-10", Verdict.UNKNOWN, "no finished item the kit can map to a script")]
    return [_result("REC-10", Verdict.VALID, f"{judged} finished item(s), each with its final answer delivered "
                    "(the fabricated-success part of REC-10; lost stream fragments and receipts are judged apart)")]


OUTCOME_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (kit_evidence(check_no_fabricated_success),)
