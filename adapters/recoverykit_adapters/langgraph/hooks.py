"""Failpoints from LangChain's callback hooks, and usage receipts from ``on_llm_end``.

A runtime that is not instrumented by its authors can still be stopped at the points its framework
exposes. LangChain calls these hooks in the worker, on the thread that runs the node, so a ``pause`` holds
exactly the step the hook belongs to. What each can and cannot mean:

- ``on_chat_model_start`` -> ``provider.request.before``: the LLM node is about to send a request; nothing
  has reached the provider. It fires once per ``invoke``, not per HTTP attempt: the client's own retries
  would not be separate points (the agent sets ``max_retries=0``; LangGraph retries the step instead).
- ``on_llm_end`` -> ``usage.persist.before``: the response is complete, in the worker's memory; its usage is
  not yet saved (this handler saves it right after). The reply is not in a checkpoint either: a kill here
  loses it, and LangGraph asks the provider again.
- ``on_tool_start`` -> ``tool.dispatch.before``: ``ToolNode`` is about to call the tool; the probe process has
  not started. Nothing of the call is durable: LangGraph keeps no record of a dispatched call.
- ``on_tool_end`` -> ``tool.result.commit.before``: the tool returned; its result is in memory only. It is
  committed with the whole ``ToolNode`` step (the step's checkpoint writes), after every call of the step.

``provider.request.after``, ``tool.dispatch.after`` and ``tool.result.commit.after`` have no hook (LangChain
calls nothing once the request is sent, once the child starts, or once the checkpoint is written), so they
are not declared.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from recoverykit.adapter import RunIntentStore, failpoint

FAILPOINTS = ["provider.request.before", "usage.persist.before", "tool.dispatch.before", "tool.result.commit.before"]


class RecoveryHooks(BaseCallbackHandler):
    """Handed to ``graph.stream(..., config={"callbacks": [...]})`` for one work item."""

    raise_error = True  # a failpoint's "crash" must not be swallowed by the callback manager

    def __init__(self, store: RunIntentStore, work_id: str) -> None:
        self.store, self.work_id = store, work_id

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        """Attribution fixed before dispatch: a receipt that claims nothing, under the callback's run id (no
        provider id exists yet); ``on_llm_end`` renames it to the response id the provider returns."""
        self.store.attribute(self.work_id, f"run-{kwargs.get('run_id')}")
        failpoint("provider.request.before", self.work_id)

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        failpoint("usage.persist.before", self.work_id)
        output = response.llm_output or {}
        usage = output.get("token_usage") or {}
        self.store.settle_receipt(f"run-{kwargs.get('run_id')}", output.get("id"), usage.get("prompt_tokens"),
                                  usage.get("completion_tokens"))

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        """An attempt whose response never arrived whole: its receipt stays unknown, under the run id."""

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        failpoint("tool.dispatch.before", self.work_id)

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        failpoint("tool.result.commit.before", self.work_id)
