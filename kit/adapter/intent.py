"""A durable run-intent store, for an adapter whose framework keeps no paused request and no user intent.

A framework such as LangGraph persists its own execution (checkpoints) but not what the user asked for: no
paused or ended run, no control version, no queue of requests, no record of which provider attempt a receipt
belongs to. An application that offers Pause and End keeps that beside the framework, and so does its adapter.
This is that table, written once (docs/adapter-guide.md, "What goes in the adapter"):

- a work item per request, with ``desired`` (``run``, ``paused``, ``cancelled``, ``done``), a ``status`` and a
  ``reason`` from the contract's vocabulary, and ``cv``, the control version, bumped by every control;
- the input as acknowledged (``client_msg_id`` makes ``submit`` idempotent);
- turns, one per continuation key (``observe.continuation_key``), each continuing the one before;
- usage receipts attributed *before* dispatch (``attribute``) and renamed to the provider's id after it
  (``settle_receipt``): a crash in between leaves a receipt that claims nothing, never an orphan attempt;
- retries with a durable due time (``retry_later``, ``RetryPolicy``), and the process inside a step (``busy``).

``intent.sqlite`` in the data dir, in WAL mode with ``synchronous=FULL``: a control is on disk when its method
returns, so the reply after it is a promise kept across a kill. Writes are ``BEGIN IMMEDIATE`` transactions;
``snapshot`` reads without waiting for a writer (``observe`` must answer while a worker is stopped inside a
commit). One connection per thread; the store can be shared by the adapter's request threads and opened by
several processes (the adapter and its workers) at once.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .retry import RETRY_EXHAUSTED, RETRY_SCHEDULED, RetryPolicy

FILE = "intent.sqlite"
ENDED = ("done", "cancelled")  # desired states no control leaves
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (work_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, input_id TEXT NOT NULL,
  desired TEXT NOT NULL, status TEXT NOT NULL, reason TEXT, cv INTEGER NOT NULL, host_id TEXT,
  progress TEXT, busy_pid INTEGER, served REAL, created REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
  retry_at REAL);
CREATE TABLE IF NOT EXISTS inputs (input_id TEXT PRIMARY KEY, client_msg_id TEXT NOT NULL UNIQUE,
  work_id TEXT NOT NULL, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS turns (turn_id TEXT PRIMARY KEY, work_id TEXT NOT NULL, ckey TEXT NOT NULL UNIQUE,
  predecessor TEXT, status TEXT NOT NULL, cv INTEGER NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS receipts (request_id TEXT PRIMARY KEY, work_id TEXT NOT NULL, prompt INTEGER,
  completion INTEGER, usage TEXT NOT NULL, created REAL NOT NULL);
"""


def _refused(code: str, text: str) -> Exception:
    from .wire import Refused  # loaded only when a control is refused: a worker never pays for jsonschema

    return Refused(code, text)


class RunIntentStore:
    """``RunIntentStore(env.data_dir)``; every method is one transaction, durable when it returns."""

    def __init__(self, data_dir: Path | str, name: str = FILE) -> None:
        self.path = Path(data_dir) / name
        self._local = threading.local()
        self.db.executescript(SCHEMA)

    # --- connections and transactions -------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        """This thread's connection (sqlite3 connections are never shared between threads here)."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, isolation_level=None, timeout=30, check_same_thread=False)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            self._local.db = db
        return db

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """One consistent read that waits for no writer (WAL)."""
        db = self.db
        db.execute("BEGIN DEFERRED")
        try:
            yield db
        finally:
            db.execute("ROLLBACK")

    def rows(self, sql: str, args: tuple = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self.db.execute(sql, args).fetchall()]

    def one(self, sql: str, args: tuple = ()) -> dict[str, Any] | None:
        found = self.db.execute(sql, args).fetchone()
        return dict(found) if found is not None else None

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    # --- user controls: each durable before the method returns ------------------------------------------

    def submit(self, session_id: str, client_msg_id: str, text: str, host_id: str | None = None,
               work_id: str | None = None, input_id: str | None = None) -> dict[str, str]:
        """A new queued work item, or the one this ``client_msg_id`` already made: ``{"work_id", "input_id"}``."""
        with self.tx() as db:
            known = self.one("SELECT work_id, input_id FROM inputs WHERE client_msg_id=?", (client_msg_id,))
            if known:
                return known
            work_id = work_id or f"w-{uuid.uuid4().hex[:10]}"
            input_id = input_id or f"in-{uuid.uuid4().hex[:10]}"
            db.execute("INSERT INTO runs (work_id, session_id, input_id, desired, status, reason, cv, host_id, "
                       "created) VALUES (?,?,?,'run','queued','queued',0,?,?)",
                       (work_id, session_id, input_id, host_id, time.time()))
            db.execute("INSERT INTO inputs VALUES (?,?,?,?)", (input_id, client_msg_id, work_id, text))
        return {"work_id": work_id, "input_id": input_id}

    def item(self, work_id: str) -> dict[str, Any]:
        """The work item's row; ``Refused("unknown_work_item")`` if there is none."""
        found = self.one("SELECT * FROM runs WHERE work_id=?", (work_id,))
        if found is None:
            raise _refused("unknown_work_item", f"no work item {work_id!r}")
        return found

    def control(self, work_id: str, desired: str, status: str, reason: str | None) -> int:
        """Set the intent and bump the control version (inside the caller's ``tx``); the new version. A control
        that stops the work ends its active turn: a Resume continues in a new one."""
        self.db.execute("UPDATE runs SET desired=?, status=?, reason=?, cv=cv+1, attempts=0, retry_at=NULL "
                        "WHERE work_id=?", (desired, status, reason, work_id))
        if desired != "run":
            self.end_turns(work_id, "interrupted")
        return self.item(work_id)["cv"]

    def pause(self, work_id: str, reason: str = "user_paused") -> int:
        """Pause (idempotent: an item already paused keeps its version); refused once the item has ended."""
        with self.tx():
            item = self.item(work_id)
            if item["desired"] in ENDED:
                raise _refused("precondition_failed", f"{work_id} is already {item['status']}")
            if item["desired"] == "paused":
                return item["cv"]
            return self.control(work_id, "paused", "paused", reason)

    def resume(self, work_id: str) -> int:
        with self.tx():
            item = self.item(work_id)
            if item["desired"] != "paused":
                raise _refused("precondition_failed", f"{work_id} is {item['desired']}, not paused")
            return self.control(work_id, "run", "queued", "queued")

    def end(self, work_id: str, reason: str = "user_cancelled") -> int:
        """End for good (idempotent: an ended item keeps its version)."""
        with self.tx():
            item = self.item(work_id)
            if item["desired"] in ENDED:
                return item["cv"]
            return self.control(work_id, "cancelled", "cancelled", reason)

    def stop_all(self, reason: str = "user_stopped_all") -> list[str]:
        """Pause every item that is meant to run; the ones paused."""
        with self.tx():
            stopped = [r["work_id"] for r in self.rows("SELECT work_id FROM runs WHERE desired='run'")]
            for work_id in stopped:
                self.control(work_id, "paused", "paused", reason)
        return stopped

    # --- the runtime's side: claiming, progress, turns, retries -------------------------------------------

    def runnable(self, now: float | None = None) -> list[dict[str, Any]]:
        """Work to run: the first open request of each session (a session's requests run in order), not waiting
        for a retry that is not yet due, the session served least recently first (sessions take turns: a session
        is ordered by the last time any of its items was served, so a backlog of never-served items does not go
        before a session whose one item was served before a restart)."""
        return self.rows(
            "SELECT * FROM runs r WHERE desired='run' AND (status IN ('queued','running') OR (status='waiting' AND "
            "reason=? AND retry_at<=?)) AND NOT EXISTS (SELECT 1 FROM runs e WHERE e.session_id=r.session_id AND "
            "e.created<r.created AND e.desired='run') ORDER BY COALESCE((SELECT MAX(s.served) FROM runs s WHERE "
            "s.session_id=r.session_id), 0), created",
            (RETRY_SCHEDULED, time.time() if now is None else now))

    def claim(self) -> dict[str, Any] | None:
        """The next runnable item, marked as served now and as busy in this process; None when there is none.

        Chosen and marked in one transaction: a Pause acknowledged after the choice finds the item busy, so
        ``pending`` (``quiesce``) waits for the step the caller is about to start instead of reporting quiescence
        just before it sends a request (RI-03). Run the item inside ``busy(work_id)``, which clears the mark, and
        check ``still(work_id, cv)`` before its first dispatch."""
        if not self.runnable():  # a worker polls: no write lock and no commit while there is nothing to run
            return None
        with self.tx() as db:
            found = self.runnable()  # again, under the write lock: a control is now before or after the claim
            if found:
                db.execute("UPDATE runs SET served=?, busy_pid=? WHERE work_id=?",
                           (time.time(), os.getpid(), found[0]["work_id"]))
        return found[0] if found else None

    def still(self, work_id: str, cv: int) -> bool:
        """Whether the item is still meant to run under control version ``cv`` (no control came since)."""
        return self.one("SELECT 1 AS y FROM runs WHERE work_id=? AND cv=? AND desired='run'", (work_id, cv)) is not None

    def pending(self, alive: Any = None) -> list[dict[str, str]]:
        """For ``quiesce``: work meant to run (a retry not yet due too), and work a live process is still inside a
        step of (``alive(pid)``: ``identity`` from ``recoverykit.adapter``)."""
        found = self.rows("SELECT work_id, status, desired, busy_pid FROM runs WHERE (desired='run' AND status IN "
                          "('queued','running','waiting')) OR busy_pid IS NOT NULL")
        return [{"work_id": r["work_id"], "status": r["status"] if r["desired"] == "run" else "running"}
                for r in found if r["desired"] == "run" or (alive is not None and alive(r["busy_pid"]))]

    @contextmanager
    def busy(self, work_id: str) -> Iterator[None]:
        """While this process runs a step of ``work_id``: ``pending`` counts it even if the user paused it."""
        with self.tx() as db:
            db.execute("UPDATE runs SET busy_pid=? WHERE work_id=?", (os.getpid(), work_id))
        try:
            yield
        finally:
            with self.tx() as db:
                db.execute("UPDATE runs SET busy_pid=NULL WHERE work_id=?", (work_id,))

    def running(self, work_id: str, cv: int) -> None:
        """The work under control version ``cv`` started; a control since then wins."""
        with self.tx() as db:
            db.execute("UPDATE runs SET status='running', reason=NULL, retry_at=NULL WHERE work_id=? AND cv=? AND "
                       "desired='run'", (work_id, cv))

    def progressed(self, work_id: str, commit_point: str | None) -> dict[str, Any]:
        """A step committed at ``commit_point``: record it, reset the failed attempts; the current intent
        (``desired``, ``cv``), for the caller to stop on a control."""
        with self.tx() as db:
            db.execute("UPDATE runs SET progress=?, attempts=0 WHERE work_id=?", (commit_point, work_id))
            return self.one("SELECT desired, cv FROM runs WHERE work_id=?", (work_id,)) or {}

    def finish(self, work_id: str, cv: int) -> bool:
        """Done, unless a control came since ``cv``; completes the active turn. Whether it finished."""
        with self.tx() as db:
            done = db.execute("UPDATE runs SET desired='done', status='finished', reason=NULL WHERE work_id=? AND "
                              "cv=? AND desired='run'", (work_id, cv)).rowcount
            if done:
                self.end_turns(work_id, "completed")
        return bool(done)

    def retry_later(self, work_id: str, cv: int, policy: RetryPolicy) -> float | None:
        """One more failed attempt: ``waiting``/``retry_scheduled`` until the policy's delay has passed (the due
        time is durable), or ``failed``/``retry_exhausted`` once the policy allows no more. The delay, or None."""
        with self.tx() as db:
            item = self.one("SELECT attempts FROM runs WHERE work_id=? AND cv=? AND desired='run'", (work_id, cv))
            if item is None:
                return None  # a control came meanwhile: it decides, not the failure
            failed = item["attempts"] + 1
            delay = policy.delay(failed)
            if delay is None:
                db.execute("UPDATE runs SET desired='done', status='failed', reason=?, attempts=?, retry_at=NULL "
                           "WHERE work_id=?", (RETRY_EXHAUSTED, failed, work_id))
                self.end_turns(work_id, "interrupted")
            else:
                db.execute("UPDATE runs SET status='waiting', reason=?, attempts=?, retry_at=? WHERE work_id=?",
                           (RETRY_SCHEDULED, failed, time.time() + delay, work_id))
        return delay

    def text(self, work_id: str) -> str:
        return self.one("SELECT text FROM inputs WHERE work_id=?", (work_id,))["text"]

    def open_turn(self, work_id: str, cv: int, key: str) -> str:
        """The turn under continuation ``key`` (``observe.continuation_key``): the same one if it exists (a
        retry from the same commit point), else a new active turn continuing the item's last."""
        with self.tx() as db:
            known = self.one("SELECT turn_id FROM turns WHERE ckey=?", (key,))
            if known:
                return known["turn_id"]
            previous = self.one("SELECT turn_id FROM turns WHERE work_id=? ORDER BY created DESC LIMIT 1",
                                (work_id,))
            self.end_turns(work_id, "interrupted")
            count = self.one("SELECT COUNT(*) AS n FROM turns WHERE work_id=?", (work_id,))["n"]
            turn_id = f"{work_id}.t{count + 1}"
            db.execute("INSERT INTO turns VALUES (?,?,?,?,'active',?,?)",
                       (turn_id, work_id, key, previous["turn_id"] if previous else None, cv, time.time()))
        return turn_id

    def end_turns(self, work_id: str, status: str) -> None:
        """End the item's active turn (inside the caller's ``tx``, or on its own)."""
        self.db.execute("UPDATE turns SET status=? WHERE work_id=? AND status='active'", (status, work_id))

    # --- attribution: the provider attempt a receipt belongs to --------------------------------------------

    def attribute(self, work_id: str, provisional_id: str) -> None:
        """Before dispatch: a receipt under an id of yours (the ``X-Request-Id`` you send, or a callback's run
        id) that claims nothing yet. A crash after the request left still attributes the attempt."""
        with self.tx() as db:
            db.execute("INSERT OR IGNORE INTO receipts VALUES (?,?,NULL,NULL,'unknown',?)",
                       (provisional_id, work_id, time.time()))

    def settle_receipt(self, provisional_id: str, request_id: str | None, prompt_tokens: int | None,
                       completion_tokens: int | None) -> None:
        """After the response: rename to the provider's id, with the usage if both counts were read."""
        known = prompt_tokens is not None and completion_tokens is not None
        with self.tx() as db:
            db.execute("UPDATE receipts SET request_id=?, prompt=?, completion=?, usage=? WHERE request_id=?",
                       (request_id or provisional_id, prompt_tokens if known else None,
                        completion_tokens if known else None, "known" if known else "unknown", provisional_id))

    # --- observe: the builders fed from the store ---------------------------------------------------------

    def observe(self, observes: list[str], **extra: list[dict[str, Any]] | None) -> dict[str, Any]:
        """An ``observe`` snapshot of the store, in one consistent read: ``work_items``, ``turns`` and
        ``usage_receipts`` as far as ``observes`` declares them; ``extra`` sections are passed through."""
        from . import observe

        with self.snapshot():
            runs = self.rows("SELECT * FROM runs ORDER BY created")
            inputs = {r["work_id"]: r for r in self.rows("SELECT * FROM inputs")}
            turns = self.rows("SELECT * FROM turns")
            receipts = self.rows("SELECT * FROM receipts")
        items = [observe.work_item(
            work_id=r["work_id"], session_id=r["session_id"], desired_state=r["desired"], control_version=r["cv"],
            status=r["status"], reason_code=r["reason"], host_id=r["host_id"], last_progress=r["progress"],
            inputs=[observe.accepted_input(r["input_id"], inputs[r["work_id"]]["client_msg_id"],
                                           inputs[r["work_id"]]["text"])]) for r in runs]
        sections: dict[str, Any] = {
            "work_items": items,
            "turns": [observe.turn(turn_id=t["turn_id"], work_id=t["work_id"], continuation_key=t["ckey"],
                                   predecessor=t["predecessor"], status=t["status"]) for t in turns],
            "usage_receipts": [observe.usage_receipt(
                receipt_id=u["request_id"], work_id=u["work_id"], request_id=u["request_id"],
                prompt_tokens=u["prompt"], completion_tokens=u["completion"], usage=u["usage"]) for u in receipts]}
        sections = {k: v for k, v in sections.items() if k in observes}
        return observe.snapshot(observes, **sections, **extra)
