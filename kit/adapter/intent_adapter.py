"""``IntentAdapter``: the protocol side of an adapter whose framework keeps no run intent, written once.

A framework with its own persistence and resume but no paused request, no Pause/End intent and no queue of
requests (LangGraph, llama-index-workflows; the ``recoverykit init`` scaffolds) needs the same protocol side every
time: user controls saved in the SDK's ``RunIntentStore`` before the reply, one supervised worker process that runs
the work with the framework's own recovery, ``pending`` from the store, ``observe`` built from the store. Three
adapters held the same forty lines; a subclass now declares what is real (failpoints, restart kinds, observes,
lacks) and names its worker module::

    class MyAdapter(IntentAdapter):
        name, version, protocol_version = "my-framework", "0.1.0", "1.2"
        worker_module = "my_adapter.worker"
        observes = ["work_items", "turns"]

Anything an adapter does differently (a worker per session, a framework queue) overrides the method it needs.
"""

from __future__ import annotations

import sys
from typing import Any

from .intent import RunIntentStore
from .processes import Supervisor, identity
from .wire import Adapter


class IntentAdapter(Adapter):
    """An ``Adapter`` whose user controls are rows of a ``RunIntentStore`` in the run's data dir and whose runtime is
    one worker process, ``python -m worker_module`` (started in ``worker_cwd`` when given)."""

    worker_module: str = ""
    worker_cwd: str | None = None
    worker_start_timeout_s: float = 60.0

    def prepare(self) -> None:
        if not self.worker_module:
            raise TypeError(f"{type(self).__name__} sets no worker_module: name the module its worker runs as "
                            "(python -m MODULE), e.g. worker_module = 'my_adapter.worker'")
        self.procs = Supervisor()
        self.store = RunIntentStore(self.env.data_dir)  # the tables exist before the worker starts

    # --- lifecycle: the kit starts, stops, restarts and kills the runtime -----------------------------------

    def start_runtime(self) -> None:
        if not self.procs.live("worker"):  # after a kill the kit sends start; a second start is a no-op
            self.procs.spawn([sys.executable, "-m", self.worker_module], self.env.environ(), cwd=self.worker_cwd,
                             timeout_s=self.worker_start_timeout_s)  # returns once the worker signals ready

    def stop_runtime(self) -> None:
        self.procs.stop(tools=True)  # the worker gets SIGTERM and its grace first; strays are swept after

    def runtime_processes(self) -> list[dict[str, Any]]:
        return self.procs.processes()  # the kit kills only what this lists

    def pending(self) -> list[dict[str, str]]:
        """Runnable work, and work a live worker is still in a step of (a paused item's model call in flight: its
        answer and its usage are still to be written)."""
        return self.store.pending(alive=identity)

    # --- user controls: durable in the run-intent store before the reply ------------------------------------

    def op_submit(self, req: dict) -> dict:
        return self.store.submit(req["session_id"], req["client_msg_id"], req["text"], self.env.host_id)

    def op_pause(self, req: dict) -> dict:
        return {"work_id": req["work_id"], "control_version": self.store.pause(req["work_id"])}

    def op_resume(self, req: dict) -> dict:
        return {"work_id": req["work_id"], "control_version": self.store.resume(req["work_id"])}

    def op_end(self, req: dict) -> dict:
        return {"work_id": req["work_id"], "control_version": self.store.end(req["work_id"])}

    def op_stop_all(self, req: dict) -> dict:
        return {"stopped": self.store.stop_all()}

    def op_observe(self, req: dict) -> dict:
        return {"snapshot": self.store.observe(self.observes)}
