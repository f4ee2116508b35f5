#!/usr/bin/env python3
"""A tiny in-memory adapter for the recoverykit adapter protocol (docs/protocol.md), on the adapter SDK.

It speaks the protocol correctly but keeps its "runtime" in a dictionary: nothing survives a restart,
there are no processes, and the only restart it can perform is a frontend reload. It exists so the kit's
client, schemas and error paths can be exercised before a real runtime is wired in, and as the shortest
complete example of an adapter on ``recoverykit.adapter`` (docs/adapter-guide.md): the SDK owns the
dispatch loop, checks every reply against the protocol's schemas, and answers ``processes``, ``reload``,
``shutdown`` and unsupported requests. Run it with

    recoverykit protocol ping --adapter "python examples/demo_adapter.py"

The demo "runtime" answers a request when the kit asks it to settle (``quiesce``) while started.
"""

from recoverykit.adapter import Adapter, Refused, observe, quiesce


class Demo(Adapter):
    name, version, protocol_version = "demo-adapter", "0.1.0", "1.0"
    restart_kinds = ["frontend_reload"]
    observes = ["work_items", "turns"]
    overlapping = False  # the dictionary is the runtime: one request at a time

    def prepare(self):
        self.log(f"data_dir={self.env.data_dir} (unused: this runtime is in memory)")
        self.started, self.work, self.turns, self.inputs_by_client_id = False, {}, [], {}

    def item(self, work_id):
        if work_id not in self.work:
            raise Refused("unknown_work_item", f"no work item {work_id!r}")
        return self.work[work_id]

    def control(self, item, desired, status, reason):
        item.update(desired_state=desired, status=status, reason_code=reason)
        item["control_version"] += 1
        return {"work_id": item["work_id"], "control_version": item["control_version"]}

    def op_submit(self, req):
        key = (req["session_id"], req["client_msg_id"])
        if key not in self.inputs_by_client_id:  # a resubmission of the same input adds nothing
            work_id, input_id = f"w{len(self.work) + 1}", f"i{len(self.inputs_by_client_id) + 1}"
            self.work[work_id] = observe.work_item(
                work_id=work_id, session_id=req["session_id"], reason_code="queued", recovery_policy="automatic",
                inputs=[observe.accepted_input(input_id, req["client_msg_id"], req["text"])])
            self.inputs_by_client_id[key] = (work_id, input_id)  # "durably saved" before the acknowledgement
        work_id, input_id = self.inputs_by_client_id[key]
        return {"work_id": work_id, "input_id": input_id}

    def op_pause(self, req):
        item = self.item(req["work_id"])
        if item["status"] in ("finished", "cancelled"):
            raise Refused("precondition_failed", f"{item['work_id']} is already {item['status']}")
        return self.control(item, "paused", "paused", "user_paused")

    def op_resume(self, req):
        item = self.item(req["work_id"])
        if item["desired_state"] != "paused":
            raise Refused("precondition_failed", f"{item['work_id']} is not paused")
        return self.control(item, "run", "queued", "queued")

    def op_end(self, req):
        item = self.item(req["work_id"])
        if item["status"] != "finished":
            return self.control(item, "cancelled", "cancelled", "user_cancelled")
        return {"work_id": item["work_id"], "control_version": item["control_version"]}

    def op_stop_all(self, req):
        stopped = [i["work_id"] for i in self.work.values() if i["desired_state"] == "run"]
        for work_id in stopped:
            self.control(self.work[work_id], "paused", "paused", "user_stopped_all")
        return {"stopped": stopped}

    def start_runtime(self):
        self.started = True

    def stop_runtime(self):
        self.started = False

    def pending(self):
        return [{"work_id": i["work_id"], "status": i["status"]} for i in self.work.values()
                if i["status"] in ("queued", "running")]

    def op_quiesce(self, req):
        for item in self.work.values():  # the demo "runtime" answers every runnable request at once
            if self.started and item["desired_state"] == "run" and item["status"] == "queued":
                turn_id = f"t{len(self.turns) + 1}"
                self.turns.append(observe.turn(turn_id=turn_id, work_id=item["work_id"], status="completed"))
                item.update(desired_state="done", status="finished", reason_code=None, last_progress=turn_id)
        return quiesce(0.0, self.pending)  # nothing moves until the next quiesce: waiting would change nothing

    def op_observe(self, req):
        return {"snapshot": observe.snapshot(self.observes, work_items=list(self.work.values()), turns=self.turns)}


if __name__ == "__main__":
    Demo.main()
