#!/usr/bin/env python3
"""Stand-alone reproduction (no recoverykit): any process, on any host, resumes a saved workflow ``Context``.

recoverykit findings OWN-03, FA-02 (scenario host_change). A run interrupted on host A is resumed by a process
that starts under another host identity: nothing in ``Context.to_dict()`` says who ran it (its keys are the
state, the queues and in-progress work, counters and stamps), and ``Context.from_dict`` with
``workflow.run(ctx=...)`` takes it anywhere, so the resume is a silent cross-host takeover.

    python repro_own03_any_host_resumes.py   # exit 1 and "REPRODUCED"
"""

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile

from workflows import Context, Workflow, step
from workflows.events import Event, StartEvent, StopEvent

WORK = os.environ.get("REPRO_DIR") or tempfile.mkdtemp(prefix="li-own03-")
SAVED = os.path.join(WORK, "context.json")


class Next(Event):
    pass


class Job(Workflow):
    @step
    async def first(self, ev: StartEvent) -> Next:
        return Next()

    @step
    async def second(self, ev: Next) -> StopEvent:
        if os.environ.get("REPRO_HOST") == "host-a":
            await asyncio.sleep(60)  # interrupted here, on host A
        return StopEvent(result=f"finished by pid {os.getpid()} on {os.environ.get('REPRO_HOST')}")


async def on_host_a() -> None:
    handler = Job(timeout=None).run()
    await asyncio.sleep(0.5)  # the second step is running
    with open(SAVED, "w") as f:
        json.dump(handler.ctx.to_dict(), f)
    os._exit(0)  # the process dies


async def on_host_b() -> str:
    with open(SAVED) as f:
        return await Job(timeout=None).run(ctx=Context.from_dict(Job(timeout=None), json.load(f)))


if __name__ == "__main__":
    if os.environ.get("REPRO_HOST") == "host-a":
        asyncio.run(on_host_a())
    subprocess.run([sys.executable, __file__], env={**os.environ, "REPRO_HOST": "host-a", "REPRO_DIR": WORK},
                   check=True)
    with open(SAVED) as f:
        keys = sorted(json.load(f))
    print(f"saved context keys: {keys}")
    os.environ["REPRO_HOST"] = f"host-b ({socket.gethostname()})"
    result = asyncio.run(on_host_b())
    print(result)
    if not any(k in ("owner", "host", "host_id", "lease") for k in keys) and "host-b" in result:
        print("REPRODUCED: a context saved on host A was resumed on host B; nothing in it names an owner")
        sys.exit(1)
    print("not reproduced")
