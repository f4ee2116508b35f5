"""One chaos case's environment: private run dir, provider, broker, probe tools, adapter, history.

Everything a case starts is created here and torn down in ``close()``, whatever happened: the adapter
is shut down, every process carrying the case's run marker is SIGKILLed, and what still lives after
that is reported (``leftovers``) so a case can never pass while leaking a process. The run directory
is 0700; the provider binds 127.0.0.1; the failpoint broker is a Unix socket inside the run dir.

Every operation goes through ``op`` / ``op_async`` so the history the checker reads is the kit's own
record (invoke, then ok / fail / info), never the adapter's word. The suite's own environment
(``conformance.environment``) plays the same role for certify; this one adds the chaos runner's
needs (async operations across a kill, holds released in the background after the fault).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recoverykit.chaos import spares
from recoverykit.conformance.broker import FailpointBroker
from recoverykit.conformance.client import AdapterClient, PendingCall, start_timeout_s
from recoverykit.conformance.client_process import split_command
from recoverykit.conformance.errors import OperationFailed, ProtocolError
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.pacing import CHAOS_POINT, current
from recoverykit.conformance.probe_tools import standard_probe_tools
from recoverykit.conformance.protocol_rpcs import RPCS_BY_NAME
from recoverykit.conformance.provider import ScriptedProvider
from recoverykit.conformance.reaper import leftovers, new_marker, reap
from recoverykit.conformance.witness import WitnessLog, read_witness

DEFAULT_ADAPTER = [sys.executable, "-m", "recoverykit.impl"]
HOST_A, HOST_B = "chaos-host-a", "chaos-host-b"


def private_dir(base: str | os.PathLike | None, prefix: str) -> Path:
    """A fresh 0700 directory (mkdtemp already creates it 0700; chmod again in case of an odd umask)."""
    if base is not None:
        Path(base).mkdir(mode=0o700, parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    path.chmod(0o700)
    return path


def _reply_value(reply: Any) -> dict[str, Any]:
    data = reply.model_dump(mode="json") if hasattr(reply, "model_dump") else dict(reply)
    return {k: v for k, v in data.items() if k not in ("type", "msg_id", "in_reply_to")}


class CaseEnv:
    """Use as a context manager; ``close()`` leaves nothing behind and records what it had to reap."""

    def __init__(self, adapter: str | list[str] | None, script: dict, *, base_dir: str | os.PathLike | None = None,
                 timeout_s: float = CHAOS_POINT.seconds) -> None:
        self.pacing = current()  # the case's windows: ``timeout_s`` (chaos --timeout) and the others, scaled
        self.timeout_s = timeout_s = self.pacing(timeout_s)
        slow = max(self.pacing(start_timeout_s()), timeout_s * 3)
        self.adapter = adapter or DEFAULT_ADAPTER
        argv = split_command(self.adapter)
        spare = spares.POOL.take(argv, base_dir) if spares.enabled() else None
        self.run_dir = spare.run_dir if spare else private_dir(base_dir, "rkc-")
        self.marker = spare.marker if spare else new_marker()
        self.warm = spare is not None
        self.provider = ScriptedProvider(script, self.run_dir / "provider.ledger.jsonl")
        self.broker = FailpointBroker(self.run_dir)
        self.witness_path = self.run_dir / "witness.jsonl"
        self.tools = standard_probe_tools(self.witness_path, self.broker.address)
        self.recorder = Recorder(self.run_dir / "history.jsonl")
        if spare is not None:
            self.client = spare.client
            self.client.timeout_s, self.client.slow_timeout_s = timeout_s, slow
            self.client.pacing = self.pacing
        else:
            self.client = AdapterClient(argv, self.run_dir / "adapter", run_marker=self.marker,
                                        timeout_s=timeout_s, slow_timeout_s=slow, pacing=self.pacing)
        self._spare_for_next = (argv, base_dir) if spares.enabled() else None
        self._lock = threading.Lock()
        self._pending: list[tuple[Any, PendingCall, threading.Thread]] = []
        self._auto = threading.Event()  # set: the auto-release loop also releases failpoint pauses
        self._closing = threading.Event()
        # set by a restart kick (``Chaos.restart_kick``) once what it does while the case's point is held has been
        # answered (#19759: the click made while the settlement is held); the case's restart waits for it, bounded
        self.kick_ready = threading.Event()
        self._auto_thread: threading.Thread | None = None
        self.reaped: list[int] = []
        self.left: list[int] = []
        self.strays: list[int] = []
        self.init_ok = None

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self):
        if not self.warm:
            self.client.start()
        self.init_ok = self.client.handshake(data_dir=self.run_dir / "data", provider_base_url=self.provider.base_url,
                                             failpoint_socket=self.broker.address, probe_tools=self.tools)
        return self.init_ok

    def close(self) -> None:
        self._closing.set()
        self._auto.set()
        with contextlib.suppress(Exception):
            self.broker.release_all()
            self.provider.release(cut=True)
        with contextlib.suppress(Exception):
            self.client.close()
        self.strays = list(getattr(self.client, "strays", []))  # escaped the marker; killed by the client's close
        found = leftovers(self.marker)
        if found:  # a scan that found nothing needs no second scan to prove it
            report = reap(self.marker)
            self.reaped = [r.pid for r in report.killed]
            self.left = [r.pid for r in leftovers(self.marker)]
        for _, _call, thread in self._pending:
            thread.join(timeout=2)
        if self._auto_thread is not None:
            self._auto_thread.join(timeout=2)
        for closer in (self.provider.close, self.broker.close, self.recorder.close):
            with contextlib.suppress(Exception):
                closer()

    def __enter__(self) -> CaseEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def remove(self) -> None:
        shutil.rmtree(self.run_dir, ignore_errors=True)

    # --- operations, recorded -----------------------------------------------------------------

    def _invoke(self, f: str, value: dict[str, Any]):
        with self._lock:
            return self.recorder.invoke(f, value)

    def _complete(self, invocation, call: Callable[[], Any]) -> Any:
        try:
            reply = call()
        except OperationFailed as exc:
            with self._lock:
                self.recorder.complete(invocation, "fail" if exc.definite else "info",
                                       {"code": exc.code, "text": str(exc)[:500]})
            raise
        except ProtocolError as exc:
            with self._lock:
                self.recorder.complete(invocation, "info", {"error": type(exc).__name__, "text": str(exc)[:500]})
            raise
        with self._lock:
            self.recorder.complete(invocation, "ok", _reply_value(reply))
        return reply

    def request(self, f: str, **fields: Any):
        """Send one RPC and wait; recorded. Raises OperationFailed / ProtocolError like the client."""
        invocation = self._invoke(f, fields)

        def call():
            reply = self.client.request(self.client._make(f, **fields))
            if type(reply).__name__ == "ErrorReply":
                raise OperationFailed(f, reply.code, reply.text, reply.definite)
            return reply
        return self._complete(invocation, call)

    def request_async(self, f: str, **fields: Any) -> threading.Thread:
        """Send one RPC now and record its completion whenever it comes (it may be cut by a kill)."""
        invocation = self._invoke(f, fields)
        pending = self.client.send(self.client._make(f, **fields))
        result: dict[str, Any] = {}

        def wait() -> None:
            def call():
                reply = pending.wait()
                if type(reply).__name__ == "ErrorReply":
                    raise OperationFailed(f, reply.code, reply.text, reply.definite)
                return reply
            try:
                result["reply"] = self._complete(invocation, call)
            except (OperationFailed, ProtocolError) as exc:  # recorded in the history; kept for the caller
                result["error"] = exc

        thread = threading.Thread(target=wait, daemon=True, name=f"chaos-op-{f}")
        thread.result = result  # type: ignore[attr-defined]
        thread.start()
        self._pending.append((invocation, pending, thread))
        return thread

    def wait_pending(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout_s)
        for _, _, thread in list(self._pending):
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def fault(self, kind: str, **detail: Any) -> None:
        with self._lock:
            self.recorder.fault(kind, **detail)

    def processes(self) -> list[Any]:
        return list(self.client.call("processes").processes)

    def start_runtime(self, failpoints: str = "", clock_offset_s: float = 0.0, host_id: str = HOST_A) -> None:
        try:
            self.request("start", failpoints=failpoints, clock_offset_s=clock_offset_s, host_id=host_id)
        finally:
            self._launch_spare()

    def kit_restart(self, failpoints: str = "") -> None:
        """A restart the kit makes in the middle of a scenario's work (``Chaos.restart_kick``): the runtime's whole
        tree killed, holds in it released, the runtime started again with ``failpoints`` armed."""
        from recoverykit.chaos import restarts  # restarts imports this module

        restarts.tree_kill(self, "tree_kill")
        self.release_holds(cut_provider=True)
        self.start_runtime(failpoints=failpoints)

    def _launch_spare(self) -> None:
        """Top up the spares for later cases once this runtime is up: their imports then overlap this
        case's waits instead of competing with this runtime's own start."""
        if self._spare_for_next is not None:
            argv, base_dir = self._spare_for_next
            self._spare_for_next = None
            spares.POOL.top_up(argv, base_dir, private_dir)

    def quiesce(self, timeout_s: float) -> bool:
        reply = self.request("quiesce", timeout_s=timeout_s)
        return bool(reply.quiescent)

    def observe(self, quiescent: bool | None = None) -> dict[str, Any]:
        snapshot = self.client.observe().model_dump(mode="json")
        with self._lock:
            self.recorder.observe(snapshot, quiescent)
        return snapshot

    def witness(self) -> WitnessLog:
        return read_witness(self.witness_path) if self.witness_path.exists() else WitnessLog([], [], None)

    # --- holds --------------------------------------------------------------------------------

    def release_holds(self, *, cut_provider: bool) -> None:
        self.broker.release_all()
        self.provider.release(cut=cut_provider)

    def auto_release(self, *, broker: bool = True) -> None:
        """From now on release every new hold at once (a re-run probe must not hang the case).

        ``broker=False`` releases only the environment's provider holds and leaves failpoint pauses held:
        after the first crash of a recovery-point case, a held request of a session that had not been
        served yet would otherwise keep a worker busy while the case waits for the recovery point.
        """
        if broker:
            self._auto.set()
        if self._auto_thread is not None:
            return

        def loop() -> None:
            while not self._closing.is_set():
                with contextlib.suppress(Exception):
                    if self._auto.is_set() and self.broker.held():
                        self.broker.release_all()
                    if self.provider.held():
                        self.provider.release()
                self._closing.wait(0.05)

        self._auto_thread = threading.Thread(target=loop, daemon=True, name="chaos-auto-release")
        self._auto_thread.start()


def rpc_exists(name: str) -> bool:
    return name in RPCS_BY_NAME
