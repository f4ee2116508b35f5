"""Prints the adapter round trip: median and p95 of ``observe`` against the demo adapter, in microseconds.

The figure is the kit's fixed cost per protocol step (encode, pipe, the adapter's JSON, the reader
thread, strict pydantic validation of the reply). Run: ``python benchmarks/adapter_roundtrip.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from recoverykit.conformance import AdapterClient

DEMO = [sys.executable, str(Path(__file__).resolve().parent.parent / "examples" / "demo_adapter.py")]


def measure(client: AdapterClient, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        client.observe()
        samples.append((time.perf_counter() - start) * 1e6)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=2000, help="round trips per measurement")
    parser.add_argument("--work-items", type=int, default=20, help="work items in the snapshot")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, AdapterClient(DEMO, tmp) as client:
        client.handshake(data_dir=Path(tmp) / "data", provider_base_url="http://127.0.0.1:9/v1",
                         failpoint_socket=Path(tmp) / "fp.sock")
        measure(client, 50)  # warm-up
        empty = measure(client, args.n)
        for i in range(args.work_items):
            client.call("submit", session_id="s", text=f"input {i}", client_msg_id=f"c{i}")
        full = measure(client, args.n)
    for label, samples in (("observe, empty snapshot", empty), (f"observe, {args.work_items} work items", full)):
        cuts = statistics.quantiles(samples, n=20)
        print(f"{label}: median {statistics.median(samples):.0f} us, p95 {cuts[18]:.0f} us (n={len(samples)})")


if __name__ == "__main__":
    main()
