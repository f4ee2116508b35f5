"""USG-09: known tokens and known prices are stored apart, and a pricing-table change never rewrites a quote.

Seed 000, "Usage, cost and budget": "Store known tokens and known prices separately. Pricing-table changes do
not rewrite historical quotes." A runtime that declares ``init_ok.pricing`` (protocol 1.4) shows, beside each
receipt's tokens, the prices its attempt was quoted at (``usage_receipts[].quote``); the kit changes the table
with ``pricing_set``. Evidence: the kit's own ``pricing_set`` requests (when each was sent and acknowledged,
and the prices), the provider's ledger (when each attempt reached the provider) and the receipts ``observe``
shows, which is the runtime's word (so the verdict is self-reported).

- A quote, once observed, is the same in every later snapshot: across later price changes and restarts. A
  quote recomputed from the table as it is now rewrites history.
- A receipt with tokens whose attempt reached the provider while a table the kit set was in force carries a
  quote, and it is a table in force at some moment between the attempt's request and the receipt's first
  observation (whenever a runtime fixes its quote, at dispatch or at the receipt's write, it is one of those):
  tokens with no price beside them, or prices the kit never set, are not the known prices stored apart.

Valid needs both halves exercised: a quoted receipt observed before and after a later price change, and a
receipt quoted while a table was in force. Anything less is unknown, never valid.
"""

from __future__ import annotations

from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement
from recoverykit.conformance.provider_ledger import calls

PRICES = ("input_usd_per_mtok", "output_usd_per_mtok")


def _tables(ev: Evidence) -> list[tuple[float, float | None, tuple[float, float]]]:
    """Each ``pricing_set`` the runtime acknowledged: (sent at, acknowledged at, its prices), in order."""
    out = []
    for invoke, done in ev.history.completions():
        if invoke.f == "pricing_set" and done is not None and done.type == "ok":
            out.append((invoke.time, done.time, tuple(float(invoke.value[k]) for k in PRICES)))
    return out


def _in_force(tables: list[tuple[float, float | None, tuple[float, float]]], t0: float,
              t1: float) -> set[tuple[float, float]]:
    """The tables that may have been in force at some moment in [t0, t1]: one applies from when it was sent until
    the next one is acknowledged."""
    out = set()
    for k, (sent, _, prices) in enumerate(tables):
        replaced = tables[k + 1][1] if k + 1 < len(tables) else None
        if sent <= t1 and (replaced is None or replaced >= t0):
            out.add(prices)
    return out


def _quote(receipt: dict[str, Any]) -> tuple[float, float] | None:
    q = receipt.get("quote")
    return tuple(float(q[k]) for k in PRICES) if isinstance(q, dict) else None


def check_quotes_kept(ev: Evidence) -> list[ClauseResult]:
    """USG-09: a receipt keeps its tokens and the prices it was quoted at apart; a price change rewrites neither."""
    tables = _tables(ev)
    if not tables:
        return []  # the run changed no price: nothing here to judge (a runtime without pricing never gets one)
    arrived: dict[str, float] = {}
    for c in calls(ev.ledger):
        for name in (c.header_request_id, c.response_id if c.response_id_sent else None):
            if name and "time" in c.request:
                arrived.setdefault(name, float(c.request["time"]))
    first: dict[str, tuple[float, tuple[float, float] | None]] = {}
    problems, kept, quoted = [], 0, 0
    for obs in ev.history.observations:
        for r in obs.snapshot.get("usage_receipts") or []:
            rid, quote = r.get("receipt_id"), _quote(r)
            if rid not in first:
                first[rid] = (obs.time, quote)
                if r.get("usage") in ("known", "partial") and r.get("request_id") in arrived:
                    sent = arrived[r["request_id"]]
                    if sent >= tables[0][1]:  # a table the kit set was in force (acknowledged) when it was sent
                        allowed = _in_force(tables, sent, obs.time)
                        if quote not in allowed:
                            problems.append(f"receipt {rid} ({r.get('usage')} tokens) is quoted at {quote}, not at "
                                            f"a table in force between its request and its first observation "
                                            f"({sorted(allowed)})")
                        else:
                            quoted += 1
                continue
            was = first[rid][1]
            if was is not None and quote != was:
                problems.append(f"receipt {rid}'s quote changed from {was} to {quote} after it was first observed")
            elif was is not None and any(first[rid][0] < sent < obs.time for sent, _, _ in tables):
                kept += 1
    return _judgement("USG-09", problems, min(kept, quoted),
                      "no quoted receipt was observed across a price change, or none was quoted while a table "
                      "the kit set was in force",
                      f"{quoted} receipt(s) quoted at a table in force, {kept} later observation(s) of a quote "
                      "made before a price change unchanged")


PRICING_CHECKS = (check_quotes_kept,)
