"""Budget reservations: what a paid attempt holds of a Goal's hard budget, from before dispatch to its receipt.

Seed 000, "Usage, cost and budget": "Reserve a maximum request amount when calculable", and "Expired unstarted
reservations cannot dispatch; started requests are not automatically released." Under a hard token budget every
attempt of a Goal (worker or verifier) gets a reservation in the same transaction as its dispatch record, carried
to usage.db by the outbox with its receipt (``engine.drain_outbox``):

- ``reserved``: held, the request not yet sent. The amount is what the budget has left (the reference sets no
  output limit on its requests, so that is the most the attempt may spend before the budget is exhausted; a
  Goal's attempts are sent one at a time). It expires ``RESERVATION_TTL_S`` after it was made.
- ``started``: marked durably right before the request is sent (``start``), so a reservation still ``reserved``
  after a crash proves its request never left. A started one is never released by recovery or by time: only its
  receipt settles it (``settled``, in the receipt's own transaction), and a receipt whose usage is unknown leaves
  it started for good.
- An unstarted one survives a restart with its attempt, which the worker then sends under it (``unsent``: it
  never reached the provider) while it is live. ``start`` refuses to send under an expired one: it becomes
  ``expired`` and that attempt is never sent; the Goal's next attempt makes a reservation of its own. An
  unstarted one whose attempt is given up otherwise is ``released`` (``expired`` if its time passed).
- The budget gate counts no spend for an attempt whose reservation is unstarted or ended unstarted
  (``reserved``, ``expired``, ``released``): it was never sent.
"""

from __future__ import annotations

from .db import Database
from .store import now, one, rows, tx

RESERVATION_TTL_S = 300.0  # an unstarted reservation older than this never dispatches
LIVE = ("reserved", "started")


def plan(db: Database, udb: Database, work_id: str) -> dict | None:
    """Inside the dispatch transaction: the reservation an attempt of ``work_id`` needs, or None (no Goal, or no
    hard token budget: budgets are unlimited by default and then nothing is reserved)."""
    g = one(db, "SELECT goal_id, max_tokens FROM goals WHERE work_id=?", (work_id,))
    if g is None or g["max_tokens"] is None:
        return None
    spent = sum(r["total_tokens"] or 0 for r in rows(
        udb, "SELECT total_tokens FROM receipts WHERE work_id=? AND state IN ('known','partial')", (work_id,)))
    t = now()
    return {"goal_id": g["goal_id"], "max_tokens": max(0, g["max_tokens"] - spent), "created_at": t,
            "expires_at": t + RESERVATION_TTL_S}


def open_(udb: Database, request_id: str, work_id: str, plan_: dict) -> None:
    """The outbox's ``usage.open``: the reservation beside its receipt, idempotent under the request id."""
    udb.conn.execute("INSERT OR IGNORE INTO reservations (reservation_id, request_id, work_id, goal_id, max_tokens,"
                     " state, created_at, expires_at, updated_at) VALUES (?,?,?,?,?,'reserved',?,?,?)",
                     (f"rsv-{request_id}", request_id, work_id, plan_["goal_id"], plan_["max_tokens"],
                      plan_["created_at"], plan_["expires_at"], now()))


def start(udb: Database, request_id: str) -> bool:
    """Right before the request is sent: mark its reservation started; False if it expired unstarted (then the
    request must not be sent). True when the attempt has no reservation."""
    if one(udb, "SELECT 1 AS x FROM reservations WHERE request_id=?", (request_id,)) is None:
        return True  # no hard budget: nothing reserved, no write lock taken for it
    with tx(udb):
        r = one(udb, "SELECT state, expires_at FROM reservations WHERE request_id=?", (request_id,))
        if r is None or r["state"] == "started":
            return True
        if r["state"] == "reserved" and r["expires_at"] > now():
            udb.conn.execute("UPDATE reservations SET state='started', updated_at=? WHERE request_id=?",
                             (now(), request_id))
            return True
        if r["state"] == "reserved":
            udb.conn.execute("UPDATE reservations SET state='expired', updated_at=? WHERE request_id=?",
                             (now(), request_id))
        return False


def lost(udb: Database, request_id: str) -> None:
    """The outbox's ``usage.lost`` (recovery found the attempt without a response): an unstarted reservation is
    given back (expired if its time passed); a started one stays, whatever its receipt says."""
    t = now()
    udb.conn.execute("UPDATE reservations SET state=CASE WHEN expires_at <= ? THEN 'expired' ELSE 'released' END,"
                     " updated_at=? WHERE request_id=? AND state='reserved'", (t, t, request_id))


def settle(udb: Database, request_id: str, receipt_state: str) -> None:
    """Inside the receipt's write: known or partial usage settles the reservation; unknown usage leaves it."""
    if receipt_state in ("known", "partial"):
        udb.conn.execute("UPDATE reservations SET state='settled', updated_at=? WHERE request_id=? AND state IN"
                         " ('reserved','started')", (now(), request_id))


def is_unsent(udb: Database, request_id: str) -> bool:
    """The attempt was reserved and never started: it never reached the provider."""
    found = one(udb, "SELECT 1 AS x FROM reservations WHERE request_id=? AND state='reserved'", (request_id,))
    return found is not None


def unsent(db: Database, udb: Database, turn_id: str, step: int) -> str | None:
    """The step's latest attempt, if recorded and reserved but never started (a crash between the two)."""
    last = one(db, "SELECT request_id FROM provider_requests WHERE turn_id=? AND step=? AND status='dispatched'"
                   " ORDER BY attempt DESC LIMIT 1", (turn_id, step))
    return last["request_id"] if last is not None and is_unsent(udb, last["request_id"]) else None


