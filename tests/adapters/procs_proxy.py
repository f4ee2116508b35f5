"""A proxy around the reference runtime's adapter that lies about processes: ``procs_proxy.py MODE [ARG]``.

It starts ``python -m recoverykit.impl`` and relays every line both ways, except where MODE says:

- ``empty``: every ``processes`` reply lists no process (a kill then kills nothing);
- ``pid1``: every ``processes`` reply lists pid 1 as the control process;
- ``kit``: every ``processes`` reply also lists the kit's own pid (this proxy's parent) as a worker;
- ``foreign PID``: every ``processes`` reply also lists PID (a process outside the run) as a worker;
- ``hang_start``: ``start`` requests are swallowed, never answered (the runtime never comes up);
- ``unmarked_child``: on each ``start``, a double-forked ``sleep`` whose environment drops the run marker
  (a runtime child that escapes the marker); ARG, if given, is put on its command line as a tag;
- ``daemon TAG``: on each ``start``, a daemon proper: double-forked, its own session, every descriptor closed
  (stdio on /dev/null), an environment with nothing of the run; TAG is on its command line. Only the kit
  being its subreaper can find it.

Used by tests/test_adversarial_procs.py. Runs with the kit's interpreter (psutil is available).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import psutil

MODE = sys.argv[1]
ARG = sys.argv[2] if len(sys.argv) > 2 else None


def _info(pid: int, role: str) -> dict:
    return {"role": role, "pid": pid, "create_time": psutil.Process(pid).create_time()}


def rewrite(reply: dict) -> dict:
    if reply.get("type") != "processes_ok":
        return reply
    if MODE == "empty":
        return {**reply, "processes": []}
    if MODE == "pid1":
        return {**reply, "processes": [_info(1, "control")]}
    if MODE == "kit":
        return {**reply, "processes": [*reply["processes"], _info(os.getppid(), "worker")]}
    if MODE == "foreign":
        return {**reply, "processes": [*reply["processes"], _info(int(ARG), "worker")]}
    return reply


def unmarked_grandchild() -> None:
    """Fork twice; the grandchild execs ``sleep`` with an environment that lacks the run marker."""
    env = {k: v for k, v in os.environ.items() if k != "RECOVERYKIT_RUN_MARKER"}
    argv = ["sleep", "300"] if ARG is None else [sys.executable, "-c", "import time; time.sleep(300)", ARG]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.setsid()
            if os.fork() == 0:
                os.execvpe(argv[0], argv, env)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def daemon() -> None:
    """Fork twice; the grandchild leaves the session, closes every descriptor and execs with a scrubbed env."""
    argv = [sys.executable, "-c", "import time; time.sleep(300)", ARG or "rk-daemon"]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.setsid()
            if os.fork() == 0:
                os.closerange(0, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 1024)
                null = os.open(os.devnull, os.O_RDWR)  # fd 0
                os.dup2(null, 1)
                os.dup2(null, 2)
                os.execve(argv[0], argv, {"PATH": "/usr/bin:/bin"})
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def main() -> None:
    inner = subprocess.Popen([sys.executable, "-m", "recoverykit.impl"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    lock = threading.Lock()

    def out(line: bytes) -> None:
        with lock:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

    def pump_up() -> None:
        for line in inner.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                out(line)
                continue
            out((json.dumps(rewrite(msg)) + "\n").encode())

    threading.Thread(target=pump_up, daemon=True).start()
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            msg = {}
        if MODE == "hang_start" and msg.get("type") == "start":
            continue
        if MODE == "unmarked_child" and msg.get("type") == "start":
            unmarked_grandchild()
        if MODE == "daemon" and msg.get("type") == "start":
            daemon()
        inner.stdin.write(line)
        inner.stdin.flush()
    inner.stdin.close()
    inner.wait()


if __name__ == "__main__":
    main()
