"""AdapterClient: the kit's end of the adapter protocol.

One reader thread turns the adapter's stdout into validated replies and hands each to the caller
waiting for it; callers wait with a timeout, never forever. The first protocol break (a malformed line,
a reply to nothing, a line over the limit, the adapter exiting) is fatal: it is raised to whoever is
waiting and to every later call, because a stream that broke once cannot be trusted again. Every line
in both directions is recorded (``transcript`` and ``adapter.messages.jsonl``) for history bundles.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from recoverykit.conformance import client_process
from recoverykit.conformance.errors import (
    AdapterExited,
    AdapterTimeout,
    OperationFailed,
    ProtocolError,
    UnexpectedReply,
)
from recoverykit.conformance.pacing import REPLY, START, Pacing, current
from recoverykit.conformance.protocol import check_answers, check_snapshot, decode, encode, expected_reply
from recoverykit.conformance.protocol_envelope import MAX_LINE_BYTES, PROTOCOL_VERSION, ErrorReply, Reply, Request
from recoverykit.conformance.protocol_rpcs import RPCS_BY_NAME, Init, InitOk, ProbeTool
from recoverykit.conformance.protocol_snapshot import Snapshot
from recoverykit.conformance.stderr_log import BoundedLog
from recoverykit.model.errors import InvalidArgument

START_TIMEOUT_ENV = "RECOVERYKIT_START_TIMEOUT_S"
DEFAULT_START_TIMEOUT_S = 60.0


def start_timeout_s() -> float:
    """How long the kit waits for a slow reply (``init``, ``start``, ``restart``, ``stop``): 60 s, or
    ``RECOVERYKIT_START_TIMEOUT_S`` (a runtime that starts slowly raises it; a CI gate that wants a hung
    adapter found sooner lowers it). Silence past it is unknown, never a pass."""
    text = os.environ.get(START_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_START_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.5 <= value <= 3600:
        raise InvalidArgument(f"{START_TIMEOUT_ENV}={text!r}: give seconds between 0.5 and 3600")
    return value


@dataclass(frozen=True, slots=True)
class Exchange:
    """One line on the wire: ``sent`` by the kit or ``received`` from the adapter."""

    direction: str
    line: str
    monotonic: float
    wall: float


@dataclass(slots=True)
class PendingCall:
    """A request in flight; ``wait()`` returns its reply (an ``ErrorReply`` too) or raises ProtocolError."""

    request: Request
    timeout_s: float
    client: AdapterClient
    done: threading.Event = field(default_factory=threading.Event)
    reply: Reply | None = None
    error: ProtocolError | None = None

    def wait(self) -> Reply:
        if not self.done.wait(self.timeout_s) and not self.client._abandon(self):
            self.client.timed_out = True
            raise AdapterTimeout(f"no reply within {self.timeout_s:g} s ({self.client.window_of(self)}); silence "
                                 "proves nothing, so the outcome is unknown", sent=encode(self.request),
                                 expected=expected_reply(self.request), doc="docs/protocol.md#transport")
        if self.error is not None:
            raise self.error
        assert self.reply is not None
        return self.reply


class AdapterClient:
    """Spawn an adapter and talk to it. Use as a context manager; ``close()`` leaves no process behind."""

    def __init__(self, command: str | Sequence[str], run_dir: str | Path, *, timeout_s: float = 10.0,
                 slow_timeout_s: float | None = None, max_line_bytes: int = MAX_LINE_BYTES,
                 env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
                 run_marker: str | None = None, grace_s: float = 2.0, pacing: Pacing | None = None) -> None:
        """``timeout_s`` and ``slow_timeout_s`` are the windows as given (already scaled); ``pacing`` only names
        them in a timeout's message (default: the current pacing)."""
        self.pacing = pacing
        self.argv = client_process.split_command(command)
        self.run_dir = Path(run_dir)
        self.slow_timeout_s = start_timeout_s() if slow_timeout_s is None else slow_timeout_s
        self.timeout_s, self.grace_s = timeout_s, grace_s
        self.max_line_bytes = max_line_bytes
        self.run_marker = run_marker or f"rk-{uuid.uuid4().hex}"
        self._env = {**(os.environ if env is None else env), client_process.MARKER_ENV: self.run_marker}
        self._cwd = Path(cwd) if cwd is not None else None
        self.transcript: list[Exchange] = []
        self.listeners: list[Callable[[Exchange], None]] = []
        self.init_ok: InitOk | None = None
        self.timed_out = False  # an adapter that went silent once is not asked politely to shut down
        self.shut_down = False
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # guards _pending, _abandoned, _broken and the transcript
        self._write_lock = threading.Lock()  # one writer at a time; never held by the reader thread
        self._pending: dict[int, PendingCall] = {}
        self._abandoned: set[int] = set()
        self._broken: ProtocolError | None = None
        self._proc = None
        self._pid: int | None = None
        self._reader: threading.Thread | None = None
        self._kin_files: frozenset[str] = frozenset()
        self.strays: list[int] = []  # killed at close: neither marked nor descended from the adapter (escaped)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> AdapterClient:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._stderr = BoundedLog(self.run_dir / "adapter.stderr.log")  # the adapter's stderr, bounded
        self._log = open(self.run_dir / "adapter.messages.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        try:
            self._proc = client_process.spawn(self.argv, stderr=self._stderr.write_fd, env=self._env, cwd=self._cwd)
        except Exception:
            self._stderr.close()
            self._log.close()
            raise
        self._stderr.started()
        self._pid = self._proc.pid
        self._kin_files = _held_files(self._stderr, self._proc)
        self._reader = threading.Thread(target=self._read_loop, name=f"adapter-reader-{self._proc.pid}", daemon=True)
        self._reader.start()
        return self

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def close(self) -> None:
        """Ask the adapter to shut down, then SIGTERM, then SIGKILL its group and every process it started."""
        proc = self._proc
        if proc is None:
            return
        polite = self._broken is None and not self.timed_out and not self.shut_down
        if polite and client_process.peek_exit(proc.pid) is None:
            # the verdict was already decided by whatever came before; from here on only cleanup matters
            with contextlib.suppress(ProtocolError, OperationFailed):
                self.call("shutdown", reply_within_s=min(self.slow_timeout_s, max(self.timeout_s, 5.0)))
        with self._write_lock, self._lock:
            self._proc = None
            with contextlib.suppress(OSError):
                proc.stdin.close()
        self.strays = client_process.terminate(proc, marker=self.run_marker, grace_s=self.grace_s,
                                               expect_exit=self.shut_down, files=self._kin_files)
        if self._reader is not None:
            self._reader.join(timeout=self.grace_s)
        if self._reader is None or not self._reader.is_alive():
            proc.stdout.close()  # else a stray process still holds the pipe; closing would wait on the reader
        self._stderr.close()
        self._log.close()

    def __enter__(self) -> AdapterClient:
        return self.start() if self._proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- requests -------------------------------------------------------------------------------

    def make(self, type_name: str, /, **fields: Any) -> Request:
        """Build a request with the next msg_id (for ``send``/``request``); a bad field is InvalidArgument."""
        rpc = RPCS_BY_NAME.get(type_name)
        if rpc is None:
            raise InvalidArgument(f"{type_name!r} is not a request of the adapter protocol; the requests are "
                                  f"{', '.join(RPCS_BY_NAME)}.")
        try:
            # lax here: the kit's own code may pass "tree_kill" for RestartKind.TREE_KILL; the wire stays strict
            return rpc.request.model_validate({**fields, "msg_id": next(self._ids)}, strict=False)
        except ValidationError as exc:
            raise InvalidArgument(f"Cannot build a {type_name!r} request from {fields!r}: {exc.errors()[0]['msg']} "
                                  f"at {'.'.join(map(str, exc.errors()[0]['loc']))}. See docs/protocol.md#{type_name}."
                                  ) from None

    _make = make  # the first name of ``make``, still used by early callers

    def _timeout_for(self, request: Request) -> float:
        rpc = RPCS_BY_NAME[request.type]  # type: ignore[attr-defined]
        if rpc.name == "quiesce":
            return request.timeout_s + self.timeout_s  # type: ignore[attr-defined]
        return self.slow_timeout_s if rpc.slow else self.timeout_s

    def window_of(self, call: PendingCall) -> str:
        """The window a call waited in, named for its timeout's message (``pacing.Pacing.says``)."""
        pacing = self.pacing if self.pacing is not None else current()
        rpc = RPCS_BY_NAME[call.request.type]  # type: ignore[attr-defined]
        name = ("settle + reply" if rpc.name == "quiesce" else
                START.name if call.timeout_s == self.slow_timeout_s and rpc.slow else REPLY.name)
        return pacing.says(name, call.timeout_s)

    def send(self, request: Request, *, timeout_s: float | None = None) -> PendingCall:
        """Write a request without waiting for its reply (requests may overlap)."""
        call = PendingCall(request, timeout_s or self._timeout_for(request), self)
        line = encode(request)
        with self._write_lock:
            with self._lock:
                if self._broken is not None:
                    raise self._broken
                if self._proc is None:
                    raise RuntimeError("AdapterClient.send() before start() or after close()")
                self._pending[request.msg_id] = call
                self._record("sent", line)
            try:
                self._proc.stdin.write(line)
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                with self._lock:
                    self._pending.pop(request.msg_id, None)
                    if self._broken is None:
                        self._broken = self._exited(request)
                    raise self._broken from None
        return call

    def request(self, request: Request, *, timeout_s: float | None = None) -> Reply:
        """Send and wait: the ``_ok`` reply or an ``ErrorReply``; a ProtocolError if neither came."""
        return self.send(request, timeout_s=timeout_s).wait()

    def call(self, type_name: str, /, *, reply_within_s: float | None = None, **fields: Any) -> Reply:
        """Build, send and wait for a request by name; an ``error`` reply raises ``OperationFailed``.

        ``reply_within_s`` overrides the client's timeout for this call (``timeout_s`` is a field of quiesce).
        """
        reply = self.request(self.make(type_name, **fields), timeout_s=reply_within_s)
        if type_name == "shutdown" and not isinstance(reply, ErrorReply):
            self.shut_down = True
        if isinstance(reply, ErrorReply):
            raise OperationFailed(type_name, reply.code, reply.text, reply.definite)
        return reply

    def handshake(self, *, data_dir: str | Path, provider_base_url: str, failpoint_socket: str | Path,
                  probe_tools: Sequence[ProbeTool] = (), model: str | None = None,
                  api_key: str | None = None) -> InitOk:
        init = Init(msg_id=next(self._ids), protocol_version=PROTOCOL_VERSION, data_dir=str(data_dir),
                    provider_base_url=provider_base_url, probe_tools=list(probe_tools),
                    failpoint_socket=str(failpoint_socket), run_marker=self.run_marker, model=model, api_key=api_key)
        reply = self.request(init)
        if isinstance(reply, ErrorReply):
            raise OperationFailed("init", reply.code, reply.text, reply.definite)
        assert isinstance(reply, InitOk)
        self.init_ok = reply
        return reply

    def observe(self, *, reply_within_s: float | None = None) -> Snapshot:
        """The snapshot, checked against the sections the adapter declared in ``init_ok.observes``."""
        reply = self.call("observe", reply_within_s=reply_within_s)
        observes = self.init_ok.observes if self.init_ok else ()
        storage = self.init_ok.storage is not None if self.init_ok else None
        return check_snapshot(reply.snapshot, observes, raw=self._last_received(),  # type: ignore[attr-defined]
                              storage_declared=storage)

    # --- reading --------------------------------------------------------------------------------

    def _record(self, direction: str, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\n")
        entry = Exchange(direction, text, time.monotonic(), time.time())
        self.transcript.append(entry)
        with contextlib.suppress(ValueError):  # the log is closed only after the reader stopped, but never crash
            self._log.write(json.dumps({"dir": direction, "t": entry.wall, "line": text}) + "\n")
            self._log.flush()
        for listener in self.listeners:
            listener(entry)

    def _last_received(self) -> str | None:
        return next((e.line for e in reversed(self.transcript) if e.direction == "received"), None)

    def _exited(self, request: Request | None, partial: bytes | None = None, settle: bool = True) -> AdapterExited:
        code = client_process.peek_exit(self._pid) if self._pid else None
        if code is None and self._pid and settle:  # stdout closed; give a dying adapter a moment to report it
            time.sleep(0.05)
            code = client_process.peek_exit(self._pid)
        how = "closed its stdout" if code is None else f"exited with status {code}"
        if partial:
            how += " in the middle of a line (no newline)"
        return AdapterExited(f"the adapter {how} while a reply was due; see adapter.stderr.log in {self.run_dir}",
                             received=partial, sent=encode(request) if request else None,
                             expected=expected_reply(request) if request else "a reply",
                             doc="docs/protocol.md#transport")

    def _read_loop(self) -> None:
        stdout = self._proc.stdout
        while True:
            try:
                line = stdout.readline(self.max_line_bytes + 1)
            except (OSError, ValueError):
                line = b""
            if not line:
                self._fail_all(None)
                return
            with self._lock:
                self._record("received", line[:4096] if len(line) > 4096 else line)
            if not line.endswith(b"\n") and len(line) <= self.max_line_bytes:
                self._fail_all(None, partial=line)  # EOF inside a line: the adapter died mid-message
                return
            if not self._deliver(line):
                return

    def _deliver(self, line: bytes) -> bool:
        with self._lock:
            in_flight = [c.request for c in self._pending.values()]
        only = in_flight[0] if len(in_flight) == 1 else None
        sent = encode(only) if only else None
        expected = expected_reply(only) if only else "a reply to a request in flight"
        try:
            msg = decode(line, max_line_bytes=self.max_line_bytes, sent=sent, expected=expected)
            assert isinstance(msg, Reply)
            with self._lock:
                if msg.in_reply_to in self._abandoned:
                    self._abandoned.discard(msg.in_reply_to)
                    return True  # a late answer to a request that already timed out: recorded, not judged
                call = self._pending.get(msg.in_reply_to)
            if call is None:
                ids = ", ".join(str(r.msg_id) for r in in_flight) or "none"
                raise UnexpectedReply(f"in_reply_to {msg.in_reply_to} answers no request in flight (in flight: {ids})",
                                      sent=sent, expected=expected, received=line)
            check_answers(msg, call.request, raw=line)
        except ProtocolError as exc:
            self._fail_all(exc)
            return False
        with self._lock:
            self._pending.pop(call.request.msg_id, None)
        call.reply = msg
        call.done.set()
        return True

    def _fail_all(self, error: ProtocolError | None, partial: bytes | None = None) -> None:
        with self._lock:
            calls = list(self._pending.values())
            self._pending.clear()
            if error is None:  # with nothing in flight nobody waits for the exit status (a clean shutdown)
                error = self._exited(calls[0].request if calls else None, partial, settle=bool(calls))
            if self._broken is None:
                self._broken = error
        for call in calls:
            call.error = error
            call.done.set()

    def _abandon(self, call: PendingCall) -> bool:
        """Give up on a call; True if its answer slipped in meanwhile (then it is not abandoned)."""
        with self._lock:
            if self._pending.pop(call.request.msg_id, None) is not None:
                self._abandoned.add(call.request.msg_id)
        return call.done.is_set()


def _held_files(stderr, proc) -> frozenset[str]:
    """How /proc/<pid>/fd names the run's private files: the adapter's stderr log and its stdio pipes."""
    names = set()
    for fileobj in (stderr, proc.stdin, proc.stdout):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            names.add(os.readlink(f"/proc/self/fd/{fileobj.fileno()}"))
    return frozenset(names)
