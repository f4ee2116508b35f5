"""The dispatch loop every adapter writes: requests in on stdin, one checked reply per request on stdout.

Subclass ``Adapter``, declare what the runtime implements as class attributes, write one ``op_<request>``
method per request (it returns the reply's fields, or raises ``Refused``), and call ``YourAdapter.main()``.
The loop then:

- answers each request on its own thread (``init`` and ``shutdown`` inline), so a request held at a
  failpoint never blocks ``processes`` or ``observe``; lifecycle requests run one at a time; ``shutdown``
  first gives requests in progress a short grace to send their replies;
- checks each reply against the protocol's own schemas before it is sent (``checks``). A reply that would
  break the protocol is not sent: the author reads on stderr what is wrong and which section of
  docs/protocol.md to read, and the kit gets an indefinite ``internal`` error, which claims nothing;
- turns ``Refused`` into an ``error`` whose ``definite`` agrees with the registry, and any other exception
  into ``internal`` (indefinite: the outcome is unknown), with the traceback on stderr; ``SystemExit`` and
  ``KeyboardInterrupt`` raised by a handler included: they would otherwise end its thread with no reply;
- owns the envelope: a handler's returned fields cannot set ``type``, ``msg_id`` or ``in_reply_to`` (such a
  reply becomes an ``internal`` error naming the key), so every reply answers the request it was made for;
- keeps the protocol channel private: fds 0 and 1 are moved aside, so a runtime process started from
  here, or a stray ``print``, writes to stderr instead of corrupting the stream.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO, ClassVar

from . import checks
from .quiescence import quiesce
from .runtime_env import RuntimeEnv

log = logging.getLogger("recoverykit.adapter")
LIFECYCLE = frozenset({"start", "stop", "restart", "shutdown", "plant_paused_record"})
SHUTDOWN_GRACE_S = 2.0  # how long ``shutdown`` waits for requests in progress before it stops the runtime
READS = frozenset({"observe", "processes", "quiesce", "reload"})  # requests that cannot queue work
ENVELOPE = ("type", "msg_id", "in_reply_to")  # the SDK's keys: a handler's returned fields never set them


class Refused(Exception):
    """An ``error`` reply. ``definite`` defaults to the registry's (custom codes: indefinite)."""

    def __init__(self, code: str, text: str, definite: bool | None = None) -> None:
        super().__init__(text)
        self.code, self.text = code, text
        self.definite = checks.error_is_definite(code) if definite is None else definite


class Adapter:
    """Base of an adapter. Override the class attributes and the ``op_*`` methods your runtime needs."""

    name: ClassVar[str] = "adapter"
    version: ClassVar[str] = "0.0.0"
    protocol_version: ClassVar[str] = "1.0"
    profiles: ClassVar[list[str]] = ["chat_core"]
    failpoints: ClassVar[list[str]] = []
    restart_kinds: ClassVar[list[str]] = []
    observes: ClassVar[list[str]] = []
    # features the framework does not have: [{"clauses": [...], "why": "... (source)"}], sent as init_ok.lacks;
    # their clauses stay unknown, reported as framework_lacks (docs/adapter-guide.md section 20)
    lacks: ClassVar[list[dict[str, Any]]] = []
    overlapping: ClassVar[bool] = True  # False: one request at a time, in order (fine for a runtime that never blocks)

    def __init__(self) -> None:
        self.env: RuntimeEnv | None = None
        self.declared: dict[str, Any] = {}
        self.in_flight = 0  # requests that may queue work, not yet answered: never quiescent meanwhile
        self._out: BinaryIO = sys.stdout.buffer
        self._out_lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._lifecycle = threading.Lock()
        self._ids = itertools.count(1)
        self._threads: set[threading.Thread] = set()

    # --- what a subclass overrides ------------------------------------------------------------------

    def declare(self) -> dict[str, Any]:
        """The ``init_ok`` fields; add optional ones (``storage``, ``resources`` ...) by overriding."""
        return {"name": self.name, "version": self.version, "protocol_version": self.protocol_version,
                "profiles": list(self.profiles), "failpoints": list(self.failpoints),
                "restart_kinds": list(self.restart_kinds), "observes": list(self.observes),
                **({"lacks": [dict(lack) for lack in self.lacks]} if self.lacks else {})}

    def prepare(self) -> None:
        """Called by ``init`` once ``self.env`` is set: prepare the runtime (do not start it)."""

    def start_runtime(self) -> None:
        """Start the runtime's processes (see ``Supervisor``); return once it admits requests."""

    def stop_runtime(self) -> None:
        """Graceful stop: return once every runtime process has exited."""

    def pending(self) -> list[dict[str, str]]:
        """Work items still running or runnable, as ``{"work_id", "status"}``, read from the durable store."""
        return []

    def runtime_processes(self) -> list[dict[str, Any]]:
        """Every live runtime process, as ``{"role", "pid", "create_time"}`` (see ``Supervisor.processes``)."""
        return []

    # --- default handlers -----------------------------------------------------------------------------

    def op_init(self, req: dict) -> dict:
        self.env = RuntimeEnv.from_init(req)
        self.prepare()
        return self.declare()

    def op_start(self, req: dict) -> None:
        self.env.update(req)
        self.start_runtime()

    def op_stop(self, req: dict) -> None:
        self.stop_runtime()

    def op_restart(self, req: dict) -> None:
        kind = req["kind"]
        if kind not in self.restart_kinds:
            raise Refused("not_supported", f"restart kind {kind!r}: this adapter performs {self.restart_kinds}; "
                          "kills are the kit's to do")
        if kind == "frontend_reload":
            return
        if kind == "stop_all_exit":
            self.op_stop_all({"type": "stop_all"})
        self.stop_runtime()
        self.env.update(req)
        self.start_runtime()

    def op_processes(self, req: dict) -> dict:
        return {"processes": self.runtime_processes()}

    def op_quiesce(self, req: dict) -> dict:
        return quiesce(float(req["timeout_s"]), self.pending, busy=lambda: self.in_flight > 0)

    def op_reload(self, req: dict) -> None:
        return None  # a frontend reload disconnects a client; it changes no intent

    def op_shutdown(self, req: dict) -> None:
        self.stop_runtime()

    # --- the loop -------------------------------------------------------------------------------------

    def log(self, text: str) -> None:
        print(f"{self.name}[{os.getpid()}] {text}", file=sys.stderr, flush=True)

    def serve(self, stream: BinaryIO | None = None, out: BinaryIO | None = None) -> None:
        stream = stream or sys.stdin.buffer
        self._out = out or self._out
        for raw in stream:
            try:
                req = json.loads(raw)
                if not isinstance(req, dict) or not isinstance(req.get("msg_id"), int):
                    raise ValueError("not a request object with an integer msg_id")
            except ValueError as exc:
                self.log(f"ignored a line that is not a request ({exc}): {raw[:200]!r}")
                continue
            if req.get("type") == "shutdown":
                self._drain(SHUTDOWN_GRACE_S)  # a request already answered by the runtime gets its reply out
                self.dispatch(req)
                return
            if req.get("type") == "init" or not self.overlapping:  # everything after init depends on it
                self.dispatch(req)
                continue
            thread = threading.Thread(target=self._dispatch_tracked, args=(req,), daemon=True,
                                      name=f"req-{req['msg_id']}")
            with self._count_lock:
                self._threads.add(thread)
            thread.start()
        self.log("stdin closed: the kit is gone; stopping the runtime")
        try:
            self.op_shutdown({"type": "shutdown"})
        except Exception:
            self.log(traceback.format_exc())

    def _dispatch_tracked(self, req: dict) -> None:
        try:
            self.dispatch(req)
        finally:
            with self._count_lock:
                self._threads.discard(threading.current_thread())

    def _drain(self, grace_s: float) -> None:
        """Wait up to ``grace_s`` for requests in progress, so none that finishes has its reply cut off."""
        deadline = time.monotonic() + grace_s
        with self._count_lock:
            running = list(self._threads)
        for thread in running:
            thread.join(max(0.0, deadline - time.monotonic()))

    def dispatch(self, req: dict) -> None:
        kind = req.get("type")
        counted = kind not in READS and kind not in LIFECYCLE
        if counted:
            with self._count_lock:
                self.in_flight += 1
        try:
            body = self._handle(kind, req)
            owned = [key for key in ENVELOPE if isinstance(body, dict) and key in body]
            if owned:
                raise ValueError(f"op_{kind} returned the envelope key(s) {', '.join(map(repr, owned))}, which "
                                 f"the SDK owns (docs/protocol.md#envelope): return only the reply's fields")
            reply = {"type": f"{kind}_ok", **(body or {})}
        except Refused as exc:
            reply = {"type": "error", "code": exc.code, "text": exc.text[:4000], "definite": exc.definite}
        except BaseException as exc:  # sys.exit/KeyboardInterrupt in a handler still get a reply
            self.log(f"{kind} failed:\n{traceback.format_exc()}")
            reply = {"type": "error", "code": "internal", "text": f"{type(exc).__name__}: {exc}"[:4000],
                     "definite": False}
        finally:
            if counted:
                with self._count_lock:
                    self.in_flight -= 1
        if kind == "init" and reply["type"] == "init_ok":
            self.declared = reply
        self.send(req["msg_id"], reply)

    def _handle(self, kind: Any, req: dict) -> dict | None:
        handler = getattr(self, f"op_{kind}", None) if isinstance(kind, str) else None
        if handler is None:
            raise Refused("not_supported", f"{self.name} does not implement {kind!r}")
        if kind != "init" and self.env is None:
            raise Refused("precondition_failed", f"{kind} before init")
        if kind in LIFECYCLE:
            with self._lifecycle:
                return handler(req)
        return handler(req)

    def send(self, in_reply_to: int, reply: dict) -> None:
        msg_id = next(self._ids)
        message = {"type": reply.pop("type"), "msg_id": msg_id, "in_reply_to": in_reply_to, **reply}
        found = checks.mistakes(message, observes=self.declared.get("observes"),
                                storage=self.declared.get("storage") is not None if self.declared else None)
        if found:
            what = "; ".join(found)
            self.log(f"ADAPTER BUG: the reply to request {in_reply_to} ({message['type']}) breaks the protocol "
                     f"and was not sent: {what}. The kit gets an indefinite `internal` error instead.")
            message = {"type": "error", "msg_id": msg_id, "in_reply_to": in_reply_to, "code": "internal",
                       "text": f"adapter bug, reply withheld: {what}"[:4000], "definite": False}
        line = json.dumps(message, separators=(",", ":"))
        with self._out_lock:
            self._out.write(line.encode() + b"\n")
            self._out.flush()

    @classmethod
    def main(cls, *args: Any, **kwargs: Any) -> None:
        """Run an adapter on this process's stdin and stdout, then exit 0."""
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format=f"{cls.name}[{os.getpid()}] %(levelname)s %(message)s")
        proto_in, proto_out = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)  # a stray print, or a child inheriting fd 1, now writes to stderr
        cls(*args, **kwargs).serve(proto_in, proto_out)
        logging.shutdown()
        proto_out.close()
        os._exit(0)  # every reply is written and the runtime stopped; skip interpreter teardown
