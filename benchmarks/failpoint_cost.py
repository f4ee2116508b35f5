"""What a failpoint costs: an unarmed point (ns per call) and a pause -> report -> continue round trip.

Run: python benchmarks/failpoint_cost.py [--calls N] [--pauses N]. Prints figures; asserts nothing.
The round trip is measured from the runtime's side (the failpoint call's duration) while a kit thread
waits for each hit and releases it, over the real Unix socket.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import timeit

from recoverykit.conformance import failpoint_client as client
from recoverykit.conformance.broker import FailpointBroker


def unarmed_ns(calls: int) -> tuple[float, float, float]:
    client.reload({client.ENV_FAILPOINTS: "tool.dispatch.after=pause;usage.persist.after=1*off"})
    fp = client.failpoint
    loop = min(timeit.repeat("for _ in r: pass", globals={"r": range(calls)}, number=1, repeat=5))
    unarmed = min(timeit.repeat("for _ in r: fp('tool.result.commit.before', 'w')",
                                globals={"r": range(calls), "fp": fp}, number=1, repeat=5))
    client.reload({client.ENV_FAILPOINTS: "tool.result.commit.before=1*off"})  # armed, chain used up: off
    fp("tool.result.commit.before")
    off = min(timeit.repeat("for _ in r: fp('tool.result.commit.before', 'w')",
                            globals={"r": range(calls), "fp": fp}, number=1, repeat=5))
    client.reload({})
    return loop / calls * 1e9, unarmed / calls * 1e9, off / calls * 1e9


def round_trip_us(pauses: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="rkb-") as run_dir, FailpointBroker(run_dir) as broker:
        client.reload({client.ENV_FAILPOINTS: "bench.point=pause", client.ENV_FAILPOINT_SOCKET: broker.path})

        def kit() -> None:
            last = 0
            for _ in range(pauses):
                hit = broker.wait_for_hit("bench.point", timeout=30, after=last, held=True)
                broker.release(hit)
                last = hit.seq

        releaser = threading.Thread(target=kit)
        releaser.start()
        durations = []
        for i in range(pauses):
            start = time.perf_counter()
            client.failpoint("bench.point", f"w{i}")
            durations.append((time.perf_counter() - start) * 1e6)
        releaser.join()
        client.reload({})
        return durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--pauses", type=int, default=500)
    ns = parser.parse_args()
    loop, unarmed, off = unarmed_ns(ns.calls)
    print(f"unarmed point:         {unarmed:7.1f} ns/call  "
          f"({unarmed - loop:6.1f} ns over an empty loop of {loop:.1f} ns)")
    print(f"armed, chain used up:  {off:7.1f} ns/call  (lock + count; the point is off)")
    durations = sorted(round_trip_us(ns.pauses))
    p95 = durations[int(0.95 * (len(durations) - 1))]
    print(f"pause -> report -> continue over the Unix socket ({ns.pauses} pauses): "
          f"median {statistics.median(durations):.1f} us, p95 {p95:.1f} us, max {durations[-1]:.1f} us")


if __name__ == "__main__":
    main()
