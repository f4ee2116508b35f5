"""The worker process: claims runnable work and runs it, resuming each thread from its last checkpoint.

``python -m recoverykit_adapters.langgraph.worker`` (started by the adapter with the kit's environment).
For a work item whose input is not yet in its thread, the run starts with the input; otherwise it resumes
with ``graph.stream(None, config)``, as LangGraph documents for recovery. Between steps it rereads the run
intent: a Pause or End stops consuming the stream (the last completed step's checkpoint stays), and so does
another session's waiting work (sessions take turns step by step, FA-12). One turn
per (work item, control version, checkpoint resumed from): a retry from the same checkpoint is the same
turn, a resumption from a later one is a new turn continuing the last.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from langchain_core.messages import HumanMessage
from recoverykit.adapter import from_environment, signal_ready
from recoverykit.adapter.observe import continuation_key

from .agent import build
from .hooks import RecoveryHooks
from .intent import connect, now, one, rows, tx

POLL_S = 0.05


class Stopped(Exception):
    """The user paused or ended the work item while it ran."""


class Yielded(Exception):
    """Another session's work is waiting: take turns (the work continues from this step's checkpoint)."""


class Worker:
    def __init__(self) -> None:
        self.env = from_environment()
        self.db = connect(self.env.data_dir)
        self.graph, self.saver = build(self.env.data_dir, self.env.provider_base_url, self.env.probe_tools,
                                       self.env.model, self.env.api_key)

    def run(self) -> None:
        signal_ready()
        while True:
            item = self.next_item()
            if item is None:
                time.sleep(POLL_S)
                continue
            with tx(self.db):  # quiesce waits for a step in flight, even one the user has paused meanwhile
                self.db.execute("UPDATE runs SET busy_pid=? WHERE work_id=?", (os.getpid(), item["work_id"]))
            try:
                self.step(item)
            except (Stopped, Yielded):
                continue
            except Exception as exc:  # a provider error or a cut stream: the step is retried from its checkpoint
                print(f"langgraph-worker: {item['work_id']} failed: {exc!r}; retrying", file=sys.stderr, flush=True)
                time.sleep(0.3)
            finally:
                with tx(self.db):
                    self.db.execute("UPDATE runs SET busy_pid=NULL WHERE work_id=?", (item["work_id"],))

    def runnable(self) -> list[dict]:
        """Runnable work, the first open request of each session (a session is one thread: its requests run in
        order), least recently served first: sessions recovered together take turns, step by step."""
        return rows(self.db, "SELECT * FROM runs r WHERE desired='run' AND status IN ('queued','running') AND NOT "
                             "EXISTS (SELECT 1 FROM runs e WHERE e.session_id=r.session_id AND e.created<r.created "
                             "AND e.desired='run') ORDER BY COALESCE(served, 0), created")

    def next_item(self) -> dict | None:
        found = self.runnable()
        if found:
            with tx(self.db):
                self.db.execute("UPDATE runs SET served=? WHERE work_id=?", (now(), found[0]["work_id"]))
        return found[0] if found else None

    def step(self, item: dict) -> None:
        work_id, cv = item["work_id"], item["cv"]
        config = {"configurable": {"thread_id": item["session_id"]}, "callbacks": [RecoveryHooks(
            str(self.env.data_dir), work_id)]}
        state = self.graph.get_state(config)
        started = any(getattr(m, "id", None) == item["input_id"] for m in state.values.get("messages", []))
        resumed_from = state.config["configurable"].get("checkpoint_id") if started else None
        self.open_turn(item, resumed_from)
        with tx(self.db):
            self.db.execute("UPDATE runs SET status='running', reason=NULL WHERE work_id=? AND cv=? AND desired='run'",
                            (work_id, cv))
        first = None if started else {"messages": [HumanMessage(self.text(item), id=item["input_id"])]}
        for _ in self.graph.stream(first, config, stream_mode="updates"):
            checkpoint = self.saver.get_tuple({"configurable": {"thread_id": item["session_id"],
                                                                "checkpoint_ns": ""}})
            current = one(self.db, "SELECT desired, cv FROM runs WHERE work_id=?", (work_id,))
            with tx(self.db):
                self.db.execute("UPDATE runs SET progress=? WHERE work_id=?",
                                (checkpoint.config["configurable"]["checkpoint_id"], work_id))
            if current["desired"] != "run" or current["cv"] != cv:
                raise Stopped()
            if any(r["session_id"] != item["session_id"] for r in self.runnable()):
                with tx(self.db):  # another session waits: this turn ends here, the next one continues it
                    self.db.execute("UPDATE turns SET status='completed' WHERE work_id=? AND status='active'",
                                    (work_id,))
                raise Yielded()
        if self.graph.get_state(config).next:
            return  # stopped between steps by an error the next claim retries
        with tx(self.db):
            done = self.db.execute("UPDATE runs SET desired='done', status='finished', reason=NULL WHERE work_id=? "
                                   "AND cv=? AND desired='run'", (work_id, cv)).rowcount
            if done:
                self.db.execute("UPDATE turns SET status='completed' WHERE work_id=? AND status='active'", (work_id,))

    def text(self, item: dict) -> str:
        return one(self.db, "SELECT text FROM inputs WHERE input_id=?", (item["input_id"],))["text"]

    def open_turn(self, item: dict, resumed_from: str | None) -> None:
        key = continuation_key(item["work_id"], item["cv"], resumed_from)
        with tx(self.db):
            if one(self.db, "SELECT 1 FROM turns WHERE ckey=?", (key,)):
                return  # the same turn, tried again
            previous = rows(self.db, "SELECT turn_id FROM turns WHERE work_id=? ORDER BY created DESC LIMIT 1",
                            (item["work_id"],))
            self.db.execute("UPDATE turns SET status='interrupted' WHERE work_id=? AND status='active'",
                            (item["work_id"],))
            count = one(self.db, "SELECT COUNT(*) AS n FROM turns WHERE work_id=?", (item["work_id"],))["n"]
            self.db.execute("INSERT INTO turns VALUES (?,?,?,?,'active',?,?)",
                            (f"{item['work_id']}.t{count + 1}", item["work_id"], key,
                             previous[0]["turn_id"] if previous else None, item["cv"], now()))


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # every step is checkpointed: exit at once
    Worker().run()


if __name__ == "__main__":
    main()
