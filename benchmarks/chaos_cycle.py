"""Chaos benchmark: cycle time, whole systematic run with 1 and 2 workers, time to first detection.

Prints figures; asserts nothing (speed targets live here, not in the tests). All measured in one run:

1. the cost of two bare interpreter starts (``python -c pass``, median of N), the floor any restart
   cycle pays: one start before the fault, one after;
2. the median chaos cycle (start, run to the point, kill, restart, recover, verify: the case's start
   to its verdict) of a representative case against the reference runtime, and its ratio to (1)
   (target: at most 2.5x), and the same with the teardown that follows (every process reaped):
   once as a systematic run executes it (the case adopts a warm spare adapter, ``chaos/spares.py``),
   once cold (the adapter's own start inside the cycle);
3. the wall time of the whole systematic run against the reference runtime with 1 and 2 pytest-xdist
   workers, and the median cycle over all of its cases;
4. for each broken mini runtime (tests/adapters/mini_runtime.py --bug ...): systematic mode's time
   and case count to the first detection, beside random mode's (seeded waves, capped).

    python benchmarks/chaos_cycle.py [--cycles 5] [--waves 20] [--quick] [--skip-full]

``--quick`` limits (3) to one scenario and three restart kinds, for a fast look.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from recoverykit.chaos import random_waves, spares, systematic
from recoverykit.chaos.cases import enumerate_cases, not_implemented_reason, parse_case_id
from recoverykit.chaos.runner import run_case
from recoverykit.reports.merge import write_all

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "adapters" / "mini_runtime.py"
CYCLE_CASE = "chat_unknown_write/tool.result.commit.before/1/tree_kill"
BUGS = ("rerun_unknown", "sum_usage", "resume_paused")


def bare_starts(n: int, *flags: str) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *flags, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return times


def environment() -> str:
    """What the figures depend on: an editable install pays an import hook in every `python -c pass`
    (the denominator) and, with PYTHONDONTWRITEBYTECODE, compiles the runtime from source in every
    adapter (the numerator); a regular install (README's main command) has neither."""
    import recoverykit

    location = Path(recoverykit.__path__[0]).resolve()
    editable = "site-packages" not in location.parts
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {load:.2f}; recoverykit "
            f"{'editable install' if editable else 'regular install'} at {location}; "
            f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}")


def cycles(n: int, base: Path, warm: bool) -> list[dict]:
    """n cycles of CYCLE_CASE; warm: as a systematic run does them (each adopts the spare adapter started
    during the one before; one extra first cycle starts the pool and is not counted)."""
    case = parse_case_id(CYCLE_CASE)
    out = []
    with spares.warm_spares() if warm else contextlib.nullcontext():
        for i in range(n + warm):
            result = run_case(case, None, base_dir=base)
            assert result["status"] == "passed", result
            assert result["adapter"]["warm_spare"] is (warm and i > 0), result["adapter"]
            out.append(result["timings"])
    return out[1:] if warm else out


def print_cycles(label: str, timings: list[dict], bare: float) -> float:
    """The cycle as the issue defines it (start, run to the point, kill, restart, recover, verify: case
    start to verdict), and with the teardown that follows (every process reaped, run dir removed)."""
    cycle = statistics.median(t["verified"] for t in timings)
    total = statistics.median(t["total"] for t in timings)
    print(f"chaos cycle, {label} ({CYCLE_CASE}), median of {len(timings)}: start to verdict {cycle * 1000:.0f} ms"
          f" = {cycle / (2 * bare):.2f}x two bare starts (target <= 2.5x); with teardown {total * 1000:.0f} ms"
          f" = {total / (2 * bare):.2f}x")
    marks = ("started", "reached", "restarted", "recovered", "verified", "total")
    print("  median time to " + ", ".join(f"{m} {statistics.median(t[m] for t in timings) * 1000:.0f}" for m in marks)
          + " ms")
    return cycle


def full_run(workers: int, base: Path, quick: bool) -> dict:
    """The whole systematic run through pytest-xdist, as `recoverykit chaos --workers N` runs it."""
    select = {"scenarios": "chat_unknown_write", "kinds": "tree_kill,worker_kill,normal_exit"} if quick else {}
    t0 = time.monotonic()
    out = base / f"full-{workers}"
    doc = systematic.run(None, workers=workers, out_dir=out, **select)  # workers >= 1: N xdist worker processes
    write_all(doc, out)  # results.json and the failure-acceptance report, as `recoverykit chaos --out` writes
    wall_s = time.monotonic() - t0
    print(f"whole systematic run with {workers} xdist workers (recoverykit chaos --workers {workers}"
          f"{' --scenarios chat_unknown_write --kinds tree_kill,worker_kill,normal_exit' if quick else ''}): "
          f"{wall_s:.1f} s wall for {len(doc['cases'])} cases")
    passed = [c["timings"] for c in doc["cases"] if c["status"] == "passed"]
    verdicts = sorted(t["verified"] for t in passed if "verified" in t)
    totals = sorted(t["total"] for t in passed)
    return {"out": str(out), "wall_s": wall_s, "cases": len(doc["cases"]), "verdict": doc["verdict"],
            "ran": len(totals), "median_cycle_s": statistics.median(verdicts) if verdicts else float("nan"),
            "median_total_s": statistics.median(totals) if totals else float("nan"),
            "p90_cycle_s": verdicts[int(0.9 * (len(verdicts) - 1))] if verdicts else float("nan"),
            "statuses": doc["statuses"], "coverage": doc["coverage"]["percent"],
            "leftovers": sum(len(c.get("leftovers") or []) for c in doc["cases"])}


def systematic_first_detection(bug: str, base: Path) -> dict:
    adapter = [sys.executable, str(MINI), "--bug", bug]
    declared = systematic.declare(adapter, base)
    t0, ran = time.monotonic(), 0
    trace = systematic.load_trace(None, adapter, declared, base_dir=base)  # part of the time to detection
    with spares.warm_spares():  # as a systematic run executes its cases
        for case in enumerate_cases(trace):
            if not_implemented_reason(case, declared["failpoints"], declared["restart_kinds"], declared["profiles"]):
                continue
            ran += 1
            result = run_case(case, adapter, base_dir=base)
            if result["status"] == "failed":
                return {"seconds": time.monotonic() - t0, "cases": ran, "case": case.id,
                        "clause": result["violations"][0].split(":")[0]}
    return {"seconds": time.monotonic() - t0, "cases": ran, "case": None, "clause": None}


def random_first_detection(bug: str, waves: int, seed: int, base: Path) -> dict:
    adapter = [sys.executable, str(MINI), "--bug", bug]
    t0 = time.monotonic()
    results = random_waves.run_waves(waves, seed, adapter, base_dir=base, stop_at_first=True)
    failed = [r for r in results if r["status"] == "failed"]
    return {"seconds": time.monotonic() - t0, "waves": len(results), "detected": bool(failed),
            "clause": failed[0]["violations"][0].split(":")[0] if failed else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--waves", type=int, default=20, help="cap on random waves per broken runtime")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-full", action="store_true", help="skip the whole systematic runs (3)")
    ns = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rk-bench-chaos-"))
    print(f"run directory: {base}")
    print(environment())
    # bare starts before and after the cycles, so that drift in this machine's speed hits both sides
    plain, isolated = bare_starts(11), bare_starts(11, "-I", "-S")
    warm = cycles(ns.cycles, base, warm=True)
    plain += bare_starts(11)
    isolated += bare_starts(11, "-I", "-S")
    bare = statistics.median(plain)
    print(f"two bare interpreter starts: {2 * bare * 1000:.1f} ms (median of {len(plain)} `python -c pass`, half "
          f"before and half after the warm cycles: {bare * 1000:.1f} ms; `python -I -S -c pass`, without site: "
          f"{statistics.median(isolated) * 1000:.1f} ms)")
    print_cycles("as a systematic run does it (warm spare adapter)", warm, bare)
    print_cycles("cold (the adapter starts inside the cycle)", cycles(ns.cycles, base, warm=False), bare)
    if not ns.skip_full:
        for workers in (1, 2):
            f = full_run(workers, base, ns.quick)
            print(f"whole systematic run{' (quick subset)' if ns.quick else ''}, {workers} xdist worker(s): "
                  f"{f['wall_s']:.1f} s for {f['cases']} cases; verdict {f['verdict']} {f['statuses']}; "
                  f"coverage {f['coverage']} %; leftover processes {f['leftovers']} (results: {f['out']})")
            print(f"  median cycle over its {f['ran']} cases that ran: start to verdict "
                  f"{f['median_cycle_s'] * 1000:.0f} ms ({f['median_cycle_s'] / (2 * bare):.1f}x two bare starts; "
                  f"p90 {f['p90_cycle_s'] * 1000:.0f} ms); with teardown {f['median_total_s'] * 1000:.0f} ms")
    print(f"time to first detection (broken mini runtimes; random capped at {ns.waves} waves, seed {ns.seed}):")
    for bug in BUGS:
        s = systematic_first_detection(bug, base)
        r = random_first_detection(bug, ns.waves, ns.seed, base)
        random_text = (f"{r['seconds']:.1f} s, wave {r['waves']} ({r['clause']})" if r["detected"]
                       else f"not detected in {r['waves']} waves ({r['seconds']:.1f} s)")
        print(f"  --bug {bug:<14} systematic: {s['seconds']:.1f} s, case {s['cases']} ({s['clause']}: {s['case']}); "
              f"random: {random_text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
