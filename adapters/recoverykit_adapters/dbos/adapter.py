"""The protocol side of the DBOS adapter, on the adapter SDK.

User controls go through DBOS's own client (``DBOSClient`` on the SQLite system database), as an API server in
front of a DBOS application would do it; the worker process (``worker``) runs the workflows. The mapping, and
where it differs from the contract:

- ``submit``: ``DBOSClient.enqueue`` of a ``chat_request`` workflow on the ``chat`` queue, partitioned by
  session, with a workflow id derived from ``client_msg_id`` (DBOS returns the existing workflow for a known
  id: the submit is idempotent). The row is committed before the reply.
- ``pause``: ``cancel_workflow``. DBOS's cancel is the only way to stop a workflow, and it is resumable: it sets
  ``CANCELLED`` and clears the execution's ownership token (``owner_xid``), so the running execution's next step
  write is refused and its step in flight, if any, is lost (DBOS has no "pause after this step").
- ``resume``: ``resume_workflow`` back onto the ``chat`` queue: a new execution replays the recorded steps and
  re-runs the rest, including a step that was in flight at the Pause.
- ``end``: also ``cancel_workflow`` (DBOS has no terminal cancel: a cancelled workflow can always be resumed).
  That it is final is the adapter's, recorded in its run intent (``desired``), and ``resume`` refuses it.
- the control version, the desired state and the acknowledged input are kept in the SDK's run-intent store
  (``RunIntentStore``, written before the cancel or resume): DBOS has no control version and no terminal End.

Declared only what is real: failpoints at step boundaries (``hooks``); restarts ``frontend_reload``,
``normal_exit`` and ``stop_all_exit``; observes ``work_items`` (``workflow_status`` and ``workflow_input``) and
``usage_receipts`` (the ``call_model`` rows of ``operation_outputs``) and ``leases`` (protocol 1.4: a running
workflow's executor id as the owner's host, no pid, DBOS records none, and its per-execution ``owner_xid`` as an
opaque fencing token). Not ``turns``: DBOS keeps only the current execution of a workflow (``owner_xid``,
``recovery_attempts``), no history of executions. Not ``tool_calls``: a step leaves no row until it returns, so a
dispatched call is never durable.
"""

from __future__ import annotations

import base64
import hashlib
import pickle
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

from recoverykit.adapter import DURABLE_WRITE_POINTS, Adapter, Refused, RunIntentStore, Supervisor, identity, observe

from . import app
from .hooks import FAILPOINTS

STATUS = {"ENQUEUED": "queued", "DELAYED": "queued", "PENDING": "running", "SUCCESS": "finished",
          "ERROR": "failed", "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed"}
REASON = {"queued": "queued", "running": "running", "finished": "finished", "paused": "user_paused",
          "cancelled": "user_cancelled", "failed": "retry_exhausted"}  # ERROR: a step failed past its retries


def derived(prefix: str, client_msg_id: str) -> str:
    return f"{prefix}-{hashlib.sha256(client_msg_id.encode()).hexdigest()[:16]}"


def decode(text: str | None) -> Any:
    """DBOS's default serializer: base64 of a pickle (``_serialization.DefaultSerializer``)."""
    return pickle.loads(base64.b64decode(text)) if text else None


class DBOSAdapter(Adapter):
    name, version, protocol_version = "dbos-sqlite", "3.4", "1.4"
    failpoints = [*FAILPOINTS, *DURABLE_WRITE_POINTS]  # SQLite commits of the system database (chaos --durable-writes)
    restart_kinds = ["frontend_reload", "normal_exit", "stop_all_exit"]
    observes = ["work_items", "usage_receipts", "leases"]
    lacks = [  # what DBOS has no counterpart of: those clauses stay unknown as framework_lacks (README)
        {"features": ["turns"], "why": "DBOS keeps the current execution of a workflow only (one workflow_status "
         "row, dbos/_sys_db.py), no history of executions to show as turns"},
        {"features": ["tool_calls"], "why": "a DBOS step leaves no row until it returns (dbos/_sys_db.py "
         "_record_operation_result_txn), so a dispatched call is never durable"},
        {"features": ["recovery.claim.after", "recovery.repair.after", "recovery.decide.after"], "why": "DBOS's "
         "recovery is re-enqueue then replay inside DBOS.launch() (dbos/_recovery.py recover_pending_workflows), "
         "with no phase an application can hook"},
    ]

    def prepare(self) -> None:
        self.procs = Supervisor()
        self.store = RunIntentStore(self.env.data_dir)
        self.controls = threading.Lock()  # a control reads DBOS's status, writes the intent, then calls DBOS
        self._client = None

    @property
    def db_path(self) -> Path:
        return self.env.data_dir / "dbos.sqlite"

    @property
    def client(self):
        if self._client is None:
            from dbos import DBOSClient
            if not self.db_path.exists():
                raise Refused("temporarily_unavailable", "DBOS has not created its system database yet")
            self._client = DBOSClient(system_database_url=app.system_database_url(self.env.data_dir),
                                      application_name="recoverykit-dbos")
        return self._client

    def start_runtime(self) -> None:
        if not self.procs.live("worker"):
            self.procs.spawn([sys.executable, "-m", "recoverykit_adapters.dbos.worker"], self.env.environ(),
                             timeout_s=120)

    def stop_runtime(self) -> None:
        self.procs.stop(tools=True)

    def runtime_processes(self) -> list[dict]:
        return self.procs.processes()

    def read(self, sql: str, args: tuple = ()) -> list[dict]:
        if not self.db_path.exists():
            return []
        db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=30)
        db.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in db.execute(sql, args).fetchall()]
        finally:
            db.close()

    def busy_work(self) -> set[str]:
        """Work items a live worker is still inside a step of (``hooks.busy``), even one cancelled meanwhile."""
        out = set()
        for marker in (self.env.data_dir / "busy").glob("*") if (self.env.data_dir / "busy").exists() else []:
            work_id, pid, _ = marker.name.rsplit(".", 2)
            if identity(int(pid)) is not None:
                out.add(work_id)
        return out

    def pending(self) -> list[dict]:
        found = self.read("SELECT workflow_uuid, status FROM workflow_status WHERE name=? AND status IN "
                          "('ENQUEUED','DELAYED','PENDING')", (app.WORKFLOW,))
        out = {r["workflow_uuid"]: STATUS[r["status"]] for r in found}
        for work_id in self.busy_work():
            out.setdefault(work_id, "running")
        return [{"work_id": w, "status": s} for w, s in out.items()]

    # --- user controls --------------------------------------------------------------------------------

    def op_submit(self, req: dict) -> dict:
        client = self.client  # DBOS is up before the intent is written
        ids = self.store.submit(req["session_id"], req["client_msg_id"], req["text"], self.env.host_id,
                                derived("w", req["client_msg_id"]), derived("in", req["client_msg_id"]))
        handle = client.enqueue({"queue_name": app.QUEUE, "workflow_name": app.WORKFLOW, "workflow_id": ids["work_id"],
                                 "queue_partition_key": req["session_id"], "app_version": app.APP_VERSION},
                                req["session_id"], req["text"])  # idempotent: DBOS returns a known workflow id's
        return {"work_id": handle.get_workflow_id(), "input_id": ids["input_id"]}

    def _item(self, work_id: str) -> dict:
        found = self.read("SELECT status FROM workflow_status WHERE workflow_uuid=?", (work_id,))
        if not found:
            raise Refused("unknown_work_item", f"no work item {work_id!r}")
        return {**self.store.item(work_id), "status": found[0]["status"]}

    def _control(self, work_id: str, desired: str, reason: str) -> int:
        with self.store.tx():
            cv = self.store.control(work_id, desired, "queued" if desired == "run" else desired, reason)
        if desired == "run":
            self.client.resume_workflow(work_id, queue_name=app.QUEUE)
        else:
            self.client.cancel_workflow(work_id)
        return cv

    def _finished(self, work_id: str) -> bool:
        """Whether the workflow completed before the cancel landed: DBOS's cancel is then a silent no-op (it
        skips SUCCESS and ERROR rows and says nothing), so only a read after it tells."""
        return self._item(work_id)["status"] in ("SUCCESS", "ERROR")

    def op_pause(self, req: dict) -> dict:
        with self.controls:
            item = self._item(req["work_id"])
            if item["status"] in ("SUCCESS", "ERROR") or item["desired"] == "cancelled":
                raise Refused("precondition_failed", f"{req['work_id']} is already {item['status']}")
            cv = item["cv"] if item["desired"] == "paused" else self._control(req["work_id"], "paused",
                                                                                 "user_paused")
            if self._finished(req["work_id"]):
                raise Refused("precondition_failed", f"{req['work_id']} finished before the pause reached it")
        return {"work_id": req["work_id"], "control_version": cv}

    def op_resume(self, req: dict) -> dict:
        with self.controls:
            item = self._item(req["work_id"])
            if item["desired"] != "paused":
                raise Refused("precondition_failed", f"{req['work_id']} is {item['desired']}, not paused")
            cv = self._control(req["work_id"], "run", "queued")
        return {"work_id": req["work_id"], "control_version": cv}

    def op_end(self, req: dict) -> dict:
        with self.controls:
            item = self._item(req["work_id"])
            cv = item["cv"]
            if item["status"] not in ("SUCCESS", "ERROR") and item["desired"] != "cancelled":
                cv = self._control(req["work_id"], "cancelled", "user_cancelled")
        return {"work_id": req["work_id"], "control_version": cv}

    def op_stop_all(self, req: dict) -> dict:
        stopped = []
        with self.controls:
            intent = {r["work_id"]: r["desired"] for r in self.store.rows("SELECT work_id, desired FROM runs")}
            for row in self.read("SELECT workflow_uuid, status FROM workflow_status WHERE name=?", (app.WORKFLOW,)):
                if intent.get(row["workflow_uuid"]) == "run" and row["status"] in ("ENQUEUED", "DELAYED", "PENDING"):
                    self._control(row["workflow_uuid"], "paused", "user_stopped_all")
                    if not self._finished(row["workflow_uuid"]):
                        stopped.append(row["workflow_uuid"])
        return {"stopped": stopped}

    # --- observe ------------------------------------------------------------------------------------------

    def op_observe(self, req: dict) -> dict:
        if not self.db_path.exists():
            return {"snapshot": observe.snapshot(self.observes)}
        db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=30)
        db.row_factory = sqlite3.Row
        try:
            db.execute("BEGIN")  # one consistent read
            flows = [dict(r) for r in db.execute(
                "SELECT w.workflow_uuid, w.status, w.executor_id, w.owner_xid, i.inputs "
                "FROM workflow_status w LEFT JOIN workflow_input i ON i.workflow_uuid = w.workflow_uuid "
                "WHERE w.name=? ORDER BY w.created_at",
                (app.WORKFLOW,))]
            steps = [dict(r) for r in db.execute(
                "SELECT workflow_uuid, function_id, output FROM operation_outputs WHERE function_name LIKE ? "
                "AND output IS NOT NULL ORDER BY workflow_uuid, function_id", ("%call_model",))]
            db.execute("COMMIT")
        finally:
            db.close()
        with self.store.snapshot():  # read after DBOS: a control writes its intent before it calls DBOS
            intent = {r["work_id"]: r for r in self.store.rows(
                "SELECT r.*, i.client_msg_id FROM runs r JOIN inputs i ON i.input_id = r.input_id")}
        items = []
        for f in flows:
            mine = intent.get(f["workflow_uuid"], {})
            args = (decode(f["inputs"]) or {}).get("args") or ("", "")
            status = STATUS.get(f["status"])
            desired = mine.get("desired", "run")
            if status is None:  # CANCELLED: a Pause or an End, as the intent says
                status = "cancelled" if desired == "cancelled" else "paused"
            if status in ("finished", "failed"):
                desired = "done"
            items.append(observe.work_item(
                work_id=f["workflow_uuid"], session_id=mine.get("session_id") or args[0], desired_state=desired,
                control_version=mine.get("cv", 0), status=status,
                reason_code=mine.get("reason") if status in ("paused", "cancelled") else REASON[status],
                host_id=mine.get("host_id"),
                inputs=[observe.accepted_input(mine.get("input_id"), mine.get("client_msg_id"), args[1])]))
        receipts = []
        for s in steps:
            out = decode(s["output"]) or {}
            usage = out.get("usage")
            receipts.append(observe.usage_receipt(
                receipt_id=out.get("id"), work_id=s["workflow_uuid"], request_id=out.get("id"),
                prompt_tokens=usage["prompt_tokens"] if usage else None,
                completion_tokens=usage["completion_tokens"] if usage else None,
                usage="known" if usage else "unknown"))
        leases = [observe.lease(work_id=f["workflow_uuid"], owner={"host_id": f["executor_id"], "pid": None,
                                                                   "create_time": None},
                                generation=f["owner_xid"], expires_at=None)
                  for f in flows if f["status"] == "PENDING" and f["owner_xid"] and f["executor_id"]]
        return {"snapshot": observe.snapshot(self.observes, work_items=items, usage_receipts=receipts,
                                             leases=leases)}
