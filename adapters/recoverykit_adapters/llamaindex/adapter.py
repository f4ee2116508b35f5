"""The protocol side of the llama-index-workflows adapter, on the adapter SDK.

User controls are rows of the SDK's run-intent store (``RunIntentStore``, through ``IntentAdapter``; the framework
keeps no paused or ended run, no queue of requests), saved before the reply; the worker process (``worker``)
runs each request as a workflow and saves its ``Context`` at every step. What is declared is only what is real:

- failpoints: the four points the agent's steps reach (``agent``), and the SDK's durable-write points (every
  SQLite commit of the worker: the saved contexts and the intent store; armed only by ``chaos --durable-writes``);
- restarts: ``frontend_reload``, ``normal_exit`` (SIGTERM the worker, start a new one) and ``stop_all_exit``;
  kills are the kit's;
- observes: ``work_items`` (the intent table), ``turns`` (resumptions from a saved context) and
  ``usage_receipts`` (attributed by ``X-Request-Id`` before dispatch, settled under the response id). Not
  ``tool_calls``: a call is durable only inside the next saved context; whether it was dispatched never is.
"""

from __future__ import annotations

from recoverykit.adapter import DURABLE_WRITE_POINTS, IntentAdapter

from .agent import FAILPOINTS


class LlamaIndexAdapter(IntentAdapter):
    name, version, protocol_version = "llama-index-workflows", "1.2", "1.2"
    worker_module = "recoverykit_adapters.llamaindex.worker"
    failpoints = [*FAILPOINTS, *DURABLE_WRITE_POINTS]
    restart_kinds = ["frontend_reload", "normal_exit", "stop_all_exit"]
    observes = ["work_items", "turns", "usage_receipts"]
