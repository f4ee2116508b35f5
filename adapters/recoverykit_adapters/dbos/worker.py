"""The worker process the kit can kill: a DBOS application that recovers and runs chat requests.

``python -m recoverykit_adapters.dbos.worker`` (started by the adapter with the kit's environment). It
configures DBOS on its SQLite system database in the data dir, with the host id as its executor id, and calls
``DBOS.launch()``: launch recovers this executor's PENDING workflows (``startup_recovery_thread`` re-enqueues
them, and the queue runner starts each through the queue's atomic ENQUEUED->PENDING dequeue), then the queue
runner picks up what the adapter enqueued. A workflow killed mid-step is re-run from its first step with no row
in ``operation_outputs``.
"""

from __future__ import annotations

import logging
import os
import signal
import time

from dbos import DBOS
from recoverykit.adapter import from_environment, signal_ready

from . import app

DRAIN_S = 8  # below the SDK's grace before SIGKILL (recoverykit.adapter.processes.STOP_GRACE_S)


def drain_and_exit(*_: object) -> None:
    """A graceful exit as DBOS offers it: stop dequeuing, let active workflows finish (their steps are recorded as
    they return) for up to ``DRAIN_S`` seconds, then exit; what is still running is recovered at the next launch."""
    DBOS.destroy(workflow_completion_timeout_sec=DRAIN_S)
    os._exit(0)


def main() -> None:
    signal.signal(signal.SIGTERM, drain_and_exit)
    env = from_environment()
    app.Settings.data_dir = str(env.data_dir)
    app.Settings.base_url = env.provider_base_url
    app.Settings.model = env.model or "recoverykit-scripted"
    app.Settings.api_key = env.api_key or "unused"
    app.Settings.tools = {spec["name"]: list(spec["argv"]) for spec in env.probe_tools}
    logging.getLogger("httpx").setLevel(logging.WARNING)
    DBOS(config={"name": "recoverykit-dbos", "system_database_url": app.system_database_url(env.data_dir),
                 "executor_id": env.host_id, "application_version": app.APP_VERSION, "log_level": "WARNING",
                 "notification_listener_polling_interval_sec": 0.1})
    DBOS.launch()
    # one session's requests run one at a time, in order (a session is a conversation)
    DBOS.register_queue(app.QUEUE, partition_concurrency=1, polling_interval_sec=0.1)
    signal_ready()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
