"""A runtime that crashes at start, two ways: ``start_crash_adapter.py refuse|dies|lives TAG``.

``refuse``: ``start`` is answered with an ``error`` (code ``crashed``) after a line on stderr, as an
adapter whose runtime died during its start would. ``dies``: ``start`` is answered ``start_ok`` but the
runtime process it started exits at once; ``processes`` still lists it. ``lives``: the honest case, a
runtime process that stays alive until shutdown (and carries ``TAG`` so a test can see it reaped).
Standard library only.
"""

import json
import os
import subprocess
import sys
import time

MODE, TAG = sys.argv[1], sys.argv[2]
INIT_OK = {"type": "init_ok", "name": "start-crash", "version": "0", "protocol_version": "1.0",
           "profiles": ["chat_core"], "failpoints": [], "restart_kinds": [], "observes": ["work_items"]}
child = None


def out(request, **body):
    sys.stdout.write(json.dumps({"msg_id": 1000 + request["msg_id"], "in_reply_to": request["msg_id"], **body}) + "\n")
    sys.stdout.flush()


def create_time(pid):
    with open(f"/proc/{pid}/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    return boot + start_ticks / os.sysconf("SC_CLK_TCK")


for line in sys.stdin:
    request = json.loads(line)
    kind = request["type"]
    if kind == "init":
        out(request, **INIT_OK)
    elif kind == "start" and MODE == "refuse":
        sys.stderr.write("runtime: cannot open its database: disk I/O error\n")
        sys.stderr.flush()
        out(request, type="error", code="crashed", definite=False, text="the runtime exited during start")
    elif kind == "start":
        code = "import sys; sys.exit(3)" if MODE == "dies" else "import time; time.sleep(600)"
        child = subprocess.Popen([sys.executable, "-c", code, TAG])
        out(request, type="start_ok")
    elif kind == "processes":
        procs = [{"role": "worker", "pid": child.pid, "create_time": create_time(child.pid)}] if child else []
        out(request, type="processes_ok", processes=procs)
    elif kind == "observe":
        out(request, type="observe_ok", snapshot={"work_items": []})
    elif kind == "shutdown":
        if child is not None and child.poll() is None:
            child.kill()
        out(request, type="shutdown_ok")
        break
    else:
        out(request, type="error", code="not_supported", definite=True, text=f"{kind} is not supported")
time.sleep(0)
