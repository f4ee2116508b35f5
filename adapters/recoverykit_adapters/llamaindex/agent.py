"""The agent, as a llama-index-workflows user writes it: a model step and a tool step, looping by events.

The conversation travels in the events (``StartEvent.messages``, ``ToolCalls``, ``ToolResults``), never in
the context's store, so a ``Context`` snapshot taken while a step runs holds exactly that step's input: on
resume the framework runs the step again from it. Each step first writes a ``StepStarted`` to the event
stream and waits at a gate: the worker saves the context, rereads the run intent and then opens the gate, or
cancels the run there, before the step has done anything (application glue, see worker.py). The model step
retries with the framework's own ``retry_policy`` (exponential waits); the model client retries nothing itself.
A response whose tool calls share an id is refused (no retry): which result belongs to which call would be a
guess (the tool loop is the application's; the framework has none).

Failpoints (what each can and cannot mean):

- ``provider.request.before``: the model step is about to send its request; nothing reached the provider;
- ``usage.persist.before``: the response is whole, in memory; its usage is not yet saved (saved right after);
- ``tool.dispatch.before``: the tool step is about to start the probe process;
- ``tool.result.commit.before``: the tool returned; its result is in memory only, and becomes durable only
  with the snapshot taken at the next step's start.

The kit's probe tools become OpenAI function tools that run the probe's argv with the call's arguments as one
JSON argument (docs/environment.md). The framework has no effect classes.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from openai import AsyncOpenAI
from recoverykit.adapter import RunIntentStore, failpoint_async
from workflows import Context, Workflow, step
from workflows.events import Event, StartEvent, StopEvent
from workflows.retry_policy import retry_if_not_exception_type, retry_policy, stop_after_attempt, wait_exponential

FAILPOINTS = ["provider.request.before", "usage.persist.before", "tool.dispatch.before", "tool.result.commit.before"]
PROBE_ARGS = {"type": "object", "properties": {"probe_token": {"type": "string"}, "sleep_s": {"type": "number"},
                                               "hold": {"type": "boolean"}, "exit_code": {"type": "integer"},
                                               "detach": {"type": "boolean"}, "output": {"type": "string"}}}


class StepStarted(Event):
    """Written to the stream as a step begins: the worker's cue to save the context and open the gate."""

    name: str
    work_id: str


class AmbiguousCalls(Exception):
    """The model's response has tool calls that share an id."""


class ToolCalls(Event):
    work_id: str
    messages: list[dict]


class ToolResults(Event):
    work_id: str
    messages: list[dict]


class Agent(Workflow):
    """The model step and the tool step; every event carries its work item's ``work_id``."""

    def __init__(self, store: RunIntentStore, base_url: str, probe_tools: list[dict], model: str | None,
                 api_key: str | None) -> None:
        super().__init__(timeout=None)
        self.store, self.model = store, model or "recoverykit-scripted"
        self.client = AsyncOpenAI(base_url=base_url, api_key=api_key or "unused", max_retries=0, timeout=600)
        self.argv = {spec["name"]: list(spec["argv"]) for spec in probe_tools}
        self.gates: dict[str, asyncio.Future] = {}
        self.tools = [{"type": "function", "function": {"name": spec["name"], "parameters": PROBE_ARGS,
                                                        "description": f"probe tool {spec['name']}"}}
                      for spec in probe_tools]

    async def begin(self, ctx: Context, name: str, work_id: str) -> None:
        """Stream ``StepStarted`` and wait until the worker has saved the context and lets the step go on."""
        self.gates[work_id] = asyncio.get_running_loop().create_future()
        ctx.write_event_to_stream(StepStarted(name=name, work_id=work_id))
        await self.gates[work_id]

    def open(self, work_id: str) -> None:
        gate = self.gates.pop(work_id, None)
        if gate is not None and not gate.done():
            gate.set_result(None)

    @step(retry_policy=retry_policy(retry=retry_if_not_exception_type(AmbiguousCalls), stop=stop_after_attempt(8),
                                    wait=wait_exponential(multiplier=0.3, exp_base=2, max=5)))
    async def think(self, ctx: Context, ev: StartEvent | ToolResults) -> ToolCalls | StopEvent:
        work_id = ev.work_id
        await self.begin(ctx, "think", work_id)
        request_id = f"rq-{uuid.uuid4().hex[:12]}"  # attribution fixed before dispatch (X-Request-Id)
        await asyncio.to_thread(self.store.attribute, work_id, request_id)
        await failpoint_async("provider.request.before", work_id)
        answer = await self.client.chat.completions.create(model=self.model, messages=ev.messages,
                                                           tools=self.tools or None,
                                                           extra_headers={"X-Request-Id": request_id})
        await failpoint_async("usage.persist.before", work_id)
        usage = answer.usage
        await asyncio.to_thread(self.store.settle_receipt, request_id, answer.id, usage and usage.prompt_tokens,
                                usage and usage.completion_tokens)
        reply = answer.choices[0].message.model_dump(exclude_none=True)
        ids = [call["id"] for call in reply.get("tool_calls") or []]
        if len(ids) != len(set(ids)):
            raise AmbiguousCalls(f"the response has tool calls that share an id: {sorted(ids)}")
        messages = [*ev.messages, reply]
        return ToolCalls(work_id=work_id, messages=messages) if reply.get("tool_calls") else StopEvent(result=messages)

    @step
    async def act(self, ctx: Context, ev: ToolCalls) -> ToolResults:
        work_id = ev.work_id
        await self.begin(ctx, "act", work_id)
        messages = list(ev.messages)
        for call in ev.messages[-1]["tool_calls"]:
            await failpoint_async("tool.dispatch.before", work_id)
            output = await self.run_tool(call["function"]["name"], call["function"].get("arguments") or "{}")
            await failpoint_async("tool.result.commit.before", work_id)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
        return ToolResults(work_id=work_id, messages=messages)

    async def run_tool(self, name: str, arguments: str) -> str:
        if name not in self.argv:
            return f"no tool {name!r}"
        given = {k: v for k, v in json.loads(arguments or "{}").items() if v is not None}
        pipe = asyncio.subprocess.PIPE
        proc = await asyncio.create_subprocess_exec(*self.argv[name], json.dumps(given), stdout=pipe, stderr=pipe,
                                                    stdin=asyncio.subprocess.DEVNULL)
        out, _ = await proc.communicate()
        return out.decode().strip() or f"exit status {proc.returncode}"


def first_messages(history: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """A new request continues its session's conversation."""
    return [*history, {"role": "user", "content": text}]
