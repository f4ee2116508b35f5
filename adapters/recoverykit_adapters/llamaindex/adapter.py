"""The protocol side of the llama-index-workflows adapter, on the adapter SDK.

User controls are rows of the SDK's run-intent store (``RunIntentStore``: the framework keeps no paused or
ended run, no queue of requests), saved before the reply; the worker process (``worker``) runs each request as
a workflow and saves its ``Context`` at every step. What is declared is only what is real:

- failpoints: the four points the agent's steps reach (``agent``), and the SDK's durable-write points (every
  SQLite commit of the worker: the saved contexts and the intent store; armed only by ``chaos --durable-writes``);
- restarts: ``frontend_reload``, ``normal_exit`` (SIGTERM the worker, start a new one) and ``stop_all_exit``;
  kills are the kit's;
- observes: ``work_items`` (the intent table), ``turns`` (resumptions from a saved context) and
  ``usage_receipts`` (attributed by ``X-Request-Id`` before dispatch, settled under the response id). Not
  ``tool_calls``: a call is durable only inside the next saved context; whether it was dispatched never is.
"""

from __future__ import annotations

import sys

from recoverykit.adapter import DURABLE_WRITE_POINTS, Adapter, RunIntentStore, Supervisor, identity

from .agent import FAILPOINTS


class LlamaIndexAdapter(Adapter):
    name, version, protocol_version = "llama-index-workflows", "1.2", "1.2"
    failpoints = [*FAILPOINTS, *DURABLE_WRITE_POINTS]
    restart_kinds = ["frontend_reload", "normal_exit", "stop_all_exit"]
    observes = ["work_items", "turns", "usage_receipts"]

    def prepare(self) -> None:
        self.procs = Supervisor()
        self.store = RunIntentStore(self.env.data_dir)  # the tables exist before the worker starts

    def start_runtime(self) -> None:
        if not self.procs.live("worker"):
            self.procs.spawn([sys.executable, "-m", "recoverykit_adapters.llamaindex.worker"], self.env.environ(),
                             timeout_s=60)

    def stop_runtime(self) -> None:
        self.procs.stop(tools=True)

    def runtime_processes(self) -> list[dict]:
        return self.procs.processes()

    def pending(self) -> list[dict]:
        """Runnable work, and work a live worker is still in a step of (a paused item's LLM call in flight:
        its answer and its usage are still to be written)."""
        return self.store.pending(alive=identity)

    # --- user controls: durable before the reply ---------------------------------------------------------

    def op_submit(self, req: dict) -> dict:
        return self.store.submit(req["session_id"], req["client_msg_id"], req["text"], self.env.host_id)

    def op_pause(self, req: dict) -> dict:
        return {"work_id": req["work_id"], "control_version": self.store.pause(req["work_id"])}

    def op_resume(self, req: dict) -> dict:
        return {"work_id": req["work_id"], "control_version": self.store.resume(req["work_id"])}

    def op_end(self, req: dict) -> dict:
        return {"work_id": req["work_id"], "control_version": self.store.end(req["work_id"])}

    def op_stop_all(self, req: dict) -> dict:
        return {"stopped": self.store.stop_all()}

    def op_observe(self, req: dict) -> dict:
        return {"snapshot": self.store.observe(self.observes)}
