"""The DBOS application, as a DBOS user writes an agent: one workflow per chat request, a step per provider call
and per tool call.

``chat_request(session_id, text)`` is the workflow (its id is the work item's id); ``load_history`` (a step)
reads the session's earlier finished requests from DBOS itself, so a session is a conversation;
``call_model`` (a step) asks the kit's provider with the ``openai`` client; ``run_tool`` (a step) runs the
kit's probe as a child process. Steps retry on an error (``retries_allowed``), as DBOS recommends for calls to
external services; every step's output is written to DBOS's ``operation_outputs`` when it returns, and a
recovered workflow replays recorded steps and runs the others again. DBOS has no effect classes: a probe
tool's registered class is not used by anything (docs/adapter-guide.md, EFF-07).

The failpoints at the step boundaries are in ``hooks``; the worker process is ``worker``.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from dbos import DBOS

from .hooks import busy, step_began, step_ending, step_returned

QUEUE = "chat"
WORKFLOW = "chat_request"
APP_VERSION = "recoverykit-dbos-1"  # fixed, so a restarted worker recovers what an earlier one left PENDING
MAX_ROUNDS = 16
PROBE_ARGS = {"probe_token": {"type": "string"}, "sleep_s": {"type": "number"}, "hold": {"type": "boolean"},
              "exit_code": {"type": "integer"}, "detach": {"type": "boolean"}, "output": {"type": "string"}}


def system_database_url(data_dir: str | os.PathLike) -> str:
    return f"sqlite:///{os.fspath(data_dir)}/dbos.sqlite"


class AmbiguousToolCalls(Exception):
    """A model response whose tool calls share an id: the workflow ends in ERROR instead of guessing."""


class Settings:
    """What the worker was given by the kit (``recoverykit.adapter.from_environment``), set before launch."""

    data_dir = "."
    base_url = ""
    model = "recoverykit-scripted"
    api_key = "unused"
    tools: dict[str, list[str]] = {}


def tool_specs() -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": name, "description": f"probe tool {name}",
                                              "parameters": {"type": "object", "properties": PROBE_ARGS}}}
            for name in Settings.tools]


@DBOS.step()
def load_history(session_id: str, work_id: str) -> list[dict[str, Any]]:
    """The messages of the session's earlier requests that finished, oldest first (their workflows' outputs)."""
    done = DBOS.list_workflows(name=WORKFLOW, status="SUCCESS")  # DBOS on SQLite cannot filter by attributes
    messages: list[dict[str, Any]] = []
    for wf in done:
        if wf.workflow_id != work_id and isinstance(wf.output, dict) and wf.output.get("session_id") == session_id:
            messages += wf.output.get("messages", [])
    return messages


@DBOS.step(retries_allowed=True, max_attempts=12, interval_seconds=0.3, backoff_rate=1.5)
def call_model(work_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    from openai import OpenAI

    with busy(Settings.data_dir, work_id):
        step_began("provider.request.before", work_id)
        client = OpenAI(base_url=Settings.base_url, api_key=Settings.api_key, max_retries=0, timeout=600)
        response = client.chat.completions.create(model=Settings.model, messages=messages, tools=tool_specs())
        message = response.choices[0].message.model_dump(exclude_none=True)
        usage = response.usage
        reply = {"id": response.id, "message": message,
                 "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}
                 if usage is not None and usage.prompt_tokens is not None and usage.completion_tokens is not None
                 else None}
        step_ending("usage.persist.before", work_id)
    return reply


@DBOS.step()
def run_tool(work_id: str, name: str, arguments: str) -> str:
    with busy(Settings.data_dir, work_id):
        step_began("tool.dispatch.before", work_id)
        argv = Settings.tools.get(name)
        if argv is None:
            result = f"unknown tool {name!r}"
        else:
            try:
                given = {k: v for k, v in (json.loads(arguments or "{}") or {}).items() if v is not None}
            except (ValueError, AttributeError):
                given = {}
            done = subprocess.run([*argv, json.dumps(given)], capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL)
            result = done.stdout.strip() or f"exit status {done.returncode}"
        step_ending("tool.result.commit.before", work_id)
    return result


@DBOS.workflow(name=WORKFLOW)
def chat_request(session_id: str, text: str) -> dict[str, Any]:
    work_id = DBOS.workflow_id
    messages = [*load_history(session_id, work_id), {"role": "user", "content": text}]
    first = len(messages) - 1
    for _ in range(MAX_ROUNDS):
        reply = call_model(work_id, messages)
        step_returned("usage.persist.after", work_id)
        messages.append(reply["message"])
        calls = reply["message"].get("tool_calls") or []
        if not calls:
            break
        ids = [call["id"] for call in calls]
        if len(ids) != len(set(ids)):  # which result answers which call would be a guess: run none, say why
            raise AmbiguousToolCalls(f"the response has duplicate tool call ids {sorted(ids)}")
        for call in calls:
            result = run_tool(work_id, call["function"]["name"], call["function"].get("arguments") or "{}")
            step_returned("tool.result.commit.after", work_id)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return {"session_id": session_id, "messages": messages[first:]}
