"""Adapters that break the protocol on purpose, one way per mode: ``garbage_adapter.py MODE [TAG]``.

Standard library only. ``TAG`` (any string) is put on the command line of every child this adapter
starts, so a test can prove no process outlived the kit.
"""

import json
import os
import signal
import subprocess
import sys
import time

MODE = sys.argv[1]
TAG = sys.argv[2] if len(sys.argv) > 2 else "untagged"
INIT_OK = {"type": "init_ok", "name": "garbage", "version": "0", "protocol_version": "1.0", "profiles": [],
           "failpoints": [], "restart_kinds": [], "observes": ["work_items"]}


def out(obj):
    sys.stdout.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
    sys.stdout.flush()


def reply_to(request, **body):
    return {"msg_id": 1000 + request["msg_id"], "in_reply_to": request["msg_id"], **body}


def spawn_child():
    # a lingering "runtime" process in a new session, outside the adapter's process group
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", TAG], start_new_session=True)


def main():
    for line in sys.stdin:
        request = json.loads(line)
        if request["type"] == "shutdown":
            out(reply_to(request, type="shutdown_ok"))
            return
        if MODE == "nonjson":
            out("hello, I am a log line on stdout")
        elif MODE == "silent":
            continue
        elif MODE == "silent_stubborn":  # ignores SIGTERM and leaves a child behind: needs SIGKILL
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            spawn_child()
            time.sleep(600)
        elif MODE == "wrong_msg_id":
            out({**reply_to(request, **INIT_OK), "in_reply_to": request["msg_id"] + 41})
        elif MODE == "wrong_type":
            out(reply_to(request, type="observe_ok", snapshot={}))
        elif MODE == "long_line":
            out(reply_to(request, **{**INIT_OK, "name": "x" * (2 << 20)}))
        elif MODE == "exit_mid_handshake":
            sys.stdout.write('{"type": "init_ok", "msg_id": 1,')
            sys.stdout.flush()
            os._exit(3)
        elif MODE == "schema":
            out(reply_to(request, **{**INIT_OK, "profiles": ["chat-core"], "observes": "work_items"}))
        elif MODE == "false_definite":
            out(reply_to(request, type="error", code="crashed", text="runtime died", definite=True))
        elif MODE == "old_major":
            out(reply_to(request, **{**INIT_OK, "protocol_version": "0.9"}))
        elif MODE == "invented_section" and request["type"] == "init":
            spawn_child()
            out(reply_to(request, **INIT_OK))
        elif MODE == "invented_section" and request["type"] == "observe":
            out(reply_to(request, type="observe_ok", snapshot={"work_items": [], "leases": []}))
        elif MODE == "refuses_observe" and request["type"] == "init":
            out(reply_to(request, **INIT_OK))
        elif MODE == "refuses_observe":
            out(reply_to(request, type="error", code="temporarily_unavailable", text="not started", definite=True))
        else:
            raise SystemExit(f"unknown mode {MODE!r}")


if __name__ == "__main__":
    main()
