#!/usr/bin/env python3
"""Stand-alone reproduction (no recoverykit): on SQLite, workflows enqueued in the same second leave a queue
partition in workflow-id order, not in the order they were enqueued.

recoverykit finding CTX-08 (scenario fair_queueing: a session's later request ran before its earlier ones).
DBOS's SQLite schema fills ``workflow_status.created_at`` from a column default, and on Python < 3.12 that
default is ``strftime('%s','now') * 1000`` (``_migration.get_sqlite_timestamp_expr``): whole seconds. The queue
runner takes a partition's head by ``(priority, created_at, workflow_uuid)``, so three requests of one
conversation enqueued within a second run in the order of their ids. (On Python >= 3.12 the default has
millisecond resolution; ties within one millisecond still order by id.)

    python repro_ctx08_queue_order.py      # exit 1 and "REPRODUCED" when they ran out of order
"""

import os
import sys
import tempfile
import time

from dbos import DBOS, SetEnqueueOptions, SetWorkflowID

WORK = os.environ.get("REPRO_DIR") or tempfile.mkdtemp(prefix="dbos-ctx08-")
RAN = os.path.join(WORK, "ran.log")


@DBOS.workflow()
def chat_request(text: str) -> None:
    with open(RAN, "a") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    DBOS(config={"name": "repro", "system_database_url": f"sqlite:///{WORK}/dbos.sqlite", "log_level": "ERROR"})
    DBOS.launch()
    queue = DBOS.register_queue("chat", partition_concurrency=1, polling_interval_sec=0.1)
    sent = ["request 1", "request 2", "request 3"]
    for text, workflow_id in zip(sent, ["w-c", "w-b", "w-a"], strict=True):  # ids that sort against the order
        with SetWorkflowID(workflow_id), SetEnqueueOptions(queue_partition_key="session-1"):
            queue.enqueue(chat_request, text)
    def ran_so_far() -> list:
        if not os.path.exists(RAN):
            return []
        with open(RAN) as f:
            return f.read().splitlines()

    deadline = time.time() + 30
    while time.time() < deadline and len(ran_so_far()) < 3:
        time.sleep(0.1)
    ran = ran_so_far()
    print("enqueued:", sent)
    print("ran:     ", ran)
    if ran != sent:
        print(f"REPRODUCED: one conversation's requests ran out of order (data in {WORK})")
        sys.stdout.flush()
        os._exit(1)
    print("not reproduced: they ran in order (enqueued across a second boundary?)")
    sys.stdout.flush()
    os._exit(0)
