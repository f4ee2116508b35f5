"""Transactions, the event log, process identity and generation fencing over runtime.db.

Every durable change happens in ``tx`` (BEGIN IMMEDIATE, so two processes never interleave a
read-decide-write) and appends at least one event to the append-only log, whose monotonic ``seq``
is what projections are rebuilt from. A worker's writes for a work item go through ``fenced``: the
lease's generation is compared first, and a stale generation's write is refused and recorded in
``fenced_writes`` instead of being applied.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psutil

from .db import Database


class Fenced(Exception):
    """This process's generation is no longer the owner of the work item; its write was refused."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a process is: a pid alone can be recycled, pid + start time on one host cannot."""

    host_id: str
    pid: int
    create_time: float

    @classmethod
    def me(cls, host_id: str) -> Identity:
        return cls(host_id, os.getpid(), psutil.Process().create_time())


def process_alive(pid: int | None, create_time: float | None) -> bool:
    """True if the process with exactly this identity exists (and is not a zombie) on this host."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if create_time is not None and abs(proc.create_time() - create_time) > 0.01:
            return False  # a recycled pid: another process, not the recorded one
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def now() -> float:
    """Wall time as this runtime sees it: the kit's clock offset models long downtime."""
    return time.time() + float(os.environ.get("RK_IMPL_CLOCK_OFFSET_S", "0") or 0)


@contextmanager
def tx(db: Database) -> Iterator[Database]:
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextmanager
def fenced(db: Database, work_id: str, generation: int, op: str) -> Iterator[Database]:
    """A transaction that applies only if ``generation`` still owns ``work_id``."""
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT generation, released FROM leases WHERE work_id=?", (work_id,)).fetchone()
        current = row[0] if row else None
        if current != generation or (row and row[1]):
            conn.execute(
                "INSERT INTO fenced_writes (work_id, stale_generation, current_generation, op, pid, at)"
                " VALUES (?,?,?,?,?,?)", (work_id, generation, current, op, os.getpid(), now()))
            emit(db, work_id, "write_fenced", stale_generation=generation, current_generation=current, op=op)
            conn.execute("COMMIT")
            raise Fenced(f"{op} on {work_id}: generation {generation} is stale (current {current})")
        yield db
    except Fenced:
        raise
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def emit(db: Database, work_id: str | None, kind: str, **payload: Any) -> int:
    cur = db.conn.execute("INSERT INTO events (at, work_id, kind, payload) VALUES (?,?,?,?)",
                          (now(), work_id, kind, json.dumps(payload, sort_keys=True)))
    return int(cur.lastrowid)


def rows(db: Database, sql: str, params: tuple | dict = ()) -> list[dict[str, Any]]:
    return list(db.query(sql, params))


def one(db: Database, sql: str, params: tuple | dict = ()) -> dict[str, Any] | None:
    found = rows(db, sql, params)
    return found[0] if found else None


def set_status(db: Database, work_id: str, status: str, reason_code: str, text: str = "",
               actions: tuple[str, ...] = (), **extra: Any) -> None:
    """Change a work item's status with its reason and the actions a person may take; one event."""
    sets = ", ".join(f"{k}=:{k}" for k in extra)
    db.conn.execute(
        "UPDATE work_items SET status=:status, reason_code=:reason, reason_text=:text, actions=:actions,"
        f" updated_at=:at{', ' + sets if sets else ''} WHERE work_id=:work_id",
        {"status": status, "reason": reason_code, "text": text, "actions": json.dumps(list(actions)),
         "at": now(), "work_id": work_id, **extra})
    emit(db, work_id, "status", status=status, reason_code=reason_code, text=text, actions=list(actions))


def meta_get(db: Database, key: str, default: str | None = None) -> str | None:
    row = db.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return row[0] if row else default


def meta_set(db: Database, key: str, value: str) -> None:
    db.conn.execute("INSERT INTO meta (key, value) VALUES (?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (key, value))
