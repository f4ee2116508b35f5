"""Wall time of the default ``recoverykit certify`` (target: under 90 s on a 2-core machine), and flakiness.

    python benchmarks/certify_wall.py                  # one default run: prints wall seconds and the verdict
    python benchmarks/certify_wall.py --seeds 20       # seeds 1..20 in a row: prints every failing seed/clause
    python benchmarks/certify_wall.py --seeds 20 --reuse-out   # every seed into one --out (earlier runs move aside)
    python benchmarks/certify_wall.py --adapter "python tests/adapters/mini_runtime.py"

It prints figures; it asserts nothing (speed is a target, not a test). Each run goes through the real
command line, exactly as a user runs it, into a fresh results directory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def certify_once(adapter: str | None, seed: int, out: Path, extra: list[str]) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "recoverykit", "certify", "--seed", str(seed), "--out", str(out), "--json", *extra]
    if adapter:
        argv += ["--adapter", adapter]
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - began
    try:
        results = json.loads(done.stdout)
    except ValueError:
        results = {"verdict": f"no results (exit {done.returncode}): {done.stderr[-500:]}", "clauses": {}, "cases": []}
    results["exit"] = done.returncode
    return wall, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", default=None, help="adapter command (default: the reference runtime)")
    parser.add_argument("--seeds", type=int, default=1, help="run seeds 1..N in a row and report failures")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--out", default=None, help="keep results here (default: a temp dir)")
    parser.add_argument("--reuse-out", action="store_true",
                        help="every seed into the same --out, as replays into one results directory do")
    ns, extra = parser.parse_known_args()
    base = Path(ns.out or tempfile.mkdtemp(prefix="rk-certify-bench-"))
    walls, failures = [], []
    for seed in range(ns.first_seed, ns.first_seed + ns.seeds):
        out = base / "reused" if ns.reuse_out else base / f"seed-{seed}"
        wall, results = certify_once(ns.adapter, seed, out, extra)
        walls.append(wall)
        bad = {c: v["verdict"] for c, v in results.get("clauses", {}).items() if v["verdict"] in ("invalid", "unknown")
               and (v.get("required") or v["verdict"] == "invalid")}
        cases = {c["name"]: c["seconds"] for c in results.get("cases", []) if c.get("seconds")}
        print(f"seed {seed}: {results['verdict']} (exit {results['exit']}) in {wall:.1f} s wall; "
              f"cases: {', '.join(f'{k} {v:.1f}s' for k, v in cases.items())}", flush=True)
        if results["verdict"] != "valid":
            failures.append((seed, bad, [c["message"][:300] for c in results.get("cases", [])
                                         if c["verdict"] in ("invalid", "unknown")]))
    print(f"certify wall time: median {sorted(walls)[len(walls) // 2]:.1f} s, max {max(walls):.1f} s over "
          f"{len(walls)} run(s) (target: under 90 s); results under {base}")
    print(f"{len(walls) - len(failures)}/{len(walls)} seeds valid" + (" (one reused --out)" if ns.reuse_out else ""))
    for seed, bad, messages in failures:
        print(f"  seed {seed}: {bad}")
        for m in messages:
            print(f"    {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
