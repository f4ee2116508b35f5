"""The operator's pricing table, and the quote a request is given when it is dispatched.

Seed 000, "Usage, cost and budget": known tokens and known prices are stored apart, and a pricing-table change
never rewrites a historical quote. So a price is never multiplied into a receipt: the receipt keeps its tokens
(from the provider's usage) and, beside them, the prices in force when its attempt was dispatched, copied once
and never updated. A later ``set`` adds a row; rows are never changed, so the table is its own history.
"""

from __future__ import annotations

from .db import Database
from .store import emit, now, one, tx


def set_prices(db: Database, model: str | None, input_usd_per_mtok: float, output_usd_per_mtok: float) -> dict:
    """A control operation: the new prices are durable when this returns."""
    with tx(db):
        db.conn.execute("INSERT INTO pricing (model, input_usd_per_mtok, output_usd_per_mtok, set_at)"
                        " VALUES (?,?,?,?)", (model, input_usd_per_mtok, output_usd_per_mtok, now()))
        emit(db, None, "pricing_set", model=model, input_usd_per_mtok=input_usd_per_mtok,
             output_usd_per_mtok=output_usd_per_mtok)
    return {}


def quote(db: Database, model: str | None) -> dict | None:
    """The prices in force now for ``model`` (a row for it, else one for every model); None if none was set."""
    row = one(db, "SELECT input_usd_per_mtok, output_usd_per_mtok FROM pricing WHERE model IS ? OR model IS NULL"
                  " ORDER BY (model IS NULL), seq DESC LIMIT 1", (model,))
    return dict(row) if row else None
