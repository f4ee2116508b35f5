"""The worker process: claims runnable work and runs it, resuming each thread from its last checkpoint.

``python -m recoverykit_adapters.langgraph.worker`` (started by the adapter with the kit's environment).
For a work item whose input is not yet in its thread, the run starts with the input; otherwise it resumes
with ``graph.stream(None, config)``, as LangGraph documents for recovery. Between steps it rereads the run
intent: a Pause or End stops consuming the stream (the last completed step's checkpoint stays), and so does
another session's waiting work (sessions take turns step by step, FA-12). One turn
per (work item, control version, checkpoint resumed from): a retry from the same checkpoint is the same
turn, a resumption from a later one is a new turn continuing the last. The run intent is the SDK's
``RunIntentStore``; a failed step waits (``retry_scheduled``) and is retried from its checkpoint as ``POLICY``
allows, then fails with ``retry_exhausted``.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from langchain_core.messages import HumanMessage
from recoverykit.adapter import RetryPolicy, RunIntentStore, from_environment, signal_ready
from recoverykit.adapter.observe import continuation_key

from .agent import build
from .hooks import RecoveryHooks

POLL_S = 0.05
POLICY = RetryPolicy(initial_s=0.3, factor=2.0, cap_s=5.0, max_attempts=8)  # a provider error or a cut stream


class Stopped(Exception):
    """The user paused or ended the work item while it ran."""


class Yielded(Exception):
    """Another session's work is waiting: take turns (the work continues from this step's checkpoint)."""


class Worker:
    def __init__(self) -> None:
        self.env = from_environment()
        self.store = RunIntentStore(self.env.data_dir)
        self.graph, self.saver = build(self.env.data_dir, self.env.provider_base_url, self.env.probe_tools,
                                       self.env.model, self.env.api_key)

    def run(self) -> None:
        signal_ready()
        while True:
            item = self.store.claim()
            if item is None:
                time.sleep(POLL_S)
                continue
            with self.store.busy(item["work_id"]):  # quiesce waits for a step in flight, even a paused one's
                try:
                    self.step(item)
                except (Stopped, Yielded):
                    continue
                except Exception as exc:  # retried from its checkpoint, after the policy's wait
                    delay = self.store.retry_later(item["work_id"], item["cv"], POLICY)
                    then = "not retried" if delay is None else f"retrying in {delay:.1f}s"  # exhausted, or a control
                    print(f"langgraph-worker: {item['work_id']} failed: {exc!r}; {then}", file=sys.stderr, flush=True)

    def step(self, item: dict) -> None:
        work_id, cv = item["work_id"], item["cv"]
        if not self.store.still(work_id, cv):  # paused or ended since the claim: send nothing (RI-03)
            raise Stopped()
        config = {"configurable": {"thread_id": item["session_id"]}, "callbacks": [RecoveryHooks(self.store,
                                                                                                  work_id)]}
        state = self.graph.get_state(config)
        started = any(getattr(m, "id", None) == item["input_id"] for m in state.values.get("messages", []))
        resumed_from = state.config["configurable"].get("checkpoint_id") if started else None
        self.store.open_turn(work_id, cv, continuation_key(work_id, cv, resumed_from))
        self.store.running(work_id, cv)
        first = None if started else {"messages": [HumanMessage(self.store.text(work_id), id=item["input_id"])]}
        for _ in self.graph.stream(first, config, stream_mode="updates"):
            checkpoint = self.saver.get_tuple({"configurable": {"thread_id": item["session_id"],
                                                                "checkpoint_ns": ""}})
            current = self.store.progressed(work_id, checkpoint.config["configurable"]["checkpoint_id"])
            if current["desired"] != "run" or current["cv"] != cv:
                raise Stopped()
            if any(r["session_id"] != item["session_id"] for r in self.store.runnable()):
                with self.store.tx():  # another session waits: this turn ends here, the next one continues it
                    self.store.end_turns(work_id, "completed")
                raise Yielded()
        if self.graph.get_state(config).next:
            return  # stopped between steps by an error the next claim retries
        self.store.finish(work_id, cv)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # every step is checkpointed: exit at once
    Worker().run()


if __name__ == "__main__":
    main()
