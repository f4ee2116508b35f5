"""The control process: accepts user controls, saves them durably, then acknowledges.

It listens on ``run/control.sock`` (one JSON line in, one out, per connection) for the adapter.
Submit is acknowledged only after the input is committed; a repeated client_msg_id returns the same
input and work item. Pause / resume / end / stop all change the durable run intent and bump the
control version; workers see it at their next step and the change wins over automatic continuation.
After every accepted control the workers are woken through their datagram sockets.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sqlite3
import sys
import threading
import uuid

from . import approvals, goals, jobs, pricing, resources, tasks, waits
from .config import Config
from .db import Database
from .failpoints import failpoint
from .schema import RUNTIME_MIGRATIONS, StorageUnavailable, connect, current_version
from .store import emit, now, one, process_alive, rows, set_status, tx
from .worker import wake_all

log = logging.getLogger("recoverykit.impl.control")


class ControlError(Exception):
    def __init__(self, code: str, text: str, definite: bool = True):
        super().__init__(text)
        self.code, self.text, self.definite = code, text, definite


def submit(db: Database, cfg: Config, session_id: str, text: str, client_msg_id: str,
           working_dir: str | None = None) -> dict:
    failpoint("input.accept.before", None)
    with tx(db):
        known = one(db, "SELECT input_id, work_id FROM inputs WHERE client_msg_id=?", (client_msg_id,))
        if known is not None:
            return {"work_id": known["work_id"], "input_id": known["input_id"]}
        t = now()
        work_id, input_id = f"w-{uuid.uuid4().hex[:12]}", f"in-{uuid.uuid4().hex[:12]}"
        db.conn.execute("INSERT OR IGNORE INTO sessions (session_id, created_at) VALUES (?,?)", (session_id, t))
        db.conn.execute(
            "INSERT INTO work_items (work_id, session_id, kind, desired_state, status, reason_code, host_id,"
            " recovery_policy, working_dir, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (work_id, session_id, "chat_request", "run", "queued", "queued", cfg.host_id,
             "automatic" if cfg.automatic_recovery else "disabled", working_dir, t, t))
        db.conn.execute("INSERT INTO inputs VALUES (?,?,?,?,?,?)", (input_id, client_msg_id, session_id, work_id,
                                                                   text, t))
        db.conn.execute("INSERT INTO messages (work_id, session_id, role, content, at) VALUES (?,?,'user',?,?)",
                        (work_id, session_id, text, t))
        resources.accept_tools(db, cfg, work_id)  # the tools as they are now: a later change waits for the user
        emit(db, work_id, "input_accepted", input_id=input_id, client_msg_id=client_msg_id, session_id=session_id)
    failpoint("input.accept.after", work_id)
    return {"work_id": work_id, "input_id": input_id}


def plant_paused_record(db: Database, cfg: Config, session_id: str, text: str, client_msg_id: str,
                        reason: str) -> dict:
    """Test instrumentation (protocol ``plant_paused_record``): a work item as an older version left it, paused
    for a reason this version does not know, with its accepted input. Written while the runtime is down."""
    out = submit(db, cfg, session_id, text, client_msg_id)
    with tx(db):
        db.conn.execute("UPDATE work_items SET desired_state='paused', status='paused', reason_code=?, reason_text=?,"
                        " control_version=control_version+1 WHERE work_id=?",
                        (reason, f"paused ({reason})", out["work_id"]))
    return out


_CONTROLS = {
    # op: (desired_state, status, reason_code, text, actions)
    "pause": ("paused", "paused", "user_paused", "paused by the user", ("Resume", "End")),
    "resume": ("run", "queued", "queued", "resumed by the user", ()),
    "end": ("cancelled", "cancelled", "user_cancelled", "ended by the user", ()),
}


def control(db: Database, op: str, work_id: str, cfg: Config | None = None) -> dict:
    desired, status, reason, text, actions = _CONTROLS[op]
    with tx(db):
        item = one(db, "SELECT * FROM work_items WHERE work_id=?", (work_id,))
        if item is None:
            raise ControlError("unknown_work_item", f"no work item {work_id!r}")
        if item["desired_state"] in ("done", "cancelled") and op != "end":
            raise ControlError("precondition_failed",
                               f"work item {work_id} is {item['desired_state']}; {op} cannot change that")
        if item["desired_state"] in ("done", "cancelled"):
            return {"work_id": work_id, "control_version": item["control_version"]}  # ending twice: no change
        if item["kind"] == "goal":
            goals.check_control(db, item, op)
        cv = item["control_version"] + 1
        extra = {"desired_state": desired, "control_version": cv}
        if op == "resume":
            extra.update(resumed_cv=cv, retry_count=0, retry_at=None)
            db.conn.execute("DELETE FROM pending_recovery WHERE work_id=?", (work_id,))
            if cfg is not None and item["reason_code"] == "resource_tool_version_changed":
                resources.accept_tools(db, cfg, work_id)  # the user's Retry of a changed tool accepts it as it is now
        db.conn.execute("INSERT INTO controls (work_id, op, control_version, at) VALUES (?,?,?,?)",
                        (work_id, op, cv, now()))
        set_status(db, work_id, status, reason, text, actions, **extra)
    if op == "end":
        cancel_tools(db, work_id)
    return {"work_id": work_id, "control_version": cv}


def cancel_tools(db: Database, work_id: str) -> None:
    """End cancels the item's running tool children explicitly (a running shell is never taken as stopped).

    Each shim leads its own process group, so the tool under it goes too; the worker then records the
    call's outcome as unknown, since the cancelled tool may have done part of its effect.
    """
    for call in rows(db, "SELECT call_id, pid, create_time FROM tool_calls WHERE work_id=? AND status='dispatched'",
                     (work_id,)):
        if process_alive(call["pid"], call["create_time"]):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(call["pid"], signal.SIGKILL)
            with tx(db):
                emit(db, work_id, "tool_cancelled", call_id=call["call_id"], pid=call["pid"])


def stop_all(db: Database) -> dict:
    """'Quit and stop all tasks': the user's stop intent, persisted for every item meant to run."""
    with tx(db):
        items = rows(db, "SELECT work_id, control_version FROM work_items WHERE desired_state='run'")
        for item in items:
            cv = item["control_version"] + 1
            db.conn.execute("INSERT INTO controls (work_id, op, control_version, at) VALUES (?,?,?,?)",
                            (item["work_id"], "stop_all", cv, now()))
            set_status(db, item["work_id"], "paused", "user_stopped_all", "stopped by 'quit and stop all tasks'",
                       ("Resume", "End"), desired_state="paused", control_version=cv)
    return {"stopped": [i["work_id"] for i in items]}


def handle(db: Database, cfg: Config, req: dict) -> dict:
    op = req.get("op")
    if op == "submit":
        return submit(db, cfg, req["session_id"], req["text"], req["client_msg_id"], req.get("working_dir"))
    if op in _CONTROLS:
        return control(db, op, req["work_id"], cfg)
    if op == "stop_all":
        return stop_all(db)
    if op == "goal_create":
        return goals.create(db, cfg, req["session_id"], req["objective"], req.get("budget"))
    if op == "goal_update":
        return goals.update(db, req["goal_id"], req["revision"], req["objective"], req.get("reason"))
    if op == "budget_set":
        return goals.budget_set(db, req["work_id"], req["limit"])
    if op == "job_start":
        try:
            return jobs.start(db, cfg, req["caller_work_id"], req["session_id"], req["text"], req["subtasks"],
                              req["concurrency"], req["client_job_id"])
        except jobs.JobError as exc:
            raise ControlError(exc.code, exc.text) from exc

    if op in ("approve", "deny"):
        try:
            return approvals.decide(db, req["approval_id"], "approved" if op == "approve" else "denied")
        except approvals.DecisionError as exc:
            raise ControlError(exc.code, exc.text) from exc
    if op == "notify":
        waits.save(db, req["notification_id"], req["handle"], req["version"], req["outcome"], "notify")
        return {}
    if op == "pricing_set":
        return pricing.set_prices(db, req.get("model"), req["input_usd_per_mtok"], req["output_usd_per_mtok"])
    if op == "ping":
        return {"pid": os.getpid()}
    if op in tasks.OPS:  # the Paperclip task layer keeps its own store (tasks.db)
        try:
            return tasks.handle(cfg.path, req)
        except tasks.TaskError as exc:
            raise ControlError(exc.code, exc.text) from exc
    raise ControlError("not_supported", f"the control process does not know {op!r}")


def serve(cfg: Config) -> None:
    path = cfg.run_dir / "control.sock"
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    signal.signal(signal.SIGTERM, lambda *_: (server.close(), os._exit(0)))
    (cfg.run_dir / "control.ready").write_text(str(os.getpid()))
    while True:
        try:
            conn, _ = server.accept()  # blocks: an idle control process uses no CPU
        except OSError:
            return
        threading.Thread(target=_serve_one, args=(cfg, conn), daemon=True).start()


def _open(cfg: Config) -> Database:
    """One connection per request (no cross-thread sharing), refused before anything is written if the
    storage is unreadable or at a schema this runtime does not know: a definite refusal, nothing saved."""
    try:
        db = connect(cfg.path / "runtime.db")
        version = current_version(db)
    except (StorageUnavailable, sqlite3.Error) as exc:
        raise ControlError("temporarily_unavailable", f"recovery_failed_storage_unavailable: {exc}") from exc
    if version != len(RUNTIME_MIGRATIONS):
        db.conn.close()
        raise ControlError("temporarily_unavailable", f"recovery_failed_migration: the database is at schema "
                           f"version {version}, this runtime needs {len(RUNTIME_MIGRATIONS)}; nothing was saved")
    return db


def _serve_one(cfg: Config, conn: socket.socket) -> None:
    with conn, conn.makefile("rwb") as stream:
        line = stream.readline()
        try:
            req = json.loads(line)
            db = _open(cfg)
            try:
                reply = {"ok": handle(db, cfg, req)}
            finally:
                db.conn.close()
            wake_all(cfg.run_dir)
        except ControlError as exc:
            reply = {"error": {"code": exc.code, "text": exc.text, "definite": exc.definite}}
        except goals.GoalError as exc:
            reply = {"error": {"code": exc.code, "text": exc.text, "definite": True}}
        except Exception as exc:  # reported to the kit as an indefinite internal error
            log.exception("control request failed")
            reply = {"error": {"code": "internal", "text": f"{type(exc).__name__}: {exc}", "definite": False}}
        stream.write(json.dumps(reply).encode() + b"\n")
        stream.flush()


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"control[{os.getpid()}] %(levelname)s %(message)s")
    cfg = Config.load(os.environ["RK_IMPL_DATA_DIR"])
    cfg.run_dir.mkdir(parents=True, exist_ok=True)
    from .schema import open_runtime_db  # migrate once here too, so submit works before a worker starts
    try:
        open_runtime_db(cfg.path).conn.close()
    except Exception as exc:
        log.error("storage unavailable: %s", exc)
    serve(cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())

