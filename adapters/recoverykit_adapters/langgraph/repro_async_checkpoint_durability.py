#!/usr/bin/env python3
"""Stand-alone reproduction (no recoverykit): the next step runs while the last step's checkpoint is not durable.

recoverykit finding of the durable-write points (USG-04, USG-01 at ``durable.write.before`` of a checkpoint commit,
scenario chat_read_tool): LangGraph's default ``durability="async"`` persists a step's checkpoint "asynchronously
while the next step executes" (its docstring). Holding the checkpoint's SQLite commit does not hold the graph: the
next node (in the agent, the LLM call) runs, and a crash then loses the checkpoint the step's effects were meant to
follow. ``durability="sync"`` waits for the commit first.

    python repro_async_checkpoint_durability.py   # exit 1 and "REPRODUCED"
"""

import os
import sqlite3
import sys
import tempfile
import time

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

STATE = {"arm": False, "pending": False}


class SlowCommit(sqlite3.Connection):
    """A commit that takes a second once armed: a slow disk, or a crash-testing tool holding it."""

    def commit(self):
        if not (self.in_transaction and STATE["arm"]):
            return super().commit()
        STATE["arm"] = False
        time.sleep(1.0)
        super().commit()
        STATE["pending"] = False  # the first step's writes are durable now


def run(durability: str, folder: str) -> bool:
    """Whether the second step ran before the first step's writes were durable."""
    seen = []

    def first(state: MessagesState) -> dict:
        STATE["arm"] = STATE["pending"] = True  # the next commit (this step's writes) takes a second
        return {"messages": [AIMessage("first done")]}

    def second(state: MessagesState) -> dict:
        seen.append(STATE["pending"])  # in the agent: the provider request goes out now
        return {"messages": [AIMessage("second done")]}

    g = StateGraph(MessagesState)
    g.add_node("first", first)
    g.add_node("second", second)
    g.add_edge(START, "first")
    g.add_edge("first", "second")
    conn = sqlite3.connect(os.path.join(folder, f"{durability}.sqlite"), check_same_thread=False, factory=SlowCommit)
    graph = g.compile(checkpointer=SqliteSaver(conn))
    graph.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t1"}}, durability=durability)
    return seen == [True]


def main():
    folder = os.environ.get("REPRO_DIR") or tempfile.mkdtemp(prefix="lg-durability-")
    default, sync = run("async", folder), run("sync", folder)
    print(f"second step ran before the first step's writes were durable: durability=async (the default) {default}, "
          f"sync {sync}")
    if default and not sync:
        print("REPRODUCED: by default the next step runs before the last step's checkpoint is durable")
        sys.exit(1)
    print("not reproduced")


if __name__ == "__main__":
    main()
