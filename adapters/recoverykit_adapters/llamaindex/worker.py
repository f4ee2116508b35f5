"""The worker process: claims runnable work and runs it as a workflow, resuming from its saved ``Context``.

``python -m recoverykit_adapters.llamaindex.worker`` (started by the adapter with the kit's environment).
Recovery is the framework's: a work item with a saved context resumes with ``Context.from_dict(agent, saved)``
and ``agent.run(ctx=...)``, which reruns the step the snapshot holds in progress, with its retry state.

APPLICATION GLUE (what a user of the framework writes, not the framework): the framework keeps the context in
memory; saving it is the application's job (its docs: "the Context is serializable, so it can be saved to a
database"). Here each step's ``StepStarted`` stream event is the cue: ``contexts.sqlite`` gets ``ctx.to_dict()``
(``synchronous=FULL``) while the step waits at its gate (agent.py), before it does anything. The session's
conversation is kept there too, so a session's next request continues it. Then the worker rereads the run
intent (the SDK's ``RunIntentStore``): a Pause or End cancels the run at the gate (its snapshot stays for a
Resume), and so does another session's waiting work once a step is done (sessions take turns step by step).
One turn per (work item, control version, snapshot resumed from). A run the framework gives up on (its step
retry policy exhausted, or a refused response) fails with ``retry_exhausted``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
from pathlib import Path

from recoverykit.adapter import RetryPolicy, RunIntentStore, from_environment, signal_ready
from recoverykit.adapter.observe import continuation_key
from workflows import Context

from .agent import Agent, StepStarted, first_messages

POLL_S = 0.05
GIVE_UP = RetryPolicy(max_attempts=1)  # the framework retried the step already; a failed run is final


class Stopped(Exception):
    """A control (Pause, End) or another session's turn: the run stops at this step, its snapshot stays."""


class Snapshots:
    """The application's table of saved contexts, one per work item, and each session's conversation."""

    def __init__(self, data_dir: Path) -> None:
        self.db = sqlite3.connect(Path(data_dir) / "contexts.sqlite", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS contexts (work_id TEXT PRIMARY KEY, snapshot TEXT NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS sessions (session_id TEXT PRIMARY KEY, messages TEXT NOT NULL)")

    def load(self, work_id: str) -> dict | None:
        found = self.db.execute("SELECT snapshot FROM contexts WHERE work_id=?", (work_id,)).fetchone()
        return json.loads(found[0]) if found else None

    def save(self, work_id: str, snapshot: dict) -> None:
        self.db.execute("INSERT OR REPLACE INTO contexts VALUES (?,?)", (work_id, json.dumps(snapshot)))

    def history(self, session_id: str) -> list[dict]:
        found = self.db.execute("SELECT messages FROM sessions WHERE session_id=?", (session_id,)).fetchone()
        return json.loads(found[0]) if found else []

    def conclude(self, session_id: str, messages: list[dict]) -> None:
        self.db.execute("INSERT OR REPLACE INTO sessions VALUES (?,?)", (session_id, json.dumps(messages)))


class Worker:
    def __init__(self) -> None:
        self.env = from_environment()
        self.store = RunIntentStore(self.env.data_dir)
        self.snapshots = Snapshots(self.env.data_dir)
        self.agent = Agent(self.store, self.env.provider_base_url, self.env.probe_tools, self.env.model,
                           self.env.api_key)

    async def run(self) -> None:
        signal_ready()
        while True:
            item = self.store.claim()
            if item is None:
                await asyncio.sleep(POLL_S)
                continue
            with self.store.busy(item["work_id"]):  # quiesce waits for a step in flight, even a paused one's
                try:
                    await self.step(item)
                except Stopped:
                    continue
                except Exception as exc:  # the framework's retries are spent
                    self.store.retry_later(item["work_id"], item["cv"], GIVE_UP)
                    print(f"llamaindex-worker: {item['work_id']} failed: {exc!r}", file=sys.stderr, flush=True)

    async def step(self, item: dict) -> None:
        work_id, cv = item["work_id"], item["cv"]
        if not self.store.still(work_id, cv):  # paused or ended since the claim: send nothing (RI-03)
            raise Stopped()
        saved = self.snapshots.load(work_id)
        self.store.open_turn(work_id, cv, continuation_key(work_id, cv, saved and str(saved["journal_seq"])))
        self.store.running(work_id, cv)
        if saved is None:
            history = self.snapshots.history(item["session_id"])
            handler = self.agent.run(work_id=work_id, messages=first_messages(history, self.store.text(work_id)))
        else:
            handler = self.agent.run(ctx=Context.from_dict(self.agent, saved))
        steps = 0
        try:
            async for event in handler.stream_events():
                if not isinstance(event, StepStarted):
                    continue
                steps += 1
                snapshot = handler.ctx.to_dict()
                self.snapshots.save(work_id, snapshot)
                current = self.store.progressed(work_id, f"{event.name}@{snapshot['journal_seq']}")
                others = steps > 1 and [r for r in self.store.runnable() if r["session_id"] != item["session_id"]]
                if current["desired"] != "run" or current["cv"] != cv or others:
                    if others and current["desired"] == "run":
                        self.store.end_turns(work_id, "completed")  # the next turn continues from this snapshot
                    raise Stopped()
                self.agent.open(work_id)
            messages = await handler
        except BaseException:
            if not handler.done():
                await handler.cancel_run()
            self.agent.gates.pop(work_id, None)
            raise
        self.snapshots.conclude(item["session_id"], messages)
        self.store.finish(work_id, cv)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # every step's context is saved: exit at once
    asyncio.run(Worker().run())


if __name__ == "__main__":
    main()
