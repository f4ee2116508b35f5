"""CPU used by an idle reference runtime: every process it runs, over N idle seconds.

An idle runtime must use no measurable CPU (issue 4: no busy waiting). Starts the runtime through
the kit's adapter client against the scripted provider, lets one request finish, then measures the
CPU seconds (user + system) of the adapter and every process below it (its zygote, the control
process, the workers) over the window.

    python benchmarks/impl_idle_cpu.py [--seconds 10] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil
from recoverykit.conformance.broker import FailpointBroker
from recoverykit.conformance.client import AdapterClient
from recoverykit.conformance.probe_tools import standard_probe_tools
from recoverykit.conformance.provider import ScriptedProvider

SCRIPT = {"scripts": [{"id": "b", "steps": [{"tool_calls": [{"name": "probe_read", "arguments": {}}]},
                                            {"text": "done"}]}]}


def cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rk-idle-"))
    env = {**os.environ, "RK_IMPL_WORKERS": str(args.workers)}
    with ScriptedProvider(SCRIPT, tmp / "ledger.jsonl") as provider, FailpointBroker(tmp) as broker, \
            AdapterClient([sys.executable, "-m", "recoverykit.impl"], tmp / "run", env=env) as client:
        client.handshake(data_dir=tmp / "data", provider_base_url=provider.base_url,
                         failpoint_socket=broker.address, probe_tools=standard_probe_tools(tmp / "w.jsonl"))
        client.call("start", failpoints="", clock_offset_s=0.0, host_id="bench")
        client.call("submit", session_id="s", text="[[rk-script:b]]", client_msg_id="m")
        client.request(client._make("quiesce", timeout_s=30.0))
        pids = [client.pid] + [p.pid for p in psutil.Process(client.pid).children(recursive=True)]
        time.sleep(1.0)  # let start-up work settle before the window opens
        before, t0 = cpu(pids), time.monotonic()
        time.sleep(args.seconds)
        used, elapsed = cpu(pids) - before, time.monotonic() - t0
    print(f"idle runtime: {len(pids)} processes (adapter, zygote and its standbys, control, {args.workers} workers)")
    print(f"window: {elapsed:.1f} s")
    print(f"cpu used: {used * 1000:.1f} ms ({used / elapsed * 100:.3f} % of one core)")


if __name__ == "__main__":
    main()
