#!/usr/bin/env python3
"""Stand-alone reproduction (no recoverykit): LangGraph re-runs a tool whose process was killed mid-call.

recoverykit finding FA-15 (scenario chat_unknown_write). A StateGraph with the prebuilt ``ToolNode`` on
``SqliteSaver``; the tool has a side effect (it appends to a file, as a payment or an e-mail would) and then
takes a while. The process is killed while the tool runs, after its effect. Resuming the thread as LangGraph
documents (``graph.stream(None, config)``) runs the tool again: ``ToolNode``'s writes are saved only when the
step ends, so a dispatched call leaves no durable trace and its effect happens twice.

    python repro_fa15_tool_rerun.py        # exit 1 and "REPRODUCED" when the effect happened twice
"""

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

WORK = os.environ.get("REPRO_DIR") or tempfile.mkdtemp(prefix="lg-fa15-")
EFFECTS = os.path.join(WORK, "effects.log")


@tool
def send_payment(amount: int) -> str:
    """Send a payment (an effect that must not happen twice)."""
    with open(EFFECTS, "a") as f:
        f.write(f"paid {amount} from pid {os.getpid()}\n")
    if os.environ.get("REPRO_PHASE") == "first":
        time.sleep(60)  # still running when the process is killed
    return "paid"


def agent(state: MessagesState) -> dict:  # a scripted model: call the tool once, then answer
    if any(isinstance(m, ToolMessage) for m in state["messages"]):
        return {"messages": [AIMessage("done")]}
    return {"messages": [AIMessage("", tool_calls=[{"name": "send_payment", "args": {"amount": 10}, "id": "c1"}])]}


def graph():
    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([send_payment]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    saver = SqliteSaver(sqlite3.connect(os.path.join(WORK, "checkpoints.sqlite"), check_same_thread=False))
    return g.compile(checkpointer=saver)


CONFIG = {"configurable": {"thread_id": "t1"}}

if __name__ == "__main__":
    if os.environ.get("REPRO_PHASE") == "first":
        for _ in graph().stream({"messages": [HumanMessage("pay 10")]}, CONFIG):
            pass
        sys.exit(0)
    child = subprocess.Popen([sys.executable, __file__], env={**os.environ, "REPRO_PHASE": "first", "REPRO_DIR": WORK})
    while not os.path.exists(EFFECTS):  # the tool's effect happened; the tool is still running
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)  # a crash, an OOM kill, a deploy
    child.wait()
    for _ in graph().stream(None, CONFIG):  # resume from the last checkpoint, as LangGraph documents
        pass
    with open(EFFECTS) as f:
        effects = f.read().splitlines()
    print("\n".join(effects))
    if len(effects) > 1:
        print(f"REPRODUCED: the tool's effect happened {len(effects)} times (data in {WORK})")
        sys.exit(1)
    print("not reproduced: the effect happened once")
