#!/usr/bin/env python3
"""Stand-alone reproduction (no recoverykit): llama-index-workflows re-runs a tool step killed mid-call.

recoverykit finding FA-15 (scenarios chat_unknown_write, chat_long_tool). A workflow whose tool step has a side
effect (it appends to a file, as a payment or an e-mail would) and then takes a while. The application saves the
context (``ctx.to_dict()``) at every event the run streams, as the framework documents; the tool step streams one
as it begins. The process is killed while the tool runs, after its effect. Resuming as documented
(``Context.from_dict`` then ``workflow.run(ctx=...)``) runs the step again: a context holds a running step only as
its input event ("in_progress"), restored as work to do, and no snapshot records that the call was dispatched,
so its effect happens twice. A snapshot taken only between steps holds the event that triggers the step, with
the same result.

    python repro_fa15_step_rerun.py        # exit 1 and "REPRODUCED" when the effect happened twice
"""

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from workflows import Context, Workflow, step
from workflows.events import Event, StartEvent, StopEvent

WORK = os.environ.get("REPRO_DIR") or tempfile.mkdtemp(prefix="li-fa15-")
EFFECTS = os.path.join(WORK, "effects.log")
SAVED = os.path.join(WORK, "context.json")


class Pay(Event):
    amount: int


class Started(Event):
    step: str


class Payments(Workflow):
    @step
    async def plan(self, ctx: Context, ev: StartEvent) -> Pay:  # a scripted model: pay once
        ctx.write_event_to_stream(Started(step="plan"))
        return Pay(amount=10)

    @step
    async def pay(self, ctx: Context, ev: Pay) -> StopEvent:
        ctx.write_event_to_stream(Started(step="pay"))
        await asyncio.sleep(0.2)  # the context is saved at the stream event, before the effect
        with open(EFFECTS, "a") as f:
            f.write(f"paid {ev.amount} from pid {os.getpid()}\n")
        if os.environ.get("REPRO_PHASE") == "first":
            await asyncio.sleep(60)  # still running when the process is killed
        return StopEvent(result="paid")


async def run(ctx: Context | None) -> None:
    workflow = Payments(timeout=None)
    handler = workflow.run(ctx=ctx) if ctx is not None else workflow.run()
    async for _ in handler.stream_events():
        with open(SAVED + ".tmp", "w") as f:  # the application's store: the documented ctx.to_dict()
            json.dump(handler.ctx.to_dict(), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(SAVED + ".tmp", SAVED)
    await handler


async def resume() -> None:
    with open(SAVED) as f:
        await run(Context.from_dict(Payments(timeout=None), json.load(f)))


if __name__ == "__main__":
    if os.environ.get("REPRO_PHASE") == "first":
        asyncio.run(run(None))
        sys.exit(0)
    child = subprocess.Popen([sys.executable, __file__], env={**os.environ, "REPRO_PHASE": "first", "REPRO_DIR": WORK})
    while not os.path.exists(EFFECTS):  # the tool's effect happened; the tool is still running
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)  # a crash, an OOM kill, a deploy
    child.wait()
    asyncio.run(resume())  # resume from the saved context, as the framework documents
    with open(EFFECTS) as f:
        effects = f.read().splitlines()
    print("\n".join(effects))
    if len(effects) > 1:
        print(f"REPRODUCED: the tool's effect happened {len(effects)} times (data in {WORK})")
        sys.exit(1)
    print("not reproduced: the effect happened once")
