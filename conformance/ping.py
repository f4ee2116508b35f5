"""``ping``: the smallest end-to-end check of an adapter (handshake, observe, shutdown).

By default it starts no provider and no runtime: the addresses it hands over in ``init`` lead
nowhere, which is fine because an adapter must not use them before ``start``. With ``start=True``
it also starts the kit's scripted provider (with no scripts) and the runtime, lists the runtime's
processes, observes once and shuts down, so a runtime that crashes at start is told in one
paragraph pointing at its stderr log instead of as "not judged" lines in certify. Every process
carrying the run marker is reaped on return. The verdict follows the kit's rule: a protocol break is
invalid, silence, a refused start or observe, no runtime process listed after start (a restart would kill
nothing), or a runtime process dead right after start is unknown, never a pass.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from recoverykit.conformance import client_process
from recoverykit.conformance.client import AdapterClient
from recoverykit.conformance.errors import AdapterCommandError, OperationFailed, ProtocolError
from recoverykit.conformance.killer import ProcRef
from recoverykit.conformance.probe_tools import standard_probe_tools
from recoverykit.conformance.protocol_envelope import MAX_LINE_BYTES
from recoverykit.conformance.provider import ScriptedProvider
from recoverykit.conformance.reaper import new_marker, reap
from recoverykit.model.catalogue import Verdict

UNUSED_PROVIDER = "http://127.0.0.1:9/v1"  # the discard port: ping starts no provider
START_SETTLE_S = 0.5
TAIL = "\x00stderr-tail\x00"  # where the last line of the adapter's stderr goes, once the log is complete
PING_SCRIPT = {"scripts": [{"id": "ping", "steps": [{"text": "pong"}]}]}  # nothing submits: never asked


@dataclass
class PingResult:
    verdict: Verdict
    lines: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code


def ping(command: str, *, timeout_s: float = 10.0, out: str | Path | None = None,
         max_line_bytes: int | None = None, start: bool = False) -> PingResult:
    """Handshake, observe and shut an adapter down; every process it started is gone on return.

    Without ``out`` the run directory is temporary and removed after a valid ping; after any other
    verdict it is kept, so the adapter's stderr log and the message record can be read.
    """
    client_process.split_command(command)  # a bad command is a usage error before anything is created
    run_dir = Path(out) if out else Path(tempfile.mkdtemp(prefix="rk-ping-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    marker = new_marker()
    client = AdapterClient(command, run_dir, timeout_s=timeout_s, slow_timeout_s=max(timeout_s, 10.0),
                           max_line_bytes=max_line_bytes or MAX_LINE_BYTES, run_marker=marker)
    result = PingResult(Verdict.UNKNOWN)
    provider = ScriptedProvider(PING_SCRIPT, run_dir / "provider-ledger.jsonl") if start else None
    try:
        with client:
            try:
                _exchange(client, run_dir, result, provider)
            except ProtocolError as exc:
                result.verdict, result.error = exc.verdict, str(exc)
            except OperationFailed as exc:
                result.verdict = Verdict.UNKNOWN
                result.error = (f"{exc} The messages were well-formed, but the check could not be completed, "
                                "so the verdict is unknown. Read docs/adapter-guide.md.")
    except AdapterCommandError:
        if not out:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    finally:
        reap(marker)
        if result.error and TAIL in result.error:  # the log is whole once the adapter's stderr pipe is closed
            result.error = result.error.replace(TAIL, _last_line(run_dir / "adapter.stderr.log"))
        if provider is not None:
            provider.close()
    if not out and result.verdict is Verdict.VALID:
        shutil.rmtree(run_dir, ignore_errors=True)
    if out or result.verdict is not Verdict.VALID:
        result.lines.append(f"kept: {run_dir / 'adapter.messages.jsonl'} and {run_dir / 'adapter.stderr.log'}")
    return result


def _exchange(client: AdapterClient, run_dir: Path, result: PingResult, provider: ScriptedProvider | None) -> None:
    init_ok = client.handshake(
        data_dir=run_dir / "data", provider_base_url=provider.base_url if provider else UNUSED_PROVIDER,
        failpoint_socket=run_dir / "failpoints.sock",
        **({"probe_tools": standard_probe_tools(run_dir / "witness.jsonl")} if provider else {}))
    result.lines.append(f"adapter: {init_ok.name} {init_ok.version} (protocol {init_ok.protocol_version})")
    result.lines.append(f"profiles: {', '.join(init_ok.profiles) or '(none)'}")
    result.lines.append(f"restart kinds: {', '.join(init_ok.restart_kinds) or '(none)'}")
    result.lines.append(f"failpoints: {len(init_ok.failpoints)}; observes: {', '.join(init_ok.observes) or '(none)'}")
    if provider is not None and not _start(client, run_dir, result):
        return
    snapshot = client.observe()
    counts = {name: len(value) for name, value in snapshot if isinstance(value, list)}
    result.lines.append("snapshot: " + (", ".join(f"{k}={v}" for k, v in counts.items()) or "(no sections)"))
    client.call("shutdown")
    result.verdict = Verdict.VALID
    result.lines.append("valid: the adapter speaks recoverykit adapter protocol " + init_ok.protocol_version)


def _start(client: AdapterClient, run_dir: Path, result: PingResult) -> bool:
    """Start the runtime and see its processes alive; False (with the one-paragraph error) if not."""
    log = run_dir / "adapter.stderr.log"
    try:
        client.call("start", failpoints="", clock_offset_s=0.0, host_id="host-a")
    except OperationFailed as exc:
        result.verdict = Verdict.UNKNOWN
        result.error = (f"The runtime did not start: {exc} The handshake was well-formed, but nothing could be "
                        f"checked, so the verdict is unknown.{TAIL} Read the adapter's stderr in {log} "
                        f"and the runtime's own files in {run_dir / 'data'}.")
        return False
    time.sleep(START_SETTLE_S)  # a runtime that dies at start usually dies within its first moments
    listed = client.call("processes").processes
    dead = [f"{p.role} {p.pid}" for p in listed if not _alive(p.pid, p.create_time)]
    result.lines.append(f"started: {len(listed)} runtime process(es) listed"
                        + (f", {len(dead)} already dead" if dead else ", all alive"))
    if not listed:
        result.verdict = Verdict.UNKNOWN
        result.error = ("The runtime started, but `processes` listed no process: every restart kind would kill "
                        "nothing, so certify's and chaos's restart cases would prove nothing about recovery and end "
                        "unknown (\"killed nothing\"). List the runtime's processes with their roles (control, "
                        "worker, tool), as docs/adapter-guide.md says for `processes`; the verdict is unknown."
                        f"{TAIL} Read the adapter's stderr in {log}.")
        return False
    if dead:
        result.verdict = Verdict.UNKNOWN
        result.error = (f"The runtime crashed at start: `start` was answered, but {', '.join(dead)} listed by "
                        f"`processes` {START_SETTLE_S:g} s later is not alive. Nothing could be checked, so the "
                        f"verdict is unknown.{TAIL} Read the adapter's stderr in {log} and the "
                        f"runtime's own files in {run_dir / 'data'}.")
        return False
    return True


def _alive(pid: int, create_time: float) -> bool:
    return ProcRef(pid, create_time).alive()  # (alive across a clock step too: killer.same_start)


def _last_line(log: Path) -> str:
    """' Its stderr ends: "..."' (clipped, control characters shown escaped), or '' when it wrote nothing."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - 4096))
            lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    if not lines:
        return ""
    shown = lines[-1][-300:].encode("unicode_escape").decode("ascii")
    return f' Its stderr ends: "{shown}".'
