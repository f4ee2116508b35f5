#!/usr/bin/env python3
"""An adapter on the SDK whose worker stops gracefully: for the test that a graceful restart is graceful.

``python tests/adapters/sdk_graceful_adapter.py``. The worker (``--worker``) starts a tool child (a long sleep in
its own session, as a runtime's tool would be), says it is ready, and on SIGTERM writes ``term-<pid>`` in the
data dir and exits 0. ``stop``, ``restart normal_exit`` and ``restart stop_all_exit`` all go through
``Supervisor.stop(tools=True)``, as the shipped adapters do; each stopped worker must leave its marker (it saw
its SIGTERM) and exit 0, and its tool must be swept.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from recoverykit.adapter import Adapter, Supervisor, signal_ready


class GracefulAdapter(Adapter):
    name, version, protocol_version = "sdk-graceful", "1.0", "1.2"
    restart_kinds = ["frontend_reload", "normal_exit", "stop_all_exit"]
    observes = ["work_items"]

    def prepare(self) -> None:
        self.procs = Supervisor()

    def start_runtime(self) -> None:
        if not self.procs.live("worker"):
            self.procs.spawn([sys.executable, os.path.abspath(__file__), "--worker"], self.env.environ())

    def stop_runtime(self) -> None:
        self.procs.stop(tools=True, grace_s=10)

    def runtime_processes(self) -> list[dict]:
        return self.procs.processes()

    def op_stop_all(self, req: dict) -> dict:
        return {"stopped": []}

    def op_observe(self, req: dict) -> dict:
        return {"snapshot": {"work_items": []}}


def worker() -> int:
    data = Path(os.environ["RECOVERYKIT_DATA_DIR"])
    tool = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    (data / f"tool-{os.getpid()}").write_text(str(tool.pid))

    def drain(*_: object) -> None:
        time.sleep(0.2)  # a checkpoint to save: a kill here would lose it
        (data / f"term-{os.getpid()}").write_text("saved")
        os._exit(0)

    signal.signal(signal.SIGTERM, drain)
    signal_ready()
    while True:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(worker() if sys.argv[1:] == ["--worker"] else GracefulAdapter.main())
