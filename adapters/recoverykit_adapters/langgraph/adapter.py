"""The protocol side of the LangGraph adapter, on the adapter SDK.

User controls are rows of the SDK's run-intent store (``RunIntentStore``, through ``IntentAdapter``; LangGraph keeps
no paused or ended run), saved before the reply; the worker process (``worker``) does the work.
What is declared is only what is real:

- failpoints: the four LangChain callback hooks (``hooks``), and the SDK's durable-write points (every SQLite
  commit of the worker: ``SqliteSaver``'s checkpoints and the intent store; armed only by ``chaos --durable-writes``);
- restarts: ``frontend_reload``, ``normal_exit`` (SIGTERM the worker, start a new one) and ``stop_all_exit``;
  kills are the kit's;
- observes: ``work_items`` (the intent table, inputs as acknowledged), ``turns`` (resumptions from a
  checkpoint) and ``usage_receipts`` (written by ``on_llm_end`` under the provider's response id). Not
  ``tool_calls``: LangGraph persists a tool call only as the AI message that asked for it and, once the
  whole ``ToolNode`` step is done, its result; whether a call was dispatched is never durable. No leases,
  no goals, no approvals.
"""

from __future__ import annotations

from recoverykit.adapter import DURABLE_WRITE_POINTS, IntentAdapter

from .hooks import FAILPOINTS


class LangGraphAdapter(IntentAdapter):
    name, version, protocol_version = "langgraph-sqlitesaver", "1.2", "1.2"
    worker_module = "recoverykit_adapters.langgraph.worker"
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
