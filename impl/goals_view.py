"""The ``goals`` section of ``observe``: a Goal's state, phase and button permissions, computed by the backend.

Kept apart from ``goals`` (the worker's and control's side) so that the adapter's observe path imports no
execution code. ``can_resume`` / ``can_verify`` / ``can_end`` and ``reason_code`` are decided here, from the
durable rows, so no client has to infer them from a status string (seed 000, UI-04).
"""

from __future__ import annotations

import hashlib
import json


def requirements_of(reqs: list[dict], acc: dict | None) -> list[dict]:
    """Every requirement, waived ones included, with what the current acceptance found for each and the
    evidence (reference and content digest) it cites."""
    verdicts = json.loads(acc["verdicts"]) if acc else {}
    out = []
    for r in reqs:
        v = verdicts.get(r["req_id"]) or {}
        out.append({"req_id": r["req_id"], "waived_reason": r["waived_reason"], "verdict": v.get("verdict"),
                    "evidence": [{"ref": e["ref"], "version": e.get("version")} for e in v.get("evidence") or []]})
    return out


def terminal_of(g: dict) -> dict | None:
    """The record saved with the terminal state: its own snapshot (by digest) and transcript anchor."""
    if not g["terminal_snapshot"]:
        return None
    saved = json.loads(g["terminal_snapshot"])
    return {"state": saved.get("state", "achieved"), "revision": saved["revision"],
            "transcript_anchor": None if g["transcript_anchor"] is None else str(g["transcript_anchor"]),
            "digest": hashlib.sha256(g["terminal_snapshot"].encode()).hexdigest()[:16]}


def snapshot_goals(goals: list[dict], items: dict[str, dict], accepted: dict[str, dict],
                   reqs: dict[str, list[dict]] | None = None, active: dict[str, float] | None = None,
                   spent: dict[str, int] | None = None) -> list[dict]:
    """The ``goals`` section: state and the button permissions computed here, never left to a client."""
    out = []
    for g in goals:
        w = items.get(g["work_id"]) or {}
        state = g["state"]
        if state not in ("achieved", "budget_exhausted"):
            if w.get("desired_state") == "cancelled":
                state = "cancelled"
            elif w.get("desired_state") == "paused":
                state = "paused"
        terminal = state in ("achieved", "cancelled")
        phase = None if terminal or state == "paused" else (g["phase"] or "working")
        if state == "active" and w.get("status") == "waiting" and w.get("reason_code") == "waiting_dependency":
            phase = "waiting"  # on a live wait handle (impl/waits.py): no model turn until it is notified
        reason = None
        if state == "paused":
            reason = g["reason_code"] if g["state"] == "paused" else w.get("reason_code")
        elif state in ("blocked", "budget_exhausted"):
            reason = g["reason_code"]
        elif state == "cancelled":
            reason = "user_cancelled"
        acc = accepted.get(g["goal_id"])
        out.append({
            "goal_id": g["goal_id"], "work_id": g["work_id"], "state": state, "phase": phase,
            "revision": g["revision"],
            "can_resume": state in ("paused", "blocked") and g["reason_code"] not in ("budget_unknown_cost",),
            "can_verify": state == "active", "can_end": not terminal, "reason_code": reason,
            "budget": None if g["max_tokens"] is None and g["max_cost_usd"] is None and g.get("max_active_s") is None
            else {"max_tokens": g["max_tokens"], "max_cost_usd": g["max_cost_usd"], "spent_tokens_known":
                  None if spent is None else spent.get(g["work_id"], 0),  # impl/spend.py, after each receipt
                  "requests_usage_unknown": None, "max_active_s": g.get("max_active_s")},
            "acceptance": acc["outcome"] if acc and acc["revision"] == g["revision"] and acc["valid"] else None,
            "requirements": requirements_of((reqs or {}).get(g["goal_id"], []),
                                            acc if acc and acc["revision"] == g["revision"] and acc["valid"]
                                            else None),
            "terminal": terminal_of(g), "active_time_s": round((active or {}).get(g["goal_id"], 0.0), 3)})
    return out


def receipt_attribution(receipt: dict, goal_by_work: dict[str, dict]) -> dict:
    """A receipt's Goal and revision as fixed before its request was sent (null for ordinary chat)."""
    goal = goal_by_work.get(receipt["work_id"])
    if goal is None:
        return {"goal_id": None, "revision": None}
    return {"goal_id": goal["goal_id"], "revision": receipt["objective_revision"]}

