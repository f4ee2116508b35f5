"""Receipts per provider attempt: retries counted on their own, a cut stream only as a lower bound, one key
across restarts.

The scripted provider's ledger records every attempt of every logical request (its script step) with what it
billed and the last usage the client could have read. Against it, the runtime's receipts (``observe``):

- USG-04: a retry is a new provider attempt. Every attempt of a retried request whose consumption the client
  saw (the provider reported usage to it) has a receipt of its own: not merged into another attempt's receipt
  (one receipt serving two attempts, or tokens above what its own attempt reported), not dropped, and not left
  unknown when the attempt was answered whole and no restart came after it was sent; and an attempt that
  incurred nothing (an error answer, nothing billed) is not given tokens;
- USG-18: partial cumulative data records only lower bounds: an attempt cut off after running totals whose
  last value is below what the provider billed has its receipt ``partial`` (or ``unknown``), never ``known``:
  the running total the runtime read is not the whole count.

- USG-07: a receipt write that failed (the runtime died before settling an attempt it had opened a receipt
  for) is retried under the same idempotency key, and the statistics rebuilt after the restart are the ones
  before it: every receipt observed before a restart that names an attempt the provider received is, once the
  runtime settled, still there exactly once under the same ``receipt_id``, a known one with the same tokens, a
  partial one never lowered; and a work item that had an attempt on the wire at the restart gains no receipt
  under a key that names no attempt the provider received, for the same attempt number (when the runtime sends
  ``X-Request-Id``, every real attempt has such a key): that is the attempt's write retried under a new key
  beside the pending one, counting it twice.

USG-18's other half, separate reservations for unknown tokens and unknown costs, exists only under a hard
budget, which chat core has not (budgets are the goals profile's ``budget_set``); it is not judged here.
Evidence the run did not produce (no retried request with consumption, no cut after usage) gives ``unknown``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, kit_evidence
from recoverykit.conformance.checks_crosscheck import _restarts, _verdict
from recoverykit.conformance.provider_ledger import Call, calls
from recoverykit.model.catalogue import Verdict


def _sum(usage: dict[str, Any] | None) -> int:
    return (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0) if usage else 0


def _names(c: Call) -> tuple[str, ...]:
    """The ids a receipt may name this attempt by: the X-Request-Id the runtime sent, the response id it got."""
    return tuple(i for i in (c.header_request_id, c.response_id if c.response_id_sent else None) if i)


def _attempts(ev: Evidence) -> dict[tuple[str, int], list[Call]]:
    """(script, step) -> its attempts in the order the provider received them."""
    out: dict[tuple[str, int], list[Call]] = defaultdict(list)
    for c in calls(ev.ledger):
        if c.request.get("script_id") and c.response is not None:
            out[(c.request["script_id"], int(c.request.get("step") or 0))].append(c)
    return out


def _receipts(ev: Evidence) -> tuple[list[dict[str, Any]] | None, bool]:
    final = ev.history.final_observation()
    if final is None:
        return None, False
    return final.snapshot.get("usage_receipts"), bool(final.quiescent)


def _merged(got: int, c: Call, consumed: list[Call]) -> bool:
    """Does ``got`` equal attempt ``c``'s reported count plus the reported counts of the attempts before it (one or
    more, in order), as when a runtime keeps one usage total per request across its retries?"""
    own, earlier = _sum(c.usage_reported), [_sum(d.usage_reported) for d in consumed[:consumed.index(c)]]
    return any(got == own + sum(earlier[i:]) for i in range(len(earlier)))


def check_retry_receipts(ev: Evidence) -> list[ClauseResult]:
    """USG-04: each attempt of a retried request that incurred consumption is counted on its own."""
    receipts, settled = _receipts(ev)
    if receipts is None or not settled:
        return [_result("USG-04", Verdict.UNKNOWN, "usage_receipts not observed in a settled state")]
    problems, judged = [], 0
    restarts = [f.time for f in _restarts(ev)]  # a receipt may stay unknown when its runtime died before writing it
    stops = [o.time for o in ev.history.ops if o.type == "invoke" and o.f in ("pause", "end", "stop_all")]
    for (script_id, step), attempts in _attempts(ev).items():
        if len(attempts) < 2:
            continue
        consumed = [c for c in attempts if c.usage_reported and _sum(c.usage_reported) and _names(c)]
        if len(consumed) < 2:
            continue
        judged += 1
        taken: set[int] = set()  # receipts already given to an attempt (by position in the list)
        for c in consumed:
            # a response id names one attempt only; a header id the runtime reused for a retry names several
            mine = [i for i, r in enumerate(receipts) if r.get("request_id") in _names(c) and i not in taken]
            mine.sort(key=lambda i: receipts[i].get("request_id") != c.response_id)
            if not mine:
                problems.append(f"script {script_id} step {step}: attempt {c.request.get('attempt')} "
                                f"({_names(c)[0]}) incurred {_sum(c.usage_reported)} reported tokens and has no "
                                f"receipt of its own (merged into another attempt's, or dropped)")
                continue
            taken.add(mine[0])
            r = receipts[mine[0]]
            got = (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)
            if r.get("usage") == "unknown" and c.delivered and not any(t > c.request["time"] for t in restarts) \
                    and not any(c.request["time"] < t <= c.response["time"] for t in stops):
                # (a restart after the request, or a user's stop while the answer was on its way, lets the runtime
                # drop the stream unread or die before writing its receipt: unknown)
                problems.append(f"script {script_id} step {step}: attempt {c.request.get('attempt')} was answered "
                                f"whole with {_sum(c.usage_reported)} tokens and no restart followed, but its receipt "
                                f"{r.get('request_id')} says unknown: the retry's consumption was not counted")
            elif r.get("usage") in ("known", "partial") and _merged(got, c, consumed):
                # its own count plus earlier attempts' exactly: merged; another excess (running totals summed)
                # is USG-05's (checker.check_usage)
                problems.append(f"script {script_id} step {step}: the receipt of attempt {c.request.get('attempt')} "
                                f"({r.get('request_id')}) says {got} tokens, its own attempt reported "
                                f"{_sum(c.usage_reported)}: attempts counted together")
        for c in attempts:
            if c.usage_billed is None:  # an error answer: nothing was consumed
                for r in receipts:
                    got = (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)
                    if r.get("request_id") in _names(c) and r.get("usage") == "known" and got and not any(
                            r.get("request_id") in _names(d) for d in consumed):
                        problems.append(f"script {script_id} step {step}: attempt {c.request.get('attempt')} was "
                                        f"answered {c.response.get('status')} and consumed nothing, but its receipt "
                                        f"{r.get('request_id')} says {got} known tokens")
    return [_verdict("USG-04", problems, judged,
                     "no request was retried after an attempt whose consumption the client saw")]


def check_partial_lower_bound(ev: Evidence) -> list[ClauseResult]:
    """USG-18: an attempt cut after running totals below what was billed keeps only a lower bound."""
    receipts, settled = _receipts(ev)
    if receipts is None or not settled:
        return [_result("USG-18", Verdict.UNKNOWN, "usage_receipts not observed in a settled state")]
    problems, judged = [], 0
    for c in calls(ev.ledger):
        reported, billed = c.usage_reported, c.usage_billed
        if c.delivered or not reported or not billed or _sum(reported) >= _sum(billed):
            continue
        mine = [r for r in receipts if r.get("request_id") in _names(c)]
        if not mine:
            continue  # no receipt: dropped usage is USG-10's business
        judged += 1
        for r in mine:
            got = (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)
            if r.get("usage") == "known":
                problems.append(f"attempt {r.get('request_id')} was cut off after running totals up to "
                                f"{_sum(reported)} tokens (the provider billed {_sum(billed)}), but its receipt says "
                                f"{got} tokens known, not a lower bound")
            elif r.get("usage") == "partial" and got > _sum(billed) and c.usage_chunks <= 1:
                # above what a stream of several running totals reported is their sum: USG-05's (checker.check_usage)
                problems.append(f"attempt {r.get('request_id')}: its partial receipt says {got} tokens, above the "
                                f"{_sum(billed)} the provider billed: not a lower bound")
    if judged and not problems:  # say what was judged: reservations exist only under a hard budget
        return [_result("USG-18", Verdict.VALID, f"{judged} cut attempt(s) kept as lower bounds; reservations are "
                                                 "not judged: chat core has no budget")]
    return [_verdict("USG-18", problems, judged, "no attempt with a receipt was cut off after usage below what it "
                                                 "billed")]


def _tokens(r: dict[str, Any]) -> int:
    return (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)


def check_receipts_rebuilt(ev: Evidence) -> list[ClauseResult]:
    """USG-07: across a restart, each receipt keeps its key and its usage; no second key for one attempt."""
    final = ev.history.final_observation()
    restarts = _restarts(ev)
    if final is None or not final.quiescent or final.snapshot.get("usage_receipts") is None or not restarts:
        return [_result("USG-07", Verdict.UNKNOWN, "no restart, or usage_receipts not observed in a settled state "
                                                   "after one")]
    ledger = calls(ev.ledger)
    names = {n for c in ledger for n in _names(c)}
    after = final.snapshot["usage_receipts"]
    problems, judged = [], 0
    for fault in restarts:
        before = next((o for o in reversed(ev.snapshots()) if o.index < fault.index
                       and o.snapshot.get("usage_receipts") is not None), None)
        if before is None or final.index < fault.index:
            continue
        for r in before.snapshot["usage_receipts"]:
            if r.get("request_id") not in names:
                continue
            judged += 1
            now = [x for x in after if x.get("request_id") == r.get("request_id")]
            where = f"receipt {r.get('receipt_id')} ({r.get('request_id')}, {r.get('usage')} before the {fault.kind})"
            if len(now) != 1:
                problems.append(f"{where}: {len(now)} receipts name that attempt after the restart (rebuilt "
                                "statistics lost or doubled it)")
            elif now[0].get("receipt_id") != r.get("receipt_id"):
                problems.append(f"{where}: after the restart it is receipt {now[0].get('receipt_id')}: its write "
                                "was redone under a new key")
            elif r.get("usage") == "known" and (now[0].get("usage") != "known" or _tokens(now[0]) != _tokens(r)):
                problems.append(f"{where}: {_tokens(r)} tokens known before, {now[0].get('usage')} "
                                f"{_tokens(now[0])} after: the statistics were not rebuilt as they were")
            elif r.get("usage") == "partial" and now[0].get("usage") == "partial" and _tokens(now[0]) < _tokens(r):
                problems.append(f"{where}: a lower bound of {_tokens(r)} tokens became {_tokens(now[0])}")
    last = restarts[-1]
    before = next((o for o in reversed(ev.snapshots()) if o.index < last.index
                   and o.snapshot.get("usage_receipts") is not None), None)
    if before is not None and ledger and all(c.header_request_id for c in ledger):
        known_before = {r.get("receipt_id") for r in before.snapshot["usage_receipts"]}
        # A work item with an attempt on the wire at the restart had no other attempt open then (one request at a
        # time), so a receipt it gains after the restart that names no attempt is that attempt's, written twice.
        # (One opened and never sent before a crash is legitimate: its item then had nothing on the wire.)
        sent = {n for c in ledger if float(c.request.get("time", 0)) < last.time and (
            c.response is None or float(c.response.get("time", 0)) >= last.time) for n in _names(c)}
        # ... and it is that attempt's when it says so: a receipt of a later attempt (another attempt number) that
        # names nothing the provider received is an attempt the runtime opened after the restart and whose request
        # never arrived (chaos saw one under load at provider.request.after x worker_kill, retried as the next
        # attempt): no write of the attempt on the wire
        on_wire = {(r.get("work_id"), r.get("attempt")) for r in after if r.get("request_id") in sent}
        for r in after:
            if r.get("receipt_id") in known_before or r.get("request_id") in names \
                    or (r.get("work_id"), r.get("attempt")) not in on_wire:
                continue
            judged += 1
            problems.append(f"receipt {r.get('receipt_id')} ({r.get('work_id')}) appeared after the {last.kind} "
                            "under a key that names no attempt the provider received: a write retried under a new "
                            "key beside the pending one")
    return [_verdict("USG-07", problems, judged, "no receipt naming a provider attempt was observed before a "
                                                 "restart")]


ATTEMPT_CHECKS = tuple(kit_evidence(fn) for fn in (check_retry_receipts, check_partial_lower_bound,
                                                   check_receipts_rebuilt))
