"""The agent, as a LangGraph user writes it: an LLM node and the prebuilt ``ToolNode`` on ``SqliteSaver``.

The kit's probe tools become LangChain tools whose function runs the probe's argv as a child process
with the call's arguments as one JSON argument (docs/environment.md). LangChain has no effect classes: the
class the kit registered is kept in the tool's metadata, where the framework never reads it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel


class ProbeArgs(BaseModel):
    """The probe's arguments (conformance/probe.py); all optional."""

    probe_token: str | None = None
    sleep_s: float | None = None
    hold: bool | None = None
    exit_code: int | None = None
    detach: bool | None = None
    output: str | None = None


def probe_tool(spec: dict[str, Any]) -> StructuredTool:
    argv = list(spec["argv"])

    def run(**arguments: Any) -> str:
        given = {k: v for k, v in arguments.items() if v is not None}
        done = subprocess.run([*argv, json.dumps(given)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        return done.stdout.strip() or f"exit status {done.returncode}"

    return StructuredTool.from_function(run, name=spec["name"], description=f"probe tool {spec['name']}",
                                        args_schema=ProbeArgs, metadata={"effect_class": spec.get("effect_class")})


def build(data_dir: Path, base_url: str, probe_tools: list[dict], model: str | None, api_key: str | None):
    """The compiled graph and its checkpointer (``checkpoints.sqlite`` in the data dir)."""
    tools = [probe_tool(spec) for spec in probe_tools]
    llm = ChatOpenAI(model=model or "recoverykit-scripted", base_url=base_url, api_key=api_key or "unused",
                     max_retries=0, timeout=600).bind_tools(tools)

    def agent(state: MessagesState) -> dict:
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    saver = SqliteSaver(sqlite3.connect(data_dir / "checkpoints.sqlite", check_same_thread=False))
    return graph.compile(checkpointer=saver), saver
