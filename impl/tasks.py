"""Paperclip tasks: their store, Retry admission, the kit's environment faults, and the observe sections.

Seed 001 (Paperclip's task recovery with #19759) on the reference runtime. A task has runs; a run belongs to a
recovery generation and carries a native recovery coordinator that a restart claims. A Retry click records a
durable wakeup receipt before any physical work, keyed by company and idempotency key over every receipt status.
The runs themselves are executed by the workers (``task_runner``), in workspaces ``workspaces`` prepares with
real git, on the schedule ``retry_policy`` computes.

The task layer keeps its own SQLite file (``tasks.db``, WAL, ``synchronous=FULL``, every write ``BEGIN
IMMEDIATE``) beside the chat core's: it shares the processes, the clock and the failpoints, not the chat tables.
This module runs in the control process (admission, faults) and in the adapter (observe).
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

from .db import Database
from .failpoints import failpoint
from .store import now, one, rows, tx

COMPANY = "acme"  # the reference runtime serves one company; keys are still unique per (company, key)
ACTIVE = ("queued", "preparing", "bootstrapping", "dispatched")
SECTIONS = ["runs", "tasks", "wakeup_receipts", "workspaces", "recovery_coordinators", "retry_schedule"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (task_id TEXT PRIMARY KEY, company TEXT NOT NULL, project TEXT, text TEXT NOT NULL,
  status TEXT NOT NULL, reason TEXT, current_run TEXT, generation INTEGER NOT NULL DEFAULT 1,
  gen_retries INTEGER NOT NULL DEFAULT 0, gen_first_failure REAL, created_at REAL NOT NULL, retry_limit INTEGER);
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, task_id TEXT NOT NULL, generation INTEGER NOT NULL,
  attempt INTEGER NOT NULL, state TEXT NOT NULL, error_code TEXT, retry_of TEXT, idempotency_key TEXT,
  workspace TEXT, dispatched INTEGER NOT NULL DEFAULT 0, runner_pid INTEGER, runner_ct REAL,
  created_at REAL NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS wakeup_receipts (company TEXT NOT NULL, idempotency_key TEXT NOT NULL,
  task_id TEXT NOT NULL, status TEXT NOT NULL, run_id TEXT, observed_run_id TEXT NOT NULL, defer_reason TEXT,
  created_at REAL NOT NULL, PRIMARY KEY (company, idempotency_key));
CREATE TABLE IF NOT EXISTS workspaces (path TEXT PRIMARY KEY, strategy TEXT NOT NULL, task_id TEXT, run_id TEXT,
  base TEXT, isolated INTEGER NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS coordinators (run_id TEXT PRIMARY KEY, state TEXT NOT NULL, claim_kind TEXT,
  lease_owner TEXT, result TEXT, error_code TEXT);
CREATE TABLE IF NOT EXISTS retry_schedule (task_id TEXT NOT NULL, generation INTEGER NOT NULL,
  attempt INTEGER NOT NULL, due_at REAL NOT NULL, jitter REAL NOT NULL, first_failure_at REAL NOT NULL,
  window_end REAL NOT NULL, cooldown_until REAL, cooldown_source TEXT, state TEXT NOT NULL,
  PRIMARY KEY (task_id, generation, attempt));
CREATE TABLE IF NOT EXISTS task_messages (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL,
  text TEXT NOT NULL, run_id TEXT, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS task_faults (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL,
  fault TEXT NOT NULL, error_code TEXT NOT NULL, cooldown_s REAL, remaining INTEGER NOT NULL);
"""


class TaskError(Exception):
    """A request the task layer refuses: ``code`` is the protocol's error code; definite (nothing saved)."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code, self.text = code, text


def open_tasks_db(data_dir: Path) -> Database:
    conn = sqlite3.connect(str(Path(data_dir) / "tasks.db"), timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(SCHEMA)
    return Database(conn)


def new_run(db: Database, task: dict, *, generation: int, attempt: int, retry_of: str | None,
            key: str | None) -> str:
    """Insert a queued run with its coordinator and make it the task's current run (inside the caller's tx)."""
    run_id = f"r-{uuid.uuid4().hex[:10]}"
    seq = (one(db, "SELECT COUNT(*) AS n FROM runs WHERE task_id=?", (task["task_id"],)) or {"n": 0})["n"] + 1
    db.execute("INSERT INTO runs (run_id, task_id, generation, attempt, state, retry_of, idempotency_key,"
               " created_at, seq) VALUES (?,?,?,?,?,?,?,?,?)",
               (run_id, task["task_id"], generation, attempt, "queued", retry_of, key, now(), seq))
    db.execute("INSERT INTO coordinators (run_id, state) VALUES (?, 'running')", (run_id,))
    db.execute("UPDATE tasks SET current_run=?, status='working', reason=NULL, generation=? WHERE task_id=?",
               (run_id, generation, task["task_id"]))
    return run_id


def task_create(db: Database, project: str | None, text: str, retry_limit: int | None = None) -> dict:
    """A task and its initial run; ``retry_limit``: a stricter execution retry limit, kept apart from the
    maintenance policy's budget (the policy never schedules beyond it)."""
    with tx(db):
        task_id = f"t-{uuid.uuid4().hex[:10]}"
        db.execute("INSERT INTO tasks (task_id, company, project, text, status, created_at, retry_limit) VALUES"
                   " (?,?,?,?,?,?,?)", (task_id, COMPANY, project, text, "working", now(), retry_limit))
        run_id = new_run(db, {"task_id": task_id}, generation=1, attempt=1, retry_of=None, key=None)
    return {"task_id": task_id, "run_id": run_id}


def _open_coordinator(db: Database, run_id: str | None) -> dict | None:
    """The run's coordinator while a restart claim holds it open (Retry admission reads it as settling)."""
    if run_id is None:
        return None
    return one(db, "SELECT * FROM coordinators WHERE run_id=? AND state='observed'", (run_id,))


def admit(db: Database, task: dict, key: str) -> tuple[str | None, bool, str]:
    """Admission of a deliberate click (inside the caller's tx): (run_id, created, receipt status)."""
    current = one(db, "SELECT * FROM runs WHERE run_id=?", (task["current_run"],))
    if current is not None and current["state"] in ACTIVE:
        return current["run_id"], False, "pending"  # concurrent clicks attach to the accepted work
    if _open_coordinator(db, task["current_run"]) is not None:
        return None, False, "deferred"  # new work waits while a native run recovers its unfinished accounting
    scheduled = one(db, "SELECT * FROM retry_schedule WHERE task_id=? AND generation=? AND state='scheduled'",
                    (task["task_id"], task["generation"]))
    if scheduled is not None:  # attach to active automatic recovery: its generation, attempt count and deadline
        db.execute("UPDATE retry_schedule SET state='fired' WHERE task_id=? AND generation=? AND attempt=?",
                   (task["task_id"], scheduled["generation"], scheduled["attempt"]))
        run_id = new_run(db, task, generation=task["generation"], attempt=scheduled["attempt"] + 1,
                         retry_of=task["current_run"], key=key)
        return run_id, True, "pending"
    # a new deliberate click after the generation ended: a new generation with a fresh budget
    db.execute("UPDATE tasks SET gen_retries=0, gen_first_failure=NULL WHERE task_id=?", (task["task_id"],))
    run_id = new_run(db, task, generation=task["generation"] + 1, attempt=1, retry_of=task["current_run"], key=key)
    return run_id, True, "pending"


def retry(db: Database, task_id: str, key: str, observed_run_id: str, authority: str = "board") -> dict:
    """A deliberate Retry: the receipt is durable before the answer and before any physical work. Only a board
    member with task-mutation authority may click; anyone else is refused before anything is recorded."""
    if authority != "board":
        raise TaskError("forbidden", "a Retry needs authenticated board task-mutation authority")
    failpoint("retry.receipt.before", task_id)
    with tx(db):
        known = one(db, "SELECT * FROM wakeup_receipts WHERE company=? AND idempotency_key=?", (COMPANY, key))
        if known is not None:  # a repeated request, whatever its receipt's status: never a second run
            return {"run_id": known["run_id"], "created": False, "receipt_status": known["status"]}
        task = one(db, "SELECT * FROM tasks WHERE task_id=?", (task_id,))
        if task is None:
            raise TaskError("not_found", f"no task {task_id!r}")
        current = one(db, "SELECT * FROM runs WHERE run_id=?", (task["current_run"],))
        concurrent = current is not None and current["state"] in ACTIVE and current["retry_of"] == observed_run_id
        if observed_run_id != task["current_run"] and not concurrent:  # a click on the run the accepted work retries
            raise TaskError("precondition_failed", f"the click saw run {observed_run_id!r}, the task's current run "
                            f"is {task['current_run']!r}; refresh and click again")
        run_id, created, status = admit(db, task, key)
        reason = "controller_settling" if status == "deferred" else None
        db.execute("INSERT INTO wakeup_receipts (company, idempotency_key, task_id, status, run_id, observed_run_id,"
                   " defer_reason, created_at) VALUES (?,?,?,?,?,?,?,?)",
                   (COMPANY, key, task_id, status, run_id, observed_run_id, reason, now()))
        if status == "deferred":
            db.execute("UPDATE tasks SET status='held', reason='controller_settling' WHERE task_id=?", (task_id,))
    failpoint("retry.receipt.after", task_id)
    return {"run_id": run_id, "created": created, "receipt_status": status}


def wake_deferred(db: Database, task_id: str) -> None:
    """Deferred clicks of a task whose coordinator settled: admit them now (inside the caller's tx)."""
    for receipt in rows(db, "SELECT * FROM wakeup_receipts WHERE task_id=? AND status='deferred' ORDER BY created_at",
                        (task_id,)):
        task = one(db, "SELECT * FROM tasks WHERE task_id=?", (task_id,))
        run_id, _, status = admit(db, task, receipt["idempotency_key"])
        if status == "deferred":
            return
        db.execute("UPDATE wakeup_receipts SET status=?, run_id=?, defer_reason=NULL WHERE company=? AND"
                   " idempotency_key=?", (status, run_id, receipt["company"], receipt["idempotency_key"]))


def task_fault(db: Database, task_id: str, fault: str, error_code: str, cooldown_s: float | None, count: int) -> dict:
    with tx(db):
        if one(db, "SELECT 1 AS x FROM tasks WHERE task_id=?", (task_id,)) is None:
            raise TaskError("not_found", f"no task {task_id!r}")
        db.execute("INSERT INTO task_faults (task_id, fault, error_code, cooldown_s, remaining) VALUES (?,?,?,?,?)",
                   (task_id, fault, error_code, cooldown_s, count))
    return {"task_id": task_id}


def task_message(db: Database, task_id: str, text: str) -> dict:
    """A saved message: undelivered (no run) until a run of the task starts execution (``consume_messages``)."""
    with tx(db):
        if one(db, "SELECT 1 AS x FROM tasks WHERE task_id=?", (task_id,)) is None:
            raise TaskError("not_found", f"no task {task_id!r}")
        db.execute("INSERT INTO task_messages (task_id, text, created_at) VALUES (?,?,?)", (task_id, text, now()))
    return {"task_id": task_id}


def consume_messages(db: Database, task_id: str, run_id: str) -> list[str]:
    """The task's saved, undelivered messages, consumed by the run whose execution starts now (inside the
    dispatch transaction: consumed once, when execution starts), with any it consumed before; oldest first."""
    db.execute("UPDATE task_messages SET run_id=? WHERE task_id=? AND run_id IS NULL", (run_id, task_id))
    return [m["text"] for m in rows(db, "SELECT text FROM task_messages WHERE run_id=? ORDER BY id", (run_id,))]


def take_fault(db: Database, task_id: str, fault: str) -> dict | None:
    """Consume one armed fault of this kind for the task (inside the caller's tx), or None."""
    armed = one(db, "SELECT * FROM task_faults WHERE task_id=? AND fault=? AND remaining>0 ORDER BY id LIMIT 1",
                (task_id, fault))
    if armed is not None:
        db.execute("UPDATE task_faults SET remaining=remaining-1 WHERE id=?", (armed["id"],))
    return armed


def handle(data_dir: Path, req: dict) -> dict:
    """The control process's entry for the task requests."""
    db = open_tasks_db(data_dir)
    try:
        op = req["op"]
        if op == "task_create":
            return task_create(db, req.get("project"), req["text"], req.get("retry_limit"))
        if op == "retry":
            return retry(db, req["work_id"], req["idempotency_key"], req["observed_run_id"],
                         req.get("authority") or "board")
        if op == "task_message":
            return task_message(db, req["task_id"], req["text"])
        if op == "task_fault":
            return task_fault(db, req["task_id"], req["fault"], req["error_code"], req.get("cooldown_s"),
                              int(req.get("count") or 1))
        raise TaskError("malformed_request", f"the task layer does not know {op!r}")
    finally:
        db.conn.close()


OPS = ("task_create", "retry", "task_message", "task_fault")


# --- observe ----------------------------------------------------------------------------------------------

def sections(data_dir: Path) -> dict:
    """The six task sections, read in one transaction; empty lists before the first task."""
    path = Path(data_dir) / "tasks.db"
    if not path.exists():
        return {s: [] for s in SECTIONS}
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("BEGIN")
        read = {t: [dict(r) for r in conn.execute(f"SELECT * FROM {t}")]
                for t in ("tasks", "runs", "wakeup_receipts", "workspaces", "coordinators", "retry_schedule")}
        conn.execute("COMMIT")
    except sqlite3.OperationalError:  # a task layer not created yet by this process's first write
        return {s: [] for s in SECTIONS}
    finally:
        conn.close()
    status = {"queued": "queued", "preparing": "running", "bootstrapping": "running", "dispatched": "running",
              "succeeded": "succeeded", "failed": "failed", "cancelled": "cancelled"}
    return {
        "runs": [{"run_id": r["run_id"], "work_id": r["task_id"], "status": status[r["state"]],
                  "retry_of": r["retry_of"], "idempotency_key": r["idempotency_key"], "generation": r["generation"],
                  "attempt": r["attempt"], "error_code": r["error_code"], "workspace": r["workspace"],
                  "dispatched": bool(r["dispatched"])} for r in sorted(read["runs"], key=lambda r: r["created_at"])],
        "tasks": [{"task_id": t["task_id"], "company": t["company"], "project": t["project"], "status": t["status"],
                   "current_run": t["current_run"], "action": "retry" if t["status"] == "retry_offered" else None,
                   "reason": t["reason"]} for t in read["tasks"]],
        "wakeup_receipts": [{"company": w["company"], "idempotency_key": w["idempotency_key"], "task_id": w["task_id"],
                             "status": w["status"], "run_id": w["run_id"], "observed_run_id": w["observed_run_id"],
                             "defer_reason": w["defer_reason"]} for w in read["wakeup_receipts"]],
        "workspaces": [{"path": w["path"], "strategy": w["strategy"], "task_id": w["task_id"], "run_id": w["run_id"],
                        "base": w["base"], "isolated": bool(w["isolated"])} for w in read["workspaces"]],
        "recovery_coordinators": [{"run_id": c["run_id"], "state": c["state"], "claim_kind": c["claim_kind"],
                                   "lease_owner": c["lease_owner"], "error_code": c["error_code"],
                                   "result": c["result"]}
                                  for c in read["coordinators"]],
        "retry_schedule": [{k: s[k] for k in ("task_id", "generation", "attempt", "due_at", "jitter",
                                              "first_failure_at", "window_end", "cooldown_until", "cooldown_source",
                                              "state")} for s in read["retry_schedule"]],
    }


def pending(data_dir: Path) -> list[dict]:
    """Task runs running or runnable, and retries already due (for quiesce). A retry due later waits on the
    clock, which only the kit moves in a test: it does not keep the runtime from being quiescent."""
    path = Path(data_dir) / "tasks.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
    try:
        active = conn.execute(f"SELECT task_id, state FROM runs WHERE state IN {ACTIVE!r}").fetchall()
        due = conn.execute("SELECT task_id FROM retry_schedule WHERE state='scheduled' AND due_at<=?",
                           (now(),)).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return ([{"work_id": t, "status": "queued" if s == "queued" else "running"} for t, s in active]
            + [{"work_id": t, "status": "waiting"} for (t,) in due])
