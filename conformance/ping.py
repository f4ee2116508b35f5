"""``ping``: the smallest end-to-end check of an adapter (handshake, observe, shutdown).

It starts no provider and no runtime: the addresses it hands over in ``init`` lead nowhere, which is
fine because an adapter must not use them before ``start``. The verdict follows the kit's rule:
a protocol break is invalid, silence or a refused observe is unknown, never a pass.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from recoverykit.conformance import client_process
from recoverykit.conformance.client import AdapterClient
from recoverykit.conformance.errors import AdapterCommandError, OperationFailed, ProtocolError
from recoverykit.conformance.protocol_envelope import MAX_LINE_BYTES
from recoverykit.model.catalogue import Verdict

UNUSED_PROVIDER = "http://127.0.0.1:9/v1"  # the discard port: ping starts no provider


@dataclass
class PingResult:
    verdict: Verdict
    lines: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code


def ping(command: str, *, timeout_s: float = 10.0, out: str | Path | None = None,
         max_line_bytes: int | None = None) -> PingResult:
    """Handshake, observe and shut an adapter down; every process it started is gone on return.

    Without ``out`` the run directory is temporary and removed after a valid ping; after any other
    verdict it is kept, so the adapter's stderr log and the message record can be read.
    """
    client_process.split_command(command)  # a bad command is a usage error before anything is created
    run_dir = Path(out) if out else Path(tempfile.mkdtemp(prefix="rk-ping-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    client = AdapterClient(command, run_dir, timeout_s=timeout_s, slow_timeout_s=max(timeout_s, 10.0),
                           max_line_bytes=max_line_bytes or MAX_LINE_BYTES)
    result = PingResult(Verdict.UNKNOWN)
    try:
        with client:
            try:
                _exchange(client, run_dir, result)
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
    if not out and result.verdict is Verdict.VALID:
        shutil.rmtree(run_dir, ignore_errors=True)
    if out or result.verdict is not Verdict.VALID:
        result.lines.append(f"kept: {run_dir / 'adapter.messages.jsonl'} and {run_dir / 'adapter.stderr.log'}")
    return result


def _exchange(client: AdapterClient, run_dir: Path, result: PingResult) -> None:
    init_ok = client.handshake(data_dir=run_dir / "data", provider_base_url=UNUSED_PROVIDER,
                               failpoint_socket=run_dir / "failpoints.sock")
    result.lines.append(f"adapter: {init_ok.name} {init_ok.version} (protocol {init_ok.protocol_version})")
    result.lines.append(f"profiles: {', '.join(init_ok.profiles) or '(none)'}")
    result.lines.append(f"restart kinds: {', '.join(init_ok.restart_kinds) or '(none)'}")
    result.lines.append(f"failpoints: {len(init_ok.failpoints)}; observes: {', '.join(init_ok.observes) or '(none)'}")
    snapshot = client.observe()
    counts = {name: len(value) for name, value in snapshot if value is not None}
    result.lines.append("snapshot: " + (", ".join(f"{k}={v}" for k, v in counts.items()) or "(no sections)"))
    client.call("shutdown")
    result.verdict = Verdict.VALID
    result.lines.append("valid: the adapter speaks recoverykit adapter protocol " + init_ok.protocol_version)
