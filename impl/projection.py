"""Derived views rebuilt from the event log, never a second source of truth.

``project`` folds events after its cursor into ``projection_sessions``; it runs after a completion
commits (the completion.commit.before_projection point sits between the two) and on every worker
start, so a crash between them converges. A cursor beyond the log's end means events were lost:
that is an explicit state (projection_events_lost) with the action Rebuild, and the original
records are never overwritten from the projection.
"""

from __future__ import annotations

import json

from .db import Database
from .store import meta_get, meta_set, rows, tx


class ProjectionLost(Exception):
    """The projection's cursor points past the end of the event log."""


def project(db: Database) -> int:
    # Read first: most calls find nothing to fold, and taking the write lock for nothing made every worker
    # start queue behind whatever another worker was committing. Reading the cursor before the log's end
    # cannot show a false loss (the cursor never passes the end); a loss is re-checked under the lock.
    cursor = int(meta_get(db, "projection_cursor", "0") or 0)
    if cursor == db.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]:
        return cursor
    with tx(db):
        cursor = int(meta_get(db, "projection_cursor", "0") or 0)
        last = db.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]
        lost = cursor > last
        if lost:
            meta_set(db, "projection_state", json.dumps({
                "reason_code": "projection_events_lost", "actions": ["Rebuild"],
                "text": f"the projection has consumed events up to {cursor} but the log ends at {last}"}))
    if lost:
        raise ProjectionLost(f"projection cursor {cursor} is past the last event {last}")
    with tx(db):
        cursor = int(meta_get(db, "projection_cursor", "0") or 0)
        for ev in rows(db, "SELECT * FROM events WHERE seq > ? ORDER BY seq", (cursor,)):
            _fold(db, ev)
            cursor = ev["seq"]
        meta_set(db, "projection_cursor", str(cursor))
    return cursor


def _fold(db: Database, ev: dict) -> None:
    payload = json.loads(ev["payload"])
    session = payload.get("session_id")
    if ev["kind"] not in ("completed", "turn_interrupted") or not session:
        return
    db.conn.execute("INSERT OR IGNORE INTO projection_sessions (session_id) VALUES (?)", (session,))
    column = "finished_items" if ev["kind"] == "completed" else "interrupted_turns"
    db.conn.execute(f"UPDATE projection_sessions SET {column}={column}+1, last_seq=? WHERE session_id=?",
                    (ev["seq"], session))


def rebuild(db: Database) -> int:
    """The Rebuild action: drop the derived rows and fold the whole log again."""
    with tx(db):
        db.conn.execute("DELETE FROM projection_sessions")
        meta_set(db, "projection_cursor", "0")
        db.conn.execute("DELETE FROM meta WHERE key='projection_state'")
    return project(db)
