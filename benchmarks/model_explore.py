"""Print how fast bounded exploration of the model runs: states, transitions, wall time, states/s.

Usage: python benchmarks/model_explore.py [--depth 6] [--deeper 7] [--repeat 3]

Figures are printed, never asserted (tests carry no timing). The timed part is the breadth-first
walk with every invariant checked; building the networkx graph is timed separately. Issue 2's
target is at least 50,000 abstract states per second on the project's 2-core machine; the
machine's load average is printed next to the figures because other jobs skew them.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from recoverykit.model.explore import explore


def run(depth: int, repeat: int) -> None:
    best = None
    for _ in range(repeat):
        result = explore(depth, build_graph=False)
        if best is None or result.elapsed_s < best.elapsed_s:
            best = result
    started = time.perf_counter()
    graph = best.graph
    graph_s = time.perf_counter() - started
    print(f"depth {depth}: {best.states:,} states, {best.transitions:,} transitions, "
          f"{len(best.violations)} violations, walk {best.elapsed_s:.2f} s (best of {repeat}), "
          f"{best.states_per_second:,.0f} states/s, {best.transitions / best.elapsed_s:,.0f} transitions/s, "
          f"CPU {best.cpu_s:.2f} s = {best.states / best.cpu_s:,.0f} states per CPU-second; "
          f"networkx graph ({graph.number_of_nodes():,} nodes, {graph.number_of_edges():,} edges) "
          f"{graph_s:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--deeper", type=int, default=7, help="also run this depth once (0 to skip)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("n/a",)
    print(f"python {platform.python_version()} on {os.cpu_count()} cpu(s), load average {load[0]:.2f}")
    run(args.depth, args.repeat)
    if args.deeper and args.deeper > args.depth:
        run(args.deeper, 1)


if __name__ == "__main__":
    main()
