"""The mini runtime's durable state: one SQLite file in the data dir, shared by adapter and worker.

Standard library only. Both processes open their own connection (WAL, busy timeout) and keep every
write in one short transaction, so a SIGKILL at any moment leaves the last committed state.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS work (
    work_id TEXT PRIMARY KEY, session_id TEXT, desired TEXT, status TEXT, reason TEXT, cv INTEGER,
    host_id TEXT, messages TEXT, created REAL, progress INTEGER DEFAULT 0);
CREATE TABLE IF NOT EXISTS inputs (
    input_id TEXT PRIMARY KEY, client_msg_id TEXT UNIQUE, work_id TEXT, text TEXT, at REAL);
CREATE TABLE IF NOT EXISTS turns (
    turn_id TEXT PRIMARY KEY, work_id TEXT, ckey TEXT UNIQUE, predecessor TEXT, status TEXT, at REAL);
CREATE TABLE IF NOT EXISTS tool_calls (
    call_id TEXT PRIMARY KEY, work_id TEXT, turn_id TEXT, tool TEXT, effect TEXT, status TEXT,
    pid INTEGER, create_time REAL, args TEXT, repair_key TEXT, at REAL);
CREATE TABLE IF NOT EXISTS receipts (
    request_id TEXT PRIMARY KEY, work_id TEXT, attempt INTEGER, prompt INTEGER, completion INTEGER,
    usage TEXT, at REAL);
CREATE TABLE IF NOT EXISTS leases (
    work_id TEXT PRIMARY KEY, host_id TEXT, pid INTEGER, create_time REAL, generation INTEGER,
    released INTEGER DEFAULT 0);
"""


def connect(data_dir: str) -> sqlite3.Connection:
    os.makedirs(data_dir, exist_ok=True)
    conn = sqlite3.connect(os.path.join(data_dir, "state.db"), timeout=30, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(SCHEMA)
    return conn


class tx:
    """``with tx(conn):`` one IMMEDIATE transaction (writers queue on the lock instead of failing)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, kind, *rest) -> None:
        self.conn.execute("COMMIT" if kind is None else "ROLLBACK")


def rows(conn: sqlite3.Connection, sql: str, params: tuple = ()) -> list[dict]:
    return [dict(r) for r in conn.execute(sql, params)]


def one(conn: sqlite3.Connection, sql: str, params: tuple = ()) -> dict | None:
    found = rows(conn, sql, params)
    return found[0] if found else None


def snapshot(conn: sqlite3.Connection) -> dict:
    inputs: dict[str, list[dict]] = {}
    for i in rows(conn, "SELECT * FROM inputs ORDER BY at"):
        inputs.setdefault(i["work_id"], []).append(
            {"input_id": i["input_id"], "client_msg_id": i["client_msg_id"], "text": i["text"]})
    items = [{"work_id": w["work_id"], "session_id": w["session_id"], "kind": "chat_request",
              "desired_state": w["desired"], "control_version": w["cv"], "status": w["status"],
              "reason_code": w["reason"], "recovery_policy": "automatic", "host_id": w["host_id"], "parent_id": None,
              "inputs": inputs.get(w["work_id"], []), "last_progress": str(w["progress"]) if w["progress"] else None}
             for w in rows(conn, "SELECT * FROM work ORDER BY created")]
    turns = [{"turn_id": t["turn_id"], "work_id": t["work_id"], "continuation_key": t["ckey"],
              "predecessor": t["predecessor"], "status": t["status"]}
             for t in rows(conn, "SELECT * FROM turns ORDER BY at")]
    calls = [{"call_id": c["call_id"], "work_id": c["work_id"], "turn_id": c["turn_id"], "tool": c["tool"],
              "effect_class": c["effect"], "status": "never_started" if c["status"] == "refused" else c["status"],
              "pid": c["pid"],
              "create_time": c["create_time"] if c["pid"] else None, "repair_key": c["repair_key"]}
             for c in rows(conn, "SELECT * FROM tool_calls ORDER BY at")]
    receipts = [{"receipt_id": r["request_id"], "work_id": r["work_id"], "request_id": r["request_id"],
                 "attempt": r["attempt"], "goal_id": None, "revision": None,
                 "prompt_tokens": r["prompt"] if r["usage"] != "unknown" else None,
                 "completion_tokens": r["completion"] if r["usage"] != "unknown" else None, "usage": r["usage"]}
                for r in rows(conn, "SELECT * FROM receipts ORDER BY at")]
    leases = [{"work_id": lease["work_id"], "owner": {"host_id": lease["host_id"], "pid": lease["pid"],
                                                     "create_time": lease["create_time"]},
               "generation": lease["generation"], "expires_at": None}
              for lease in rows(conn, "SELECT * FROM leases WHERE released=0")]
    return {"work_items": items, "turns": turns, "tool_calls": calls, "usage_receipts": receipts, "leases": leases}


def now(offset_s: float = 0.0) -> float:
    return time.time() + offset_s


def dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))
