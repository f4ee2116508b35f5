"""Worker start to first provider request, for the reference runtime.

With an input already accepted (the control process saved it while no worker ran), a worker is
started and the time until the scripted provider receives the first request is read from the
provider's ledger: interpreter start, migrations, recovery scan, claim, admission, request.

    python benchmarks/impl_start_to_first_turn.py [--runs 5]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
from recoverykit.conformance.broker import FailpointBroker
from recoverykit.conformance.client import AdapterClient
from recoverykit.conformance.probe_tools import standard_probe_tools
from recoverykit.conformance.provider import ScriptedProvider

SCRIPT = {"scripts": [{"id": "b", "steps": [{"text": "done"}], "when_exhausted": "repeat_last"}]}


def one_run(tmp: Path) -> tuple[float, float]:
    env = {**os.environ, "RK_IMPL_WORKERS": "1"}
    with ScriptedProvider(SCRIPT, tmp / "ledger.jsonl") as provider, FailpointBroker(tmp) as broker, \
            AdapterClient([sys.executable, "-m", "recoverykit.impl"], tmp / "run", env=env) as client:
        client.handshake(data_dir=tmp / "data", provider_base_url=provider.base_url,
                         failpoint_socket=broker.address, probe_tools=standard_probe_tools(tmp / "w.jsonl"))
        client.call("start", failpoints="", clock_offset_s=0.0, host_id="bench")
        for p in client.call("processes").processes:  # no worker: the input waits, saved
            if p.role == "worker":
                proc = psutil.Process(p.pid)
                os.kill(p.pid, signal.SIGKILL)
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.wait(5)
        client.call("submit", session_id="s", text="[[rk-script:b]]", client_msg_id="m")
        t0 = time.time()
        client.call("start", failpoints="", clock_offset_s=0.0, host_id="bench")
        started = time.time() - t0
        client.request(client._make("quiesce", timeout_s=30.0))
        first = min(r["time"] for r in provider.records() if r["event"] == "request")
    return first - t0, started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    firsts, starts = [], []
    for i in range(args.runs):
        first, started = one_run(Path(tempfile.mkdtemp(prefix=f"rk-first-{i}-")))
        firsts.append(first)
        starts.append(started)
    print(f"runs: {args.runs}")
    print(f"worker start -> first provider request: median {statistics.median(firsts) * 1000:.0f} ms, "
          f"min {min(firsts) * 1000:.0f} ms, max {max(firsts) * 1000:.0f} ms")
    print(f"start request answered (worker ready) after: median {statistics.median(starts) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
