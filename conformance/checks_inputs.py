"""What became of the user's inputs across crashes and restarts, judged from what the kit sent and saw.

- INP-02 / FA-03: the kit crashes the runtime at the input-acceptance points (the drive of scenario
  ``input_acceptance`` records each crash the failpoint broker saw, with the submit it interrupted, as a
  fault ``input_crash``). A submit interrupted before acceptance was never acknowledged: it never appears as an
  accepted input, and its text never reaches the provider (the kit's ledger). One interrupted after
  acceptance, then sent again by the client, is saved once: one accepted input, and no request carries its
  text twice.
- RI-01: the run intent survives restarts: every acknowledged input is on record with the id the kit got and
  the text it sent, and across each restart an item keeps its session, kind, recovery policy, parent, host
  (when the kit kept the host) and inputs, and its control version never goes back (observe, against the
  kit's own record of its submits).

A user message is found in a request by its digest or its first characters (``copies``): the provider records
each message's shape, never the whole text. Evidence the run did not produce gives ``unknown``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, kit_evidence
from recoverykit.conformance.checks_crosscheck import _restarts, _verdict
from recoverykit.conformance.provider_ledger import Call, calls

INPUT_CRASH = "input_crash"  # fault kind: the kit crashed the runtime at an input-acceptance point


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def copies(call: Call, text: str) -> int:
    """How many user messages of a request are ``text`` (by digest, or its first characters)."""
    head = text.strip()[:160]
    return sum(1 for m in call.request.get("messages") or [] if m.get("role") == "user"
               and (m.get("sha") == _sha(text) or (head and head in (m.get("head") or ""))))


def _crashes(ev: Evidence, point: str) -> list[dict[str, Any]]:
    return [f.detail for f in ev.history.faults if f.kind == INPUT_CRASH and f.detail.get("point") == point]


def _accepted(ev: Evidence) -> dict[str, int]:
    """client_msg_id -> how many accepted inputs carry it, in the final observation (None-safe)."""
    final = ev.history.final_observation()
    out: dict[str, int] = {}
    for item in (final.snapshot.get("work_items") or []) if final is not None else []:
        for inp in item.get("inputs") or []:
            out[inp.get("client_msg_id")] = out.get(inp.get("client_msg_id"), 0) + 1
    return out


def check_unacknowledged_inputs(ev: Evidence) -> list[ClauseResult]:
    """INP-02 and FA-03: what a crash at input acceptance leaves, from the ledger first, observe second."""
    before, after = _crashes(ev, "input.accept.before"), _crashes(ev, "input.accept.after")
    requests = [c for c in calls(ev.ledger) if isinstance(c.request.get("messages"), list)]
    final = ev.history.final_observation()
    accepted = _accepted(ev)
    acked = {i.value.get("client_msg_id") for i, d in ev.history.completions()
             if i.f == "submit" and d is not None and d.type == "ok"}
    drafts, once = [], []
    for crash in before:
        cid, text = crash.get("client_msg_id"), str(crash.get("text", ""))
        if cid in acked:
            drafts.append(f"submit {cid!r} was acknowledged though the runtime crashed before accepting it")
        shown = [c.request.get("request_id") for c in requests if copies(c, text)]
        if shown:
            drafts.append(f"submit {cid!r} was interrupted before acceptance and never acknowledged, yet the provider "
                          f"received its text in {len(shown)} request(s) (first: {shown[0]})")
        if accepted.get(cid):
            drafts.append(f"submit {cid!r} was interrupted before acceptance, yet it is an accepted input")
    for crash in after:
        cid, text = crash.get("client_msg_id"), str(crash.get("text", ""))
        if final is None or not final.quiescent:
            continue
        if accepted.get(cid, 0) != 1:
            once.append(f"submit {cid!r} was interrupted after acceptance and sent again: {accepted.get(cid, 0)} "
                        "accepted inputs carry it (expected exactly one)")
        twice = [c.request.get("request_id") for c in requests if copies(c, text) > 1]
        if twice:
            once.append(f"submit {cid!r} was interrupted after acceptance: request {twice[0]} carries its text "
                        f"{max(copies(c, text) for c in requests)} times (re-appended)")
        if not any(copies(c, text) for c in requests):
            once.append(f"submit {cid!r} was accepted before the crash, yet no request to the provider ever carried "
                        "it")
    judged_after = sum(1 for _ in after) if final is not None and final.quiescent else 0
    return [_verdict("INP-02", drafts, len(before), "no submit was interrupted before acceptance"),
            _verdict("FA-03", drafts + once, len(before) + judged_after,
                     "no submit was interrupted at an input-acceptance point (or the run never settled)")]


_FIXED = ("session_id", "kind", "recovery_policy", "parent_id")


def check_run_intent_kept(ev: Evidence) -> list[ClauseResult]:
    """RI-01: the durable run intent the kit can see survives every restart, and the inputs are the kit's own."""
    problems, judged = [], 0
    snaps = [o for o in ev.snapshots() if o.snapshot.get("work_items") is not None]
    hosts = {o.value.get("host_id") for o in ev.history.ops if o.type == "invoke" and o.f in ("start", "restart")
             and o.value.get("host_id")}
    fields = (*_FIXED, "host_id") if len(hosts) <= 1 else _FIXED
    for fault in _restarts(ev):
        before = next((o for o in reversed(snaps) if o.index < fault.index), None)
        if before is None:
            continue
        for o in (o for o in snaps if o.index > fault.index):
            now = {w["work_id"]: w for w in o.snapshot["work_items"]}
            for was in before.snapshot["work_items"]:
                item = now.get(was["work_id"])
                judged += 1
                if item is None:
                    problems.append(f"{was['work_id']} is missing at observation {o.index} after the {fault.kind} "
                                    f"(event {fault.index})")
                    continue
                changed = [f"{k} {was.get(k)!r} -> {item.get(k)!r}" for k in fields if was.get(k) != item.get(k)]
                if (item.get("control_version") or 0) < (was.get("control_version") or 0):
                    changed.append(f"control_version went back {was['control_version']} -> {item['control_version']}")
                old = [(i.get("input_id"), i.get("text")) for i in was.get("inputs") or []]
                new = [(i.get("input_id"), i.get("text")) for i in item.get("inputs") or []]
                if new[:len(old)] != old:
                    changed.append(f"inputs {old} -> {new}")
                if changed:
                    problems.append(f"{was['work_id']} across the {fault.kind} (event {fault.index}, observation "
                                    f"{o.index}): {'; '.join(changed)}")
    final = snaps[-1] if snaps else None
    if final is not None and judged:
        inputs = {i.get("client_msg_id"): (w["work_id"], i) for w in final.snapshot["work_items"]
                  for i in w.get("inputs") or []}
        for invoke, done in ev.history.completions():
            if invoke.f != "submit" or done is None or done.type != "ok":
                continue
            cid = invoke.value.get("client_msg_id")
            work_id, saved = inputs.get(cid, (None, {}))
            got = (done.value.get("work_id"), done.value.get("input_id"), invoke.value.get("text"))
            if (work_id, saved.get("input_id"), saved.get("text")) != got:
                problems.append(f"acknowledged input {cid!r} (op {done.index}): the kit got work {got[0]} / {got[1]} "
                                f"and sent {got[2]!r}; the record says {work_id} / {saved.get('input_id')} / "
                                f"{saved.get('text')!r}")
    return [_verdict("RI-01", problems, judged, "no work item was observed on both sides of a restart")]


INPUT_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (
    kit_evidence(check_unacknowledged_inputs), check_run_intent_kept,
)
