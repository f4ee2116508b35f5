"""The stdio adapter: speaks the recoverykit adapter protocol for this runtime, as a third party would.

Long-lived and thin: it owns no durable state. It writes the configuration, starts and stops the
control process and the workers (``procs``), forwards user controls to the control process over its
Unix socket, and answers ``observe`` / ``quiesce`` by reading the databases. Each request runs on
its own thread so a request held at a failpoint never blocks ``processes`` or ``observe``. Only
protocol lines go to stdout; logs go to stderr.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path

from . import observe, spawn
from .config import Config, ToolSpec
from .failpoints import POINTS
from .procs import Runtime

log = logging.getLogger("recoverykit.impl.adapter")
NAME, VERSION, PROTOCOL = "recoverykit-reference-runtime", "0.1.0", "1.4"
RESOURCES = ["model", "credentials", "working_dir", "tool_version"]  # rechecked after a restart (resources.py)
RESTART_KINDS = ["frontend_reload", "normal_exit", "graceful_worker_restart", "stop_all_exit"]
LIFECYCLE = ("start", "stop", "restart", "shutdown")
NOT_SUPPORTED: tuple[str, ...] = ()
PROFILES = ["chat_core", "goals", "approvals", "waits", "paperclip_retry", "jobs"]


class OpError(Exception):
    def __init__(self, code: str, text: str, definite: bool):
        super().__init__(text)
        self.code, self.text, self.definite = code, text, definite


class Adapter:
    def __init__(self, out=None) -> None:
        self.out = out or sys.stdout.buffer
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.cfg: Config | None = None
        self.runtime: Runtime | None = None
        self.in_flight = 0  # user controls forwarded and not yet answered: the runtime is not quiescent
        self.lifecycle = threading.Lock()  # start / stop / restart / shutdown one at a time (a doubled start)

    # --- wire ------------------------------------------------------------------------------------

    def send(self, body: dict) -> None:
        line = json.dumps({"type": body.pop("type"), "msg_id": next(self.ids), **body}, separators=(",", ":"))
        with self.lock:
            self.out.write(line.encode() + b"\n")
            self.out.flush()

    def serve(self, stream=None) -> None:
        stream = stream or sys.stdin.buffer
        for raw in stream:
            try:
                req = json.loads(raw)
                if not isinstance(req, dict) or not isinstance(req.get("msg_id"), int):
                    raise ValueError("not a request object with an integer msg_id")
            except ValueError as exc:
                log.error("malformed request %r: %s", raw[:200], exc)
                continue
            if req.get("type") == "shutdown":
                self.dispatch(req)
                return
            if req.get("type") == "init":  # everything after it depends on it: answer before reading on
                self.dispatch(req)
                continue
            threading.Thread(target=self.dispatch, args=(req,), daemon=True).start()
        if self.runtime is not None:  # stdin closed: the kit is gone; leave nothing behind
            self.runtime.shutdown()

    def dispatch(self, req: dict) -> None:
        kind, msg_id = req.get("type"), req["msg_id"]
        try:
            handler = getattr(self, f"op_{kind}", None)
            if handler is None:
                if kind in NOT_SUPPORTED:
                    raise OpError("not_supported", f"{kind} belongs to a profile this runtime does not implement "
                                  "yet (it implements chat_core and goals)", True)
                raise OpError("malformed_request", f"unknown request type {kind!r}", True)
            if kind != "init" and self.cfg is None:
                raise OpError("precondition_failed", f"{kind} before init", True)
            if kind in LIFECYCLE:
                with self.lifecycle:
                    body = handler(req) or {}
            else:
                body = handler(req) or {}
            self.send({"type": f"{kind}_ok", "in_reply_to": msg_id, **body})
        except OpError as exc:
            self.send({"type": "error", "in_reply_to": msg_id, "code": exc.code, "text": exc.text[:4000],
                       "definite": exc.definite})
        except Exception as exc:
            log.exception("%s failed", kind)
            self.send({"type": "error", "in_reply_to": msg_id, "code": "internal",
                       "text": f"{type(exc).__name__}: {exc}"[:4000], "definite": False})

    # --- handshake and lifecycle -------------------------------------------------------------------

    def op_init(self, req: dict) -> dict:
        data_dir = Path(req["data_dir"])
        tools = [ToolSpec.registered(t) for t in req["probe_tools"]]
        existing = data_dir / "config.json"
        cfg = Config.load(data_dir) if existing.exists() else Config(data_dir=str(data_dir))
        cfg.provider_base_url, cfg.tools = req["provider_base_url"], tools
        cfg.model = req.get("model") or cfg.model
        cfg.api_key = req.get("api_key") or cfg.api_key
        cfg.failpoint_socket, cfg.run_marker = req["failpoint_socket"], req.get("run_marker", "")
        cfg.credentials_env = os.environ.get("RK_IMPL_CREDENTIALS_ENV") or cfg.credentials_env
        if os.environ.get("RK_IMPL_AUTOMATIC_RECOVERY") is not None:  # the operator's explicit setting
            cfg.automatic_recovery = os.environ["RK_IMPL_AUTOMATIC_RECOVERY"] not in ("0", "false", "off")
        cfg.save()
        self.cfg = cfg
        self.runtime = Runtime(cfg)
        return {"name": NAME, "version": VERSION, "protocol_version": PROTOCOL, "profiles": PROFILES,
                "failpoints": list(POINTS), "restart_kinds": RESTART_KINDS, "observes": observe.OBSERVES,
                "resources": RESOURCES, "storage": observe.STORAGE_DECL, "automatic_recovery_setting": True,
                "legacy_paused_record": True, "pricing": True}

    def op_start(self, req: dict) -> dict:
        self._configure(req)
        self.runtime.start()

    def _configure(self, req: dict) -> None:
        cfg = self.cfg
        for key in ("failpoints", "clock_offset_s", "host_id", "automatic_recovery"):
            if req.get(key) is not None:
                setattr(cfg, key, req[key])
        if req.get("probe_tools") is not None:  # the tools as they are now (a version may have changed)
            cfg.tools = [ToolSpec.registered(t) for t in req["probe_tools"]]
        cfg.save()

    def op_stop(self, req: dict) -> dict:
        self.runtime.stop()

    def op_restart(self, req: dict) -> dict:
        kind = req["kind"]
        if kind not in RESTART_KINDS:
            raise OpError("not_supported", f"restart kind {kind!r}: this adapter performs {RESTART_KINDS}; "
                          "kills are the kit's to do", True)
        if kind == "frontend_reload":
            return None
        if kind == "stop_all_exit":
            self._control({"op": "stop_all"})
        if kind == "graceful_worker_restart":
            self.runtime.stop_workers()
            self._configure(req)
            self.runtime.start_workers()
        else:
            self.runtime.stop()
            self._configure(req)
            self.runtime.start()

    def op_shutdown(self, req: dict) -> dict:
        if self.runtime is not None:
            self.runtime.shutdown()

    def op_processes(self, req: dict) -> dict:
        return {"processes": self.runtime.processes()}

    def op_reload(self, req: dict) -> dict:
        return None  # a frontend reload only disconnects a client; it changes no intent

    # --- user controls ---------------------------------------------------------------------------

    def _control(self, body: dict) -> dict:
        with self.lock:
            self.in_flight += 1
        try:
            return self._forward(body)
        finally:
            with self.lock:
                self.in_flight -= 1

    def _forward(self, body: dict) -> dict:
        path = self.cfg.run_dir / "control.sock"
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(str(path))
        except OSError as exc:
            raise OpError("temporarily_unavailable", f"the runtime's control process is not running ({exc}); "
                          "send start", True) from exc
        with conn, conn.makefile("rwb") as stream:
            try:
                stream.write(json.dumps(body).encode() + b"\n")
                stream.flush()
                line = stream.readline()
            except OSError as exc:
                line = b""
                log.warning("control connection failed: %s", exc)
        if not line:
            raise OpError("crashed", "the control process died while the request was in flight; it may or may "
                          "not have been applied", False)
        reply = json.loads(line)
        if "error" in reply:
            err = reply["error"]
            raise OpError(err["code"], err["text"], err["definite"])
        return reply["ok"]

    def op_submit(self, req: dict) -> dict:
        return self._control({"op": "submit", "session_id": req["session_id"], "text": req["text"],
                              "client_msg_id": req["client_msg_id"], "working_dir": req.get("working_dir")})

    def op_plant_paused_record(self, req: dict) -> dict:
        """Written straight into the store: the runtime is down (the kit sends this after a kill)."""
        from .control import plant_paused_record  # only this op needs the runtime's store code in the adapter
        from .schema import open_runtime_db
        db = open_runtime_db(self.cfg.path)
        try:
            return plant_paused_record(db, self.cfg, req["session_id"], req["text"], req["client_msg_id"],
                                       req["reason"])
        finally:
            db.conn.close()

    def op_pause(self, req: dict) -> dict:
        return self._control({"op": "pause", "work_id": req["work_id"]})

    def op_resume(self, req: dict) -> dict:
        return self._control({"op": "resume", "work_id": req["work_id"]})

    def op_end(self, req: dict) -> dict:
        return self._control({"op": "end", "work_id": req["work_id"]})

    def op_stop_all(self, req: dict) -> dict:
        return self._control({"op": "stop_all"})

    def op_goal_create(self, req: dict) -> dict:
        return self._control({"op": "goal_create", "session_id": req["session_id"], "objective": req["objective"],
                              "budget": req.get("budget")})

    def op_goal_update(self, req: dict) -> dict:
        return self._control({"op": "goal_update", "goal_id": req["goal_id"], "revision": req["revision"],
                              "objective": req["objective"], "reason": req.get("reason")})

    def op_budget_set(self, req: dict) -> dict:
        return self._control({"op": "budget_set", "work_id": req["work_id"], "limit": req["limit"]})

    def op_pricing_set(self, req: dict) -> dict:
        return self._control({"op": "pricing_set", "model": req.get("model"),
                              "input_usd_per_mtok": req["input_usd_per_mtok"],
                              "output_usd_per_mtok": req["output_usd_per_mtok"]})

    def op_notify(self, req: dict) -> dict:
        body = {"op": "notify", **{k: req[k] for k in ("notification_id", "handle", "version", "outcome")}}
        try:
            self._control(body)
        except OpError as exc:
            if exc.code != "temporarily_unavailable" or "control process is not running" not in exc.text:
                raise
            # the runtime is down (a restart): the notification is saved for its next start, then admitted
            from .schema import open_runtime_db
            from .waits import save
            db = open_runtime_db(self.cfg.path)
            try:
                save(db, body["notification_id"], body["handle"], body["version"], body["outcome"], "notify")
            finally:
                db.conn.close()
        return {}

    def op_job_start(self, req: dict) -> dict:
        return self._control({"op": "job_start", **{k: req[k] for k in (
            "caller_work_id", "session_id", "text", "subtasks", "concurrency", "client_job_id")}})

    def op_approve(self, req: dict) -> dict:
        return self._control({"op": "approve", "approval_id": req["approval_id"]})

    def op_deny(self, req: dict) -> dict:
        return self._control({"op": "deny", "approval_id": req["approval_id"]})

    # --- Paperclip tasks (profile paperclip_retry, protocol 1.3; impl/tasks.py) ---------------------------

    def op_task_create(self, req: dict) -> dict:
        return self._control({"op": "task_create", "project": req.get("project"), "text": req["text"],
                              "retry_limit": req.get("retry_limit")})

    def op_retry(self, req: dict) -> dict:
        return self._control({"op": "retry", "work_id": req["work_id"], "idempotency_key": req["idempotency_key"],
                              "observed_run_id": req["observed_run_id"],
                              "authority": req.get("authority") or "board"})

    def op_task_message(self, req: dict) -> dict:
        return self._control({"op": "task_message", "task_id": req["task_id"], "text": req["text"]})

    def op_task_fault(self, req: dict) -> dict:
        return self._control({"op": "task_fault", "task_id": req["task_id"], "fault": req["fault"],
                              "error_code": req["error_code"], "cooldown_s": req.get("cooldown_s"),
                              "count": req.get("count", 1)})

    # --- reading ---------------------------------------------------------------------------------

    def op_observe(self, req: dict) -> dict:
        try:
            return {"snapshot": observe.snapshot(self.cfg.path)}
        except observe.Unreadable as exc:
            raise OpError("temporarily_unavailable", str(exc), True) from exc

    def op_quiesce(self, req: dict) -> dict:
        deadline = time.monotonic() + float(req["timeout_s"])
        while True:
            try:
                left = observe.pending(self.cfg.path, self.cfg.host_id)
            except Exception as exc:  # storage unreadable: not quiescent, and say so
                raise OpError("temporarily_unavailable", f"cannot read the runtime's state: {exc}", True) from exc
            busy = bool(left) or self.in_flight > 0  # a submit in flight may queue work any moment
            if not busy or time.monotonic() >= deadline:
                return {"quiescent": not busy, "pending": [{"work_id": p["work_id"], "status": p["status"]}
                                                           for p in left]}
            time.sleep(0.005)  # two small reads per poll; a coarser poll was most of a chaos case's recovery time


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"adapter[{os.getpid()}] %(levelname)s %(message)s")
    # The protocol channel is private to this process: every process started from here (the zygote,
    # control, workers, tool shims) inherits fds 0 and 1, and one stray write there corrupts the stream.
    proto_in, proto_out = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    spawn.warm()
    Adapter(out=proto_out).serve(proto_in)
    # The runtime is stopped and every reply is written: interpreter teardown (module cleanup,
    # multiprocessing's exit handlers) would add ~50 ms to every shutdown and protects nothing.
    logging.shutdown()
    proto_out.close()
    os._exit(0)
