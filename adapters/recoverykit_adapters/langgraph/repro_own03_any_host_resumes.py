#!/usr/bin/env python3
"""Stand-alone reproduction (no recoverykit): any process, on any host, resumes a checkpointed thread.

recoverykit findings OWN-03, FA-02 (scenario host_change). A run interrupted on host A is resumed by a worker
that starts under another host identity: nothing in a LangGraph checkpoint says who owned the run, so the
resume is a silent cross-host takeover. ``SqliteSaver``'s tables have no owner or host column, and
``graph.stream(None, config)`` takes any thread.

    python repro_own03_any_host_resumes.py   # exit 1 and "REPRODUCED"
"""

import os
import sqlite3
import sys
import tempfile

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

HOSTS = []


def step(state: MessagesState) -> dict:
    HOSTS.append(os.environ["HOST_ID"])
    return {"messages": [AIMessage(f"step run on {os.environ['HOST_ID']}")]}


def main():
    db = os.path.join(os.environ.get("REPRO_DIR") or tempfile.mkdtemp(prefix="lg-own03-"), "checkpoints.sqlite")
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    g = StateGraph(MessagesState)
    g.add_node("first", step)
    g.add_node("second", step)
    g.add_edge(START, "first")
    g.add_edge("first", "second")
    graph = g.compile(checkpointer=saver, interrupt_before=["second"])  # host A stops half-way (a crash would too)
    config = {"configurable": {"thread_id": "t1"}}
    os.environ["HOST_ID"] = "host-a"
    graph.invoke({"messages": [HumanMessage("go")]}, config)
    os.environ["HOST_ID"] = "host-b"  # a worker on another machine
    graph.invoke(None, config)
    columns = {r[1] for t in ("checkpoints", "writes") for r in saver.conn.execute(f"PRAGMA table_info({t})")}
    print(f"steps ran on {HOSTS}; checkpoint columns: {sorted(columns)}")
    if HOSTS == ["host-a", "host-b"]:
        print("REPRODUCED: host-b resumed host-a's run; no owner is recorded that could refuse it")
        sys.exit(1)
    print("not reproduced")


if __name__ == "__main__":
    main()
