#!/usr/bin/env python3
"""Stand-alone reproduction (no recoverykit): a step in flight at ``cancel_workflow`` runs again on resume.

DBOS's cancel (what the DBOS adapter maps the contract's Pause to) sets the workflow CANCELLED and clears its
execution token (``owner_xid``). The step that is running then finishes, but its output is refused
(``_check_owner_txn``: the execution no longer owns the workflow), so no row is written to
``operation_outputs``. ``resume_workflow`` starts a new execution, which replays the recorded steps and runs
the unrecorded one again: the effect of a step in flight at a Pause happens twice (issue 16, item 7: "a
runtime that re-runs the interrupted unknown-effect step on resume").

    python repro_cancel_drops_inflight_step.py   # exit 1 and "REPRODUCED" when the effect happened twice
"""

import os
import sys
import tempfile
import time

from dbos import DBOS, SetWorkflowID

WORK = os.environ.get("REPRO_DIR") or tempfile.mkdtemp(prefix="dbos-cancel-")
EFFECTS = os.path.join(WORK, "effects.log")


@DBOS.step()
def send_payment(amount: int) -> str:
    with open(EFFECTS, "a") as f:
        f.write(f"paid {amount}\n")
    time.sleep(1.0)  # the user pauses while the payment call is in flight
    return "paid"


@DBOS.workflow()
def checkout(amount: int) -> str:
    return send_payment(amount)


if __name__ == "__main__":
    DBOS(config={"name": "repro", "system_database_url": f"sqlite:///{WORK}/dbos.sqlite", "log_level": "ERROR"})
    DBOS.launch()
    with SetWorkflowID("order-1"):
        handle = DBOS.start_workflow(checkout, 10)
    while not os.path.exists(EFFECTS):  # the step's effect happened; the step is still running
        time.sleep(0.02)
    DBOS.cancel_workflow("order-1")  # Pause
    time.sleep(2.0)  # the step finishes; its output is refused
    recorded = [s["function_name"] for s in DBOS.list_workflow_steps("order-1")]
    print("steps recorded before resume:", recorded)
    DBOS.resume_workflow("order-1")  # Resume
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
