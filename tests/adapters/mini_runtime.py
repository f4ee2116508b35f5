#!/usr/bin/env python3
"""A small but real runtime behind the adapter protocol, for the kit's own certify tests.

``python tests/adapters/mini_runtime.py [--bug resume_paused|rerun_unknown|sum_usage[,...]] [--no-request-id]
[--slow-start SECONDS] [--turn-per-input] [--notice-delay SECONDS]``

This process is the adapter and the control service: it saves user controls in ``state.db``
before acknowledging them. The work is done by a separate worker process (``mini_worker.py``) that
makes real streaming HTTP calls to the kit's scripted provider (with ``X-Request-Id``) and runs the
kit's probe tools as real child processes. Honest by default; each ``--bug`` breaks one clause
(see ``mini_worker``). The other switches are honest behaviours of real runtimes the kit must not
misjudge: a slow first model call, one turn per input with the session's history, a client that notices a cut
stream late. Standard library only (plus the kit's copyable failpoint client).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mini_store import connect, dumps, now, one, rows, snapshot, tx  # noqa: E402
from mini_worker import _alive, _create_time  # noqa: E402

RESTART_KINDS = ["frontend_reload", "normal_exit", "graceful_worker_restart", "stop_all_exit"]
FAILPOINTS = ["provider.request.before", "provider.request.after", "usage.persist.before", "usage.persist.after",
              "tool.dispatch.before", "tool.dispatch.after", "tool.result.commit.before", "tool.result.commit.after",
              "completion.commit.before_projection"]
OBSERVES = ["work_items", "turns", "tool_calls", "usage_receipts", "leases"]


class Refused(Exception):
    def __init__(self, code: str, text: str, definite: bool = True) -> None:
        super().__init__(text)
        self.code, self.definite = code, definite


class Mini:
    def __init__(self, bug: str, profiles: list[str] | None = None, no_request_id: bool = False,
                 honest: dict | None = None) -> None:
        self.bug = bug
        self.no_request_id = no_request_id
        self.honest = honest or {}  # slow_start, turn_per_input, notice_delay (mini_worker)
        self.profiles = profiles or ["chat_core"]
        self.data_dir = ""
        self.db = None
        self.worker: subprocess.Popen | None = None
        self.worker_ct: float | None = None
        self.env = {"failpoints": "", "clock_offset_s": 0.0, "host_id": "host-a"}
        self.marker = ""
        self.socket = ""

    def log(self, text: str) -> None:
        print(f"mini[{os.getpid()}] {text}", file=sys.stderr, flush=True)

    # --- lifecycle -----------------------------------------------------------------------------------

    def op_init(self, req: dict) -> dict:
        self.data_dir, self.marker, self.socket = req["data_dir"], req["run_marker"], req["failpoint_socket"]
        self.db = connect(self.data_dir)
        config = {"provider_base_url": req["provider_base_url"], "tools": req["probe_tools"], "bug": self.bug,
                  "no_request_id": self.no_request_id, **self.honest}
        with open(os.path.join(self.data_dir, "config.json"), "w") as f:
            json.dump(config, f)
        return {"name": "mini-runtime" + (f"-{self.bug}" if self.bug else ""), "version": "0.1.0",
                "protocol_version": "1.0", "profiles": self.profiles, "failpoints": FAILPOINTS,
                "restart_kinds": RESTART_KINDS, "observes": OBSERVES}

    def _configure(self, req: dict) -> None:
        for key in ("failpoints", "clock_offset_s", "host_id"):
            if req.get(key) is not None:
                self.env[key] = req[key]

    def _worker_alive(self) -> bool:
        # Not Popen.poll(): while the reaper thread sits in wait(), poll() answers None ("still running")
        # for a worker the kit has already SIGKILLed, and a restart would then start no new worker.
        worker = self.worker
        return worker is not None and worker.returncode is None and _alive(worker.pid, self.worker_ct)

    def start_worker(self) -> None:
        if self._worker_alive():
            return
        env = {**os.environ, "RECOVERYKIT_RUN_MARKER": self.marker, "RECOVERYKIT_FAILPOINTS": self.env["failpoints"],
               "RECOVERYKIT_FAILPOINT_SOCKET": self.socket, "MINI_HOST_ID": self.env["host_id"],
               "MINI_CLOCK_OFFSET_S": repr(float(self.env["clock_offset_s"]))}
        self.worker = subprocess.Popen([sys.executable, os.path.join(HERE, "mini_worker.py"), self.data_dir],
                                       stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), stderr=sys.stderr.fileno(),
                                       env=env)
        self.worker_ct = _create_time(self.worker.pid)
        threading.Thread(target=self.worker.wait, daemon=True).start()  # reap it whoever kills it
        ready = os.path.join(self.data_dir, f"ready-{self.worker.pid}")
        deadline = time.monotonic() + 20
        while not os.path.exists(ready):
            if self.worker.poll() is not None or time.monotonic() > deadline:
                raise Refused("internal", f"the worker did not start (status {self.worker.poll()})", False)
            time.sleep(0.01)

    def stop_worker(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()

    def op_start(self, req: dict) -> None:
        self._configure(req)
        self.start_worker()

    def op_stop(self, req: dict) -> None:
        self.stop_worker()

    def op_restart(self, req: dict) -> None:
        kind = req["kind"]
        if kind not in RESTART_KINDS:
            raise Refused("not_supported", f"restart kind {kind!r}: kills are the kit's to do")
        if kind == "frontend_reload":
            return
        if kind == "stop_all_exit":
            self.op_stop_all(req)
        self.stop_worker()
        self._configure(req)
        self.start_worker()

    def op_shutdown(self, req: dict) -> None:
        self.stop_worker()
        for pid, ct in self._tool_pids():
            if _alive(pid, ct):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def _tool_pids(self) -> list[tuple[int, float]]:
        if self.db is None:
            return []
        return [(c["pid"], c["create_time"]) for c in rows(self.db, "SELECT pid, create_time FROM tool_calls "
                                                                    "WHERE status='dispatched' AND pid IS NOT NULL")]

    def op_processes(self, req: dict) -> dict:
        out = []
        if self._worker_alive():
            from mini_worker import _create_time
            out.append({"role": "worker", "pid": self.worker.pid, "create_time": _create_time(self.worker.pid)})
        out += [{"role": "tool", "pid": pid, "create_time": ct} for pid, ct in self._tool_pids() if _alive(pid, ct)]
        return {"processes": out}

    # --- user controls (durable before the reply) ----------------------------------------------------

    def op_submit(self, req: dict) -> dict:
        with tx(self.db):
            known = one(self.db, "SELECT * FROM inputs WHERE client_msg_id=?", (req["client_msg_id"],))
            if known:
                return {"work_id": known["work_id"], "input_id": known["input_id"]}
            work_id, input_id = f"w-{uuid.uuid4().hex[:8]}", f"in-{uuid.uuid4().hex[:8]}"
            messages = [{"role": "user", "content": req["text"]}]
            self.db.execute("INSERT INTO work VALUES (?,?,'run','queued','queued',1,?,?,?,0)",
                            (work_id, req["session_id"], self.env["host_id"], dumps(messages), now()))
            self.db.execute("INSERT INTO inputs VALUES (?,?,?,?,?)",
                            (input_id, req["client_msg_id"], work_id, req["text"], now()))
        return {"work_id": work_id, "input_id": input_id}

    def _item(self, work_id: str) -> dict:
        item = one(self.db, "SELECT * FROM work WHERE work_id=?", (work_id,))
        if item is None:
            raise Refused("unknown_work_item", f"no work item {work_id!r}")
        return item

    def _stop(self, work_id: str, desired: str, reason: str) -> int:
        self.db.execute("UPDATE work SET desired=?, status=?, reason=?, cv=cv+1 WHERE work_id=?",
                        (desired, "cancelled" if desired == "cancelled" else "paused", reason, work_id))
        self.db.execute("UPDATE turns SET status='interrupted' WHERE work_id=? AND status='active'", (work_id,))
        self.db.execute("UPDATE leases SET released=1 WHERE work_id=?", (work_id,))
        return self._item(work_id)["cv"]

    def op_pause(self, req: dict) -> dict:
        with tx(self.db):
            item = self._item(req["work_id"])
            if item["desired"] in ("done", "cancelled"):
                raise Refused("precondition_failed", f"{item['work_id']} is already {item['desired']}")
            cv = item["cv"] if item["desired"] == "paused" else self._stop(item["work_id"], "paused", "user_paused")
        return {"work_id": req["work_id"], "control_version": cv}

    def op_resume(self, req: dict) -> dict:
        with tx(self.db):
            item = self._item(req["work_id"])
            if item["desired"] != "paused":
                raise Refused("precondition_failed", f"{item['work_id']} is {item['desired']}, not paused")
            self.db.execute("UPDATE work SET desired='run', status='queued', reason='queued', cv=cv+1 "
                            "WHERE work_id=?", (item["work_id"],))
        return {"work_id": req["work_id"], "control_version": item["cv"] + 1}

    def op_end(self, req: dict) -> dict:
        with tx(self.db):
            item = self._item(req["work_id"])
            cv = item["cv"]
            if item["desired"] not in ("done", "cancelled"):
                cv = self._stop(item["work_id"], "cancelled", "user_cancelled")
        return {"work_id": req["work_id"], "control_version": cv}

    def op_stop_all(self, req: dict) -> dict:
        with tx(self.db):
            stopped = [w["work_id"] for w in rows(self.db, "SELECT work_id FROM work WHERE desired='run'")]
            for work_id in stopped:
                self._stop(work_id, "paused", "user_stopped_all")
        return {"stopped": stopped}

    def op_reload(self, req: dict) -> None:
        return None

    # --- reading -------------------------------------------------------------------------------------

    def op_observe(self, req: dict) -> dict:
        snap = snapshot(self.db)
        return {"snapshot": {**snap, "goals": None, "approvals": None, "waits": None, "fenced_writes": None,
                             "runs": None}}

    def op_quiesce(self, req: dict) -> dict:
        deadline = time.monotonic() + float(req["timeout_s"])
        while True:
            pending = rows(self.db, "SELECT work_id, status FROM work WHERE desired='run' AND status IN "
                                    "('queued','running') ORDER BY created")
            if not pending or time.monotonic() >= deadline:
                return {"quiescent": not pending, "pending": pending}
            time.sleep(0.03)

    # --- the wire ------------------------------------------------------------------------------------

    def serve(self) -> None:
        for msg_id, line in enumerate(sys.stdin, start=1):
            req = json.loads(line)
            try:
                handler = getattr(self, f"op_{req['type']}", None)
                if handler is None:
                    raise Refused("not_supported", f"{req['type']} is not implemented (profile chat_core only)")
                reply = {"type": f"{req['type']}_ok", **(handler(req) or {})}
            except Refused as exc:
                reply = {"type": "error", "code": exc.code, "text": str(exc), "definite": exc.definite}
            except Exception as exc:  # the outcome is unknown: say so
                reply = {"type": "error", "code": "internal", "text": f"{type(exc).__name__}: {exc}",
                         "definite": False}
            sys.stdout.write(dumps({**reply, "msg_id": msg_id, "in_reply_to": req["msg_id"]}) + "\n")
            sys.stdout.flush()
            if req["type"] == "shutdown":
                return
        self.op_shutdown({})


BUGS = ("resume_paused", "rerun_unknown", "sum_usage")


def _bugs(value: str) -> str:
    unknown = [b for b in value.split(",") if b and b not in BUGS]
    if unknown:
        raise argparse.ArgumentTypeError(f"no bug {unknown[0]!r}; choose from {', '.join(BUGS)}")
    return value


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", default="", type=_bugs,
                        help="deliberate contract violations: resume_paused, rerun_unknown, sum_usage (comma list)")
    parser.add_argument("--profiles", default="chat_core",
                        help="profiles to declare (comma-separated); declaring one it does not implement is a lie "
                             "the kit must report as unknown, never as passed")
    parser.add_argument("--no-request-id", action="store_true",
                        help="send no X-Request-Id; name each receipt by the response id, as OpenAI clients keep it")
    parser.add_argument("--slow-start", type=float, default=0.0, metavar="SECONDS",
                        help="each worker's first model request waits this long (a framework importing its model "
                             "client at the first call): longer than the kit's settle window, the work is unsettled")
    parser.add_argument("--turn-per-input", action="store_true",
                        help="answer each queued input in its own turn, with the session's earlier turns as history "
                             "(no input joins a recovered turn), and fail a turn the provider refuses (HTTP 4xx)")
    parser.add_argument("--notice-delay", type=float, default=0.0, metavar="SECONDS",
                        help="the HTTP client notices a cut stream this long after the provider cut it")
    ns = parser.parse_args()
    honest = {"slow_start": ns.slow_start, "turn_per_input": ns.turn_per_input, "notice_delay": ns.notice_delay}
    Mini(ns.bug, ns.profiles.split(","), ns.no_request_id, honest).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
