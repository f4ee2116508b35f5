"""A Goal's spend projection (``budget.spent_tokens_known``): durable, raised only in its receipt's write.

Seed 000, "Usage, cost and budget": "Update Goal projections only after durable receipt writes succeed." The
projection lives in usage.db beside the receipts, one row per work item, and is raised in the same transaction
that settles a receipt with known or partial usage (``engine.settle_usage``), never before it: a crash before the
receipt is durable leaves the projection where it was, so it never shows spend no durable receipt holds, and a
receipt settled twice (it cannot be: its update needs state ``dispatched``) would not count twice.
"""

from __future__ import annotations

from .db import Database


def add(udb: Database, work_id: str, tokens: int) -> None:
    """Inside the receipt's transaction: raise the work item's known spend by the receipt's tokens."""
    udb.conn.execute("INSERT INTO goal_spend (work_id, spent_tokens_known) VALUES (?, ?) ON CONFLICT(work_id) DO"
                     " UPDATE SET spent_tokens_known = spent_tokens_known + excluded.spent_tokens_known",
                     (work_id, tokens))
