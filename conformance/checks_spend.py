"""USG-06: a Goal's usage projection never runs ahead of its durable receipts.

Seed 000, "Usage, cost and budget": "Update Goal projections only after durable receipt writes succeed." The
projection the protocol shows is a Goal's ``budget.spent_tokens_known`` (tokens from receipts with known usage);
the durable receipts are ``usage_receipts`` (attributed to the Goal, with their tokens when known or partial).
A projection updated before its receipt's write shows, after a crash between the two, spend that no receipt
holds: the receipt is then unknown while the projection already counted its tokens.

- In every snapshot, a Goal's ``spent_tokens_known`` is at most the tokens of its receipts with known or partial
  usage in that snapshot (a runtime that reads the projection before the receipts, or in one read, never shows
  more).

Valid needs the dangerous moment exercised: a Goal observed after a restart with a receipt whose usage is unknown
although the provider delivered that attempt's response with usage (the kit's ledger): the runtime had the usage
in hand and died before it was durable. Evidence: the snapshot's projection and receipts (the runtime's word)
and the ledger (the kit's), so the verdict is self-reported.
"""

from __future__ import annotations

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement
from recoverykit.conformance.history import restarts
from recoverykit.conformance.provider_ledger import calls

KNOWN = ("known", "partial")


def _tokens(receipt: dict) -> int:
    return int(receipt.get("prompt_tokens") or 0) + int(receipt.get("completion_tokens") or 0)


def check_spend_projection(ev: Evidence) -> list[ClauseResult]:
    """USG-06: spent_tokens_known never above the tokens of the Goal's durable receipts."""
    shown = [o for o in ev.history.observations if isinstance(o.snapshot.get("usage_receipts"), list) and any(
        (g.get("budget") or {}).get("spent_tokens_known") is not None for g in o.snapshot.get("goals") or [])]
    if not shown:
        return []  # no projection shown (no budget, or the runtime does not track spend)
    delivered = {c.header_request_id: c.response["time"] for c in calls(ev.ledger)
                 if c.header_request_id and c.delivered and c.usage_reported}
    kills = [f.time for f in restarts(ev.history)]
    problems: list[str] = []
    judged: set[str] = set()
    for o in shown:
        receipts = o.snapshot["usage_receipts"]
        for g in o.snapshot.get("goals") or []:
            spent = (g.get("budget") or {}).get("spent_tokens_known")
            if spent is None:
                continue
            mine = [r for r in receipts if r.get("goal_id") == g.get("goal_id")]
            durable = sum(_tokens(r) for r in mine if r.get("usage") in KNOWN)
            if spent > durable:
                problems.append(f"Goal {g.get('goal_id')} shows {spent} tokens spent at observation {o.index}, above "
                                f"the {durable} its receipts with known usage hold: the projection ran ahead of "
                                "the durable receipts")
            elif any(r.get("usage") == "unknown" and r.get("request_id") in delivered
                     and any(delivered[r["request_id"]] < k < o.time for k in kills) for r in mine):
                judged.add(str(g.get("goal_id")))
    return _judgement("USG-06", problems, len(judged),
                      "no Goal's projection was observed after a restart that lost a receipt whose usage the "
                      "provider had delivered",
                      f"{len(judged)} Goal(s) showed no spend above their durable receipts after a receipt "
                      "delivered with usage was lost in a restart")


SPEND_CHECKS = (check_spend_projection,)
