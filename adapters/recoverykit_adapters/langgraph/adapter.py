"""The protocol side of the LangGraph adapter, on the adapter SDK.

User controls are rows of the run-intent table (``intent``), saved before the reply; the worker process
(``worker``) does the work. What is declared is only what is real:

- failpoints: the four LangChain callback hooks (``hooks``), and the SDK's durable-write points (every SQLite
  commit of the worker: ``SqliteSaver``'s checkpoints and the intent table; armed only by ``chaos --durable-writes``);
- restarts: ``frontend_reload``, ``normal_exit`` (SIGTERM the worker, start a new one) and ``stop_all_exit``;
  kills are the kit's;
- observes: ``work_items`` (the intent table, inputs as acknowledged), ``turns`` (resumptions from a
  checkpoint) and ``usage_receipts`` (written by ``on_llm_end`` under the provider's response id). Not
  ``tool_calls``: LangGraph persists a tool call only as the AI message that asked for it and, once the
  whole ``ToolNode`` step is done, its result; whether a call was dispatched is never durable. No leases,
  no goals, no approvals.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
import uuid

from recoverykit.adapter import DURABLE_WRITE_POINTS, Adapter, Refused, Supervisor, identity, observe

from .hooks import FAILPOINTS
from .intent import connect, now, one, rows, snapshot, tx


class LangGraphAdapter(Adapter):
    name, version, protocol_version = "langgraph-sqlitesaver", "1.2", "1.2"
    failpoints = [*FAILPOINTS, *DURABLE_WRITE_POINTS]
    restart_kinds = ["frontend_reload", "normal_exit", "stop_all_exit"]
    observes = ["work_items", "turns", "usage_receipts"]
    lacks = [  # what LangGraph has no counterpart of: those clauses stay unknown as framework_lacks (README)
        {"features": ["resources"], "why": "LangGraph resumes a thread from its checkpoint (channel values and "
         "versions: langgraph/checkpoint/base Checkpoint) with whatever model, credentials and tools the node code "
         "is given; it keeps no resource identity to recheck after a restart"},
        {"features": ["automatic_recovery_setting"], "why": "LangGraph has no automatic recovery: a thread resumes "
         "only when the application invokes the graph again with its thread_id (LangGraph docs, durable "
         "execution); this adapter's worker does that as application glue, so no framework setting disables it"},
        {"features": ["legacy_paused_record"], "why": "LangGraph keeps no pause or run-intent record (a Checkpoint "
         "holds channel values only; the Pause/End intent table is this adapter's glue, intent.py), so no older "
         "LangGraph left a paused record"},
        {"features": ["leases"], "why": "nothing in a LangGraph checkpoint says who runs a thread (a Checkpoint holds "
         "channel values and versions only): there is no owner or generation to show"},
    ]

    def prepare(self) -> None:
        self.local = threading.local()  # requests overlap: one SQLite connection per thread, never shared
        self.procs = Supervisor()
        connect(self.env.data_dir).close()  # the tables exist before the worker starts

    @property
    def db(self) -> sqlite3.Connection:
        if getattr(self.local, "db", None) is None:
            self.local.db = connect(self.env.data_dir)
        return self.local.db

    def start_runtime(self) -> None:
        if not self.procs.live("worker"):
            self.procs.spawn([sys.executable, "-m", "recoverykit_adapters.langgraph.worker"], self.env.environ(),
                             timeout_s=60)

    def stop_runtime(self) -> None:
        self.procs.stop(tools=True)

    def runtime_processes(self) -> list[dict]:
        return self.procs.processes()

    def pending(self) -> list[dict]:
        """Runnable work, and work a live worker is still in a step of (a paused item's LLM call in flight:
        its answer and its usage are still to be written)."""
        found = rows(self.db, "SELECT work_id, status, desired, busy_pid FROM runs WHERE (desired='run' AND status "
                              "IN ('queued','running')) OR busy_pid IS NOT NULL")
        return [{"work_id": r["work_id"], "status": "running" if r["desired"] != "run" else r["status"]}
                for r in found if r["desired"] == "run" or identity(r["busy_pid"]) is not None]

    # --- user controls: durable before the reply ---------------------------------------------------------

    def op_submit(self, req: dict) -> dict:
        with tx(self.db):
            known = one(self.db, "SELECT work_id, input_id FROM inputs WHERE client_msg_id=?", (req["client_msg_id"],))
            if known:
                return known
            work_id, input_id = f"w-{uuid.uuid4().hex[:10]}", f"in-{uuid.uuid4().hex[:10]}"
            self.db.execute("INSERT INTO runs VALUES (?,?,?,'run','queued','queued',0,?,NULL,NULL,NULL,?)",
                            (work_id, req["session_id"], input_id, self.env.host_id, now()))
            self.db.execute("INSERT INTO inputs VALUES (?,?,?,?)", (input_id, req["client_msg_id"], work_id,
                                                                    req["text"]))
        return {"work_id": work_id, "input_id": input_id}

    def _item(self, work_id: str) -> dict:
        item = one(self.db, "SELECT * FROM runs WHERE work_id=?", (work_id,))
        if item is None:
            raise Refused("unknown_work_item", f"no work item {work_id!r}")
        return item

    def _control(self, work_id: str, desired: str, status: str, reason: str) -> int:
        self.db.execute("UPDATE runs SET desired=?, status=?, reason=?, cv=cv+1 WHERE work_id=?",
                        (desired, status, reason, work_id))
        if desired != "run":  # the running step's turn ends here; a Resume continues in a new turn
            self.db.execute("UPDATE turns SET status='interrupted' WHERE work_id=? AND status='active'", (work_id,))
        return self._item(work_id)["cv"]

    def op_pause(self, req: dict) -> dict:
        with tx(self.db):
            item = self._item(req["work_id"])
            if item["desired"] in ("done", "cancelled"):
                raise Refused("precondition_failed", f"{item['work_id']} is already {item['status']}")
            cv = item["cv"] if item["desired"] == "paused" else self._control(item["work_id"], "paused", "paused",
                                                                              "user_paused")
        return {"work_id": req["work_id"], "control_version": cv}

    def op_resume(self, req: dict) -> dict:
        with tx(self.db):
            item = self._item(req["work_id"])
            if item["desired"] != "paused":
                raise Refused("precondition_failed", f"{item['work_id']} is {item['desired']}, not paused")
            cv = self._control(item["work_id"], "run", "queued", "queued")
        return {"work_id": req["work_id"], "control_version": cv}

    def op_end(self, req: dict) -> dict:
        with tx(self.db):
            item = self._item(req["work_id"])
            cv = item["cv"]
            if item["desired"] not in ("done", "cancelled"):
                cv = self._control(item["work_id"], "cancelled", "cancelled", "user_cancelled")
        return {"work_id": req["work_id"], "control_version": cv}

    def op_stop_all(self, req: dict) -> dict:
        with tx(self.db):
            stopped = [r["work_id"] for r in rows(self.db, "SELECT work_id FROM runs WHERE desired='run'")]
            for work_id in stopped:
                self._control(work_id, "paused", "paused", "user_stopped_all")
        return {"stopped": stopped}

    # --- observe -------------------------------------------------------------------------------------------

    def op_observe(self, req: dict) -> dict:
        db = self.db
        with snapshot(db):  # one consistent read; never waits for the worker's write lock
            runs = rows(db, "SELECT * FROM runs ORDER BY created")
            inputs = {r["work_id"]: r for r in rows(db, "SELECT * FROM inputs")}
            turns = rows(db, "SELECT * FROM turns")
            receipts = rows(db, "SELECT * FROM receipts")
        items = [observe.work_item(
            work_id=r["work_id"], session_id=r["session_id"], desired_state=r["desired"], control_version=r["cv"],
            status=r["status"], reason_code=r["reason"], host_id=r["host_id"], last_progress=r["progress"],
            inputs=[observe.accepted_input(r["input_id"], inputs[r["work_id"]]["client_msg_id"],
                                           inputs[r["work_id"]]["text"])]) for r in runs]
        return {"snapshot": observe.snapshot(
            self.observes, work_items=items,
            turns=[observe.turn(turn_id=t["turn_id"], work_id=t["work_id"], continuation_key=t["ckey"],
                                predecessor=t["predecessor"], status=t["status"]) for t in turns],
            usage_receipts=[observe.usage_receipt(
                receipt_id=u["request_id"], work_id=u["work_id"], request_id=u["request_id"], prompt_tokens=u["prompt"],
                completion_tokens=u["completion"], usage=u["usage"]) for u in receipts])}
