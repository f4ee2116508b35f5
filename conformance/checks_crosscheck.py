"""Cross-checks: every self-reported fact the kit can confirm with evidence of its own is compared with it.

The runtime says in ``observe`` what happened to each tool call and each usage receipt. The kit saw some of
it itself: the probe tools' witness log records every execution (pid, parent pid, start, finish), and the
scripted provider's ledger records every attempt (which script, hence which work item, sent it). A check here
trusts the runtime's record only as far as that evidence goes:

- FA-05: a call the witness saw run is never reported ``never_started`` (a crash after dispatch leaves the
  outcome unknown or the live child reconnected, never "it never ran");
- FA-06: a call reported ``result_committed`` really finished and its child really wrote its result (the
  probe's ``emitted`` witness record; no fabricated result), and once committed a result stays committed
  after a later fault;
- EFF-01: an unknown-effect call that was dispatched when its owner died is still on record afterwards, as
  ``outcome_unknown`` (or committed, if the real result was recovered), never dropped or turned
  ``never_started``;
- FA-10: a receipt known before a fault is still there and still known after it (a fact known before a fault
  never becomes unknown after it);
- FA-16: a receipt for an attempt sent before a fault, recorded or still shown after it, keeps its original
  attribution: the work item whose script the provider saw sending that attempt.

- USG-01 / FA-04: an attempt in flight when the runtime died still has its one receipt afterwards (its
  attribution was fixed before dispatch), unknown or no more than the provider reported.

Evidence the run did not produce (no call ran, no fault happened) gives ``unknown``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, kit_evidence
from recoverykit.conformance.history import NOT_A_RESTART, Fault, Observation
from recoverykit.conformance.provider_ledger import calls
from recoverykit.conformance.witness import Execution
from recoverykit.model.catalogue import Verdict


def _restarts(ev: Evidence) -> list[Fault]:
    return [f for f in ev.history.faults if f.kind not in NOT_A_RESTART]


def _calls(o: Observation) -> dict[str, dict[str, Any]]:
    return {c["call_id"]: c for c in o.snapshot.get("tool_calls") or []}


def _linked(call: dict[str, Any], executions: Iterable[Execution]) -> list[Execution]:
    """The probe executions a call's recorded child is: the probe itself, or the runtime's shim that started it."""
    pid = call.get("pid")
    if pid is None:
        return []
    return [e for e in executions if e.pid == pid or e.ppid == pid]


def _work_of_scripts(ev: Evidence) -> dict[str, set[str]]:
    """script id -> every work item a submit tagged with it went to (a session's second input
    may open a second work item on the same script: then either may own an attempt of that script)."""
    from recoverykit.conformance.intent import submits
    from recoverykit.conformance.provider_script import SCRIPT_TAG_RE
    out: dict[str, set[str]] = {}
    for invoke, work_id in submits(ev.history):  # an indeterminate submit counts once an observation shows it
        for script_id in SCRIPT_TAG_RE.findall(invoke.value.get("text", "")):
            out.setdefault(script_id, set()).add(work_id)
    return out


def _per_item(o: Observation, status: str) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for c in o.snapshot.get("tool_calls") or []:
        if c["status"] == status:
            out[(c["work_id"], c["tool"])] = out.get((c["work_id"], c["tool"]), 0) + 1
    return out


def _verdict(clause_id: str, problems: list[str], judged: int, nothing: str) -> ClauseResult:
    if problems:
        return _result(clause_id, Verdict.INVALID, problems[0], problems)
    if judged:
        return _result(clause_id, Verdict.VALID, f"{judged} compared with the kit's evidence")
    return _result(clause_id, Verdict.UNKNOWN, nothing)


def check_tool_facts(ev: Evidence) -> list[ClauseResult]:
    """FA-05, FA-06 and EFF-01: tool-call statuses against the witness log and across faults."""
    ids = ("FA-05", "FA-06", "EFF-01")
    observed = [o for o in ev.snapshots() if o.snapshot.get("tool_calls") is not None]
    if ev.witness is None or not observed:
        return [_result(i, Verdict.UNKNOWN, "no witness log, or tool_calls never observed") for i in ids]
    executions = ev.witness.executions
    never, fabricated, lost_result, dropped = [], [], [], []
    judged = {i: 0 for i in ids}
    committed_at: dict[str, int] = {}  # call_id -> observation index where it was first seen committed
    for o in observed:
        for call_id, c in _calls(o).items():
            linked = _linked(c, executions)
            ran = [e for e in linked if e.started <= o.time]
            status = c["status"]
            if status == "never_started":
                judged["FA-05"] += 1
                if ran:
                    never.append(f"observation {o.index}: call {call_id} ({c['tool']}) is reported never_started, "
                                 f"but the witness log saw it run (pid {ran[0].pid}, token {ran[0].probe_token})")
            elif linked:
                judged["FA-05"] += 1
            if status == "result_committed":
                judged["FA-06"] += 1
                committed_at.setdefault(call_id, o.index)
                if linked and not any(e.done for e in linked):
                    fabricated.append(f"observation {o.index}: call {call_id} ({c['tool']}) is reported "
                                      "result_committed, but its execution never finished (witness log)")
                elif linked and all(e.emitted is False for e in linked):
                    fabricated.append(f"observation {o.index}: call {call_id} ({c['tool']}) is reported "
                                      "result_committed, but its child never wrote a result (it died first: "
                                      "witness log)")
    final = observed[-1]
    script_of = {w: s for s, ws in _work_of_scripts(ev).items() for w in ws}
    for (work_id, tool), n in _per_item(final, "result_committed").items():
        script_id = script_of.get(work_id)
        if script_id is None:
            continue
        finished = [e for e in executions if e.done and e.tool == tool and e.probe_token.startswith(script_id + ".")]
        if n > len(finished):
            fabricated.append(f"observation {final.index}: {work_id} has {n} {tool} calls result_committed, but the "
                              f"witness log saw {len(finished)} executions of it finish")
    # A committed result stays committed after a later fault.
    restarts = _restarts(ev)
    for call_id, at in committed_at.items():
        for fault in (f for f in restarts if f.index > at):
            for o in (o for o in observed if o.index > fault.index):
                c = _calls(o).get(call_id)
                if c is None or c["status"] != "result_committed":
                    lost_result.append(f"call {call_id} was result_committed at observation {at}; after the "
                                       f"{fault.kind} (event {fault.index}) observation {o.index} shows "
                                       f"{c['status'] if c else 'no such call'}")
                    break
            else:
                continue
            break
    # An unknown-effect call dispatched when its owner died stays on record as unknown (or really committed).
    for fault in restarts:
        before = next((o for o in reversed(observed) if o.index < fault.index), None)
        after = [o for o in observed if o.index > fault.index]
        if before is None or not after:
            continue
        for call_id, c in _calls(before).items():
            if c["status"] != "dispatched" or c.get("effect_class") != "unknown" or not _linked(c, executions):
                continue
            judged["EFF-01"] += 1
            for o in after:
                now = _calls(o).get(call_id)
                if now is None or now["status"] in ("never_started",):
                    dropped.append(f"unknown-effect call {call_id} ({c['tool']}) was dispatched before the "
                                   f"{fault.kind} (event {fault.index}); observation {o.index} shows "
                                   f"{now['status'] if now else 'no such call'}")
                    break
    nothing_tool = "no tool call of this run was linked to a probe execution"
    return [_verdict("FA-05", never, judged["FA-05"], nothing_tool),
            _verdict("FA-06", fabricated + lost_result, judged["FA-06"], "no committed tool result observed"),
            _verdict("EFF-01", dropped, judged["EFF-01"],
                     "no unknown-effect call was in flight when a process died")]


def check_receipt_facts(ev: Evidence) -> list[ClauseResult]:
    """FA-10 known receipts survive faults; FA-16 a late receipt keeps its attempt's attribution (ledger)."""
    observed = [o for o in ev.snapshots() if o.snapshot.get("usage_receipts") is not None]
    restarts = _restarts(ev)
    if not observed:
        return [_result(i, Verdict.UNKNOWN, "usage_receipts never observed") for i in ("FA-10", "FA-16")]
    lost, misattributed = [], []
    judged_lost = judged_attr = 0
    for fault in restarts:
        before = next((o for o in reversed(observed) if o.index < fault.index), None)
        after = [o for o in observed if o.index > fault.index]
        if before is None or not after:
            continue
        for r in before.snapshot["usage_receipts"]:
            if r.get("usage") != "known":
                continue
            judged_lost += 1
            for o in after:
                now = next((x for x in o.snapshot["usage_receipts"] if x.get("receipt_id") == r.get("receipt_id")),
                           None)
                if now is None or now.get("usage") != "known":
                    lost.append(f"receipt {r.get('receipt_id')} ({r.get('request_id')}) was known before the "
                                f"{fault.kind} (event {fault.index}); observation {o.index} shows "
                                f"{now.get('usage') if now else 'no such receipt'}")
                    break
    if restarts:
        first = min(f.time for f in restarts)
        owners = _work_of_scripts(ev)
        sent_before: dict[str, set[str]] = {}
        for c in calls(ev.ledger):
            if c.request.get("time", float("inf")) < first and c.request.get("script_id") in owners:
                for key in c.ids():
                    sent_before[key] = owners[c.request["script_id"]]
        late = [o for o in observed if o.index > min(f.index for f in restarts)]
        for o in late[-1:]:  # the last look after the fault: what the runtime settled on
            for r in o.snapshot["usage_receipts"]:
                owner = sent_before.get(r.get("request_id"))
                if owner is None:
                    continue
                judged_attr += 1
                if r.get("work_id") not in owner:
                    misattributed.append(f"observation {o.index}: receipt {r.get('receipt_id')} for attempt "
                                         f"{r.get('request_id')} (sent before the fault by the script of "
                                         f"{' or '.join(sorted(owner))}) is attributed to {r.get('work_id')}")
    return [_verdict("FA-10", lost, judged_lost, "no known receipt was on record when a process died"),
            _verdict("FA-16", misattributed, judged_attr,
                     "no receipt after a fault for an attempt the provider saw before it")]


def _in_flight(ev: Evidence, fault: Fault) -> list:
    """Attempts the provider had received and not finished answering when ``fault`` took the runtime down."""
    out = []
    for c in calls(ev.ledger):
        if c.request.get("time", float("inf")) >= fault.time:
            continue
        if c.response is None or c.response.get("time", float("inf")) >= fault.time or not c.delivered:
            out.append(c)
    return out


def check_inflight_attempts(ev: Evidence) -> list[ClauseResult]:
    """USG-01 an attempt's attribution was fixed before dispatch, so it survives a crash in flight; FA-04 its
    usage is then counted once or marked unknown, never fabricated, and its work item goes on under the
    recovery rules (finished, stopped by the user, or not running with a reason; whether that reason is
    justified is RI-08's business).

    Per provider attempt the ledger shows in flight at a fault (received, not fully answered), the runtime's
    settled view must hold exactly one receipt that names it (by the X-Request-Id it sent, or the response id
    it was given), with ``unknown`` usage or no more than the provider reported. An attempt the kit cannot
    name (no header, no response id delivered) is not judged.
    """
    final = ev.history.final_observation()
    receipts = _section_of(final, "usage_receipts")
    if receipts is None or final is None or not final.quiescent:
        return [_result(i, Verdict.UNKNOWN, "usage_receipts not observed in a settled state")
                for i in ("USG-01", "FA-04")]
    missing, wrong, stalled = [], [], []
    judged = 0
    seen: set[int] = set()
    owners = _work_of_scripts(ev)
    items = {w["work_id"]: w for w in final.snapshot.get("work_items") or []}
    for fault in _restarts(ev):
        for c in _in_flight(ev, fault):
            names = [i for i in (c.header_request_id, c.response_id if c.response_id_sent else None) if i]
            if not names or c.seq in seen:
                continue
            seen.add(c.seq)
            judged += 1
            mine = [r for r in receipts if r.get("request_id") in names]
            for work_id in owners.get(c.request.get("script_id"), ()):  # "the work continues under the rules"
                it = items.get(work_id)
                if it is not None and it["desired_state"] == "run" and it["status"] != "finished" \
                        and not it.get("reason_code"):
                    stalled.append(f"{work_id}, whose attempt {names[0]} was in flight at the {fault.kind}, is "
                                   f"{it['status']} with no reason after the runtime settled")
            reported = c.usage_reported or {}
            if not mine:
                missing.append(f"attempt {names[0]} was in flight at the {fault.kind} (event {fault.index}) and "
                               "no receipt names it afterwards: its attribution was not fixed before dispatch")
            elif len(mine) > 1:
                wrong.append(f"attempt {names[0]}, in flight at the {fault.kind}, has {len(mine)} receipts")
            else:
                r = mine[0]
                got = (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)
                most = (reported.get("prompt_tokens") or 0) + (reported.get("completion_tokens") or 0)
                if r.get("usage") != "unknown" and (not reported or (got > most and c.usage_chunks <= 1)):
                    # above several running totals is their sum: USG-05's (checker.check_usage), not FA-04's
                    wrong.append(f"attempt {names[0]}, in flight at the {fault.kind}: receipt says {r.get('usage')} "
                                 f"{got} tokens, the provider reported {reported or 'none'} (fabricated)")
    nothing = "no provider attempt the kit can name was in flight when a process died"
    return [_verdict("USG-01", missing, judged, nothing),
            _verdict("FA-04", missing + wrong + stalled, judged, nothing)]


def _section_of(o: Observation | None, name: str) -> list[dict[str, Any]] | None:
    return None if o is None else o.snapshot.get(name)


CROSS_CHECKS = tuple(kit_evidence(fn) for fn in (check_tool_facts, check_receipt_facts, check_inflight_attempts))
