#!/usr/bin/env python3
"""Stand-alone reproduction (no recoverykit): DBOS runs a step again after its process was killed mid-step.

recoverykit finding FA-15 (scenario chat_unknown_write). A workflow with one step that has a side effect (it
appends to a file, as a payment or an e-mail would) and then takes a while. The process is killed while the
step runs, after its effect. DBOS records a step only when it returns (``operation_outputs``), so on the next
``DBOS.launch()`` recovery finds the workflow PENDING with no row for the step and runs the step again: its
effect happens twice. DBOS documents steps as at-least-once; the contract asks an unknown write to be
investigated, never re-run.

    python repro_fa15_step_rerun.py        # exit 1 and "REPRODUCED" when the effect happened twice
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

from dbos import DBOS

WORK = os.environ.get("REPRO_DIR") or tempfile.mkdtemp(prefix="dbos-fa15-")
EFFECTS = os.path.join(WORK, "effects.log")


@DBOS.step()
def send_payment(amount: int) -> str:
    with open(EFFECTS, "a") as f:
        f.write(f"paid {amount} from pid {os.getpid()}\n")
    if os.environ.get("REPRO_PHASE") == "first":
        time.sleep(60)  # still running when the process is killed
    return "paid"


@DBOS.workflow()
def checkout(amount: int) -> str:
    return send_payment(amount)


def launch() -> None:
    DBOS(config={"name": "repro", "system_database_url": f"sqlite:///{WORK}/dbos.sqlite", "executor_id": "host-a",
                 "application_version": "1", "log_level": "ERROR"})
    DBOS.launch()  # recovers this executor's PENDING workflows


if __name__ == "__main__":
    if os.environ.get("REPRO_PHASE") == "first":
        launch()
        from dbos import SetWorkflowID
        with SetWorkflowID("order-1"):
            checkout(10)
        sys.exit(0)
    child = subprocess.Popen([sys.executable, __file__], env={**os.environ, "REPRO_PHASE": "first", "REPRO_DIR": WORK})
    while not os.path.exists(EFFECTS):  # the step's effect happened; the step is still running
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)  # a crash, an OOM kill, a deploy
    child.wait()
    launch()
    print("workflow result:", DBOS.retrieve_workflow("order-1").get_result())
    with open(EFFECTS) as f:
        effects = f.read().splitlines()
    print("\n".join(effects))
    if len(effects) > 1:
        print(f"REPRODUCED: the step's effect happened {len(effects)} times (data in {WORK})")
        sys.stdout.flush()
        os._exit(1)  # DBOS's background threads would keep the interpreter alive
    print("not reproduced: the effect happened once")
    sys.stdout.flush()
    os._exit(0)
