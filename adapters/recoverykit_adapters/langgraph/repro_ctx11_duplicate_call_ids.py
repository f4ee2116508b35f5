#!/usr/bin/env python3
"""Stand-alone reproduction (no recoverykit): ``ToolNode`` runs tool calls that share one call id.

recoverykit finding CTX-11 (scenario duplicate_call_ids). A model response with two tool calls under the
same id is ambiguous: which result answers which call is a guess. The prebuilt ``ToolNode`` runs both and
returns two ``ToolMessage`` objects with the same ``tool_call_id``; nothing reports an error.

    python repro_ctx11_duplicate_call_ids.py   # exit 1 and "REPRODUCED" when both calls ran
"""

import sys

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

RAN = []


@tool
def write_note(text: str) -> str:
    """Write a note (an effect)."""
    RAN.append(text)
    return f"wrote {text}"


def model(state: MessagesState) -> dict:  # a response whose two calls share the id "call_0"
    calls = [{"name": "write_note", "args": {"text": t}, "id": "call_0"} for t in ("first", "second")]
    return {"messages": [AIMessage("", tool_calls=calls)]}


def main():
    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", ToolNode([write_note]))
    g.add_edge(START, "model")
    g.add_edge("model", "tools")
    out = g.compile().invoke({"messages": [HumanMessage("write two notes")]})
    answers = [(m.tool_call_id, m.content) for m in out["messages"] if m.type == "tool"]
    print(f"tool calls run: {RAN}; tool messages: {answers}")
    if len(RAN) > 1:
        print("REPRODUCED: both calls with the duplicate id ran, and their results carry the same tool_call_id")
        sys.exit(1)
    print("not reproduced: the ambiguous response was refused")


if __name__ == "__main__":
    main()
