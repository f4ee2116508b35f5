"""The adapter's own durable run intent, beside LangGraph's checkpoints (``intent.sqlite`` in the data dir).

LangGraph persists a thread's state after every step, but not what the user asked for: there is no paused,
cancelled or queued run in a checkpoint. A LangGraph application that offers Pause and End keeps that in a
table of its own, as this one does. One row per user request (a work item); a session is a LangGraph thread,
so later requests of a session see the earlier ones' messages, as in a chat application. Also here: the
inputs as acknowledged, the turns (one per resumption of a run from a checkpoint, keyed by the continuation
key) and the usage receipts the callback handler writes.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (work_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, input_id TEXT NOT NULL,
  desired TEXT NOT NULL, status TEXT NOT NULL, reason TEXT, cv INTEGER NOT NULL, host_id TEXT,
  progress TEXT, busy_pid INTEGER, served REAL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS inputs (input_id TEXT PRIMARY KEY, client_msg_id TEXT NOT NULL UNIQUE,
  work_id TEXT NOT NULL, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS turns (turn_id TEXT PRIMARY KEY, work_id TEXT NOT NULL, ckey TEXT NOT NULL UNIQUE,
  predecessor TEXT, status TEXT NOT NULL, cv INTEGER NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS receipts (request_id TEXT PRIMARY KEY, work_id TEXT NOT NULL, prompt INTEGER,
  completion INTEGER, usage TEXT NOT NULL, created REAL NOT NULL);
"""


def connect(data_dir: Path | str) -> sqlite3.Connection:
    db = sqlite3.connect(Path(data_dir) / "intent.sqlite", isolation_level=None, timeout=30,
                         check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(SCHEMA)
    return db


@contextmanager
def tx(db: sqlite3.Connection):
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@contextmanager
def snapshot(db: sqlite3.Connection):
    """One consistent read that waits for no writer (WAL): ``observe`` must answer while the worker is stopped
    inside a commit (a durable-write point), holding the write lock ``tx`` takes."""
    db.execute("BEGIN DEFERRED")
    try:
        yield db
    finally:
        db.execute("ROLLBACK")


def rows(db: sqlite3.Connection, sql: str, args: tuple = ()) -> list[dict]:
    return [dict(r) for r in db.execute(sql, args).fetchall()]


def one(db: sqlite3.Connection, sql: str, args: tuple = ()) -> dict | None:
    found = db.execute(sql, args).fetchone()
    return dict(found) if found is not None else None


def now() -> float:
    return time.time()
