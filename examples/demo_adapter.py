#!/usr/bin/env python3
"""A tiny in-memory adapter for the recoverykit adapter protocol (docs/protocol.md).

It speaks the protocol correctly but keeps its "runtime" in a dictionary: nothing survives a restart,
there are no processes, and the only restart it can perform is a frontend reload. It exists so the kit's
client, schemas and error paths can be exercised before a real runtime is wired in, and as the shortest
complete example of an adapter. Standard library only; run it with

    recoverykit protocol ping --adapter "python examples/demo_adapter.py"

The demo "runtime" answers a request when the kit asks it to settle (``quiesce``) while started.
"""

import json
import sys


class Node:
    """Reads requests from stdin, dispatches them by type, writes replies to stdout."""

    def __init__(self):
        self.next_msg_id = 0
        self.handlers = {}

    def on(self, type_):
        def register(handler):
            self.handlers[type_] = handler
            return handler
        return register

    def log(self, text):
        print(text, file=sys.stderr, flush=True)  # stdout is for messages only

    def send(self, body):
        self.next_msg_id += 1
        sys.stdout.write(json.dumps({**body, "msg_id": self.next_msg_id}) + "\n")
        sys.stdout.flush()

    def reply(self, request, **body):
        self.send({"type": request["type"] + "_ok", "in_reply_to": request["msg_id"], **body})

    def error(self, request, code, text, definite):
        self.send({"type": "error", "in_reply_to": request["msg_id"], "code": code, "text": text,
                   "definite": definite})

    def run(self):
        for line in sys.stdin:
            request = json.loads(line)
            handler = self.handlers.get(request["type"])
            try:
                if handler is None:
                    self.error(request, "not_supported", f"no handler for {request['type']!r}", True)
                elif handler(request) is False:
                    return  # shutdown
            except Refused as refusal:
                self.error(request, refusal.code, str(refusal), True)


class Refused(Exception):
    """A definite refusal: the request did nothing."""

    def __init__(self, code, text):
        super().__init__(text)
        self.code = code


node = Node()
state = {"started": False, "work": {}, "turns": [], "inputs_by_client_id": {}}


def work_item(work_id):
    if work_id not in state["work"]:
        raise Refused("unknown_work_item", f"no work item {work_id!r}")
    return state["work"][work_id]


def set_intent(item, desired, status, reason):
    item.update(desired_state=desired, status=status, reason_code=reason)
    item["control_version"] += 1


@node.on("init")
def init(request):
    node.log(f"demo adapter: data_dir={request['data_dir']} (unused: this runtime is in memory)")
    node.reply(request, name="demo-adapter", version="0.1.0", protocol_version="1.0", profiles=["chat_core"],
               failpoints=[], restart_kinds=["frontend_reload"], observes=["work_items", "turns"])


@node.on("submit")
def submit(request):
    key = (request["session_id"], request["client_msg_id"])
    if key in state["inputs_by_client_id"]:  # a resubmission of the same input adds nothing
        work_id, input_id = state["inputs_by_client_id"][key]
        return node.reply(request, work_id=work_id, input_id=input_id)
    work_id, input_id = f"w{len(state['work']) + 1}", f"i{len(state['inputs_by_client_id']) + 1}"
    state["work"][work_id] = {
        "work_id": work_id, "session_id": request["session_id"], "kind": "chat_request",
        "desired_state": "run", "control_version": 0, "status": "queued", "reason_code": "queued",
        "recovery_policy": "automatic", "host_id": None, "parent_id": None, "last_progress": None,
        "inputs": [{"input_id": input_id, "client_msg_id": request["client_msg_id"], "text": request["text"]}],
    }
    state["inputs_by_client_id"][key] = (work_id, input_id)  # "durably saved" before the acknowledgement
    node.reply(request, work_id=work_id, input_id=input_id)


@node.on("pause")
def pause(request):
    item = work_item(request["work_id"])
    if item["status"] in ("finished", "cancelled"):
        raise Refused("precondition_failed", f"{item['work_id']} is already {item['status']}")
    set_intent(item, "paused", "paused", "user_paused")
    node.reply(request, work_id=item["work_id"], control_version=item["control_version"])


@node.on("resume")
def resume(request):
    item = work_item(request["work_id"])
    if item["desired_state"] != "paused":
        raise Refused("precondition_failed", f"{item['work_id']} is not paused")
    set_intent(item, "run", "queued", "queued")
    node.reply(request, work_id=item["work_id"], control_version=item["control_version"])


@node.on("end")
def end(request):
    item = work_item(request["work_id"])
    if item["status"] != "finished":
        set_intent(item, "cancelled", "cancelled", "user_cancelled")
    node.reply(request, work_id=item["work_id"], control_version=item["control_version"])


@node.on("stop_all")
def stop_all(request):
    stopped = [i["work_id"] for i in state["work"].values() if i["desired_state"] == "run"]
    for work_id in stopped:
        set_intent(state["work"][work_id], "paused", "paused", "user_stopped_all")
    node.reply(request, stopped=stopped)


@node.on("reload")
def reload(request):
    node.reply(request)  # a frontend reload disconnects a client; it changes no intent


@node.on("start")
def start(request):
    state["started"] = True
    node.reply(request)


@node.on("stop")
def stop(request):
    state["started"] = False
    node.reply(request)


@node.on("restart")
def restart(request):
    if request["kind"] != "frontend_reload":
        raise Refused("not_supported", f"the demo cannot perform a {request['kind']} restart")
    node.reply(request)


@node.on("processes")
def processes(request):
    node.reply(request, processes=[])  # everything lives inside this adapter process


@node.on("quiesce")
def quiesce(request):
    for item in state["work"].values():  # the demo "runtime" answers every runnable request at once
        if state["started"] and item["desired_state"] == "run" and item["status"] == "queued":
            turn_id = f"t{len(state['turns']) + 1}"
            state["turns"].append({"turn_id": turn_id, "work_id": item["work_id"], "continuation_key": None,
                                   "predecessor": None, "status": "completed"})
            item.update(desired_state="done", status="finished", reason_code=None, last_progress=turn_id)
    pending = [{"work_id": i["work_id"], "status": i["status"]} for i in state["work"].values()
               if i["status"] in ("queued", "running")]
    node.reply(request, quiescent=not pending, pending=pending)


@node.on("observe")
def observe(request):
    node.reply(request, snapshot={"work_items": list(state["work"].values()), "turns": state["turns"]})


@node.on("shutdown")
def shutdown(request):
    node.reply(request)
    return False


if __name__ == "__main__":
    node.run()
