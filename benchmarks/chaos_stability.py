"""Chaos stability benchmark: the same systematic run N times, and every case whose status changed.

A case whose status differs between identical runs is flaky: either the runtime's recovery depends on
timing or the case's own assumptions do (issue 11, defect 16: a recovery case that went not_reached in
2 of 5 replays). A full run hides such a case when another case covers its coverage cell, so this
benchmark compares case by case. All runs happen in this one process invocation, against the
reference runtime unless ``--adapter`` says otherwise, with the same selection each time.

Prints, per run: verdict, case count, passed / unknown / invalid counts (unknown: not_reached and
error; invalid: failed; not_implemented cases are counted apart), seconds, leftover processes; then
every case whose status differs between runs (its id and its status in each run, with the reason of
each status that is not passed), and a final line ``stable: K of M cases same status in N of N runs``.

Exits 0 when every case had the same status in every run, 1 when any case differed (or a run could not
finish: its cases count as ``missing``), 64 for a bad selection, 143 / 130 when SIGTERM / SIGINT stopped it
(every process of the run reaped, the runs that finished compared first).

    python benchmarks/chaos_stability.py [--runs 5] [--workers 2] [--scenarios ..] [--points ..]
                                         [--kinds ..] [--shard K/N] [--timeout 20] [--out DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from recoverykit.chaos import systematic
from recoverykit.chaos.cases import enumerate_cases
from recoverykit.chaos.dry_run import Trace
from recoverykit.chaos.shard import parse_shard
from recoverykit.model.errors import Interrupted, RecoveryKitError
from recoverykit.signals import finish, handled

UNKNOWN = ("not_reached", "error")
INVALID = ("failed",)
MISSING = "missing"  # the case has no result in that run (the run itself failed)
EXIT_STABLE, EXIT_UNSTABLE, EXIT_USAGE = 0, 1, 64


def one_run(index: int, ns: argparse.Namespace, base: Path) -> dict[str, Any]:
    """One whole systematic run; a summary and every case's status (never raises for a run that broke)."""
    out = base / f"run-{index}"
    t0 = time.monotonic()
    try:
        doc = systematic.run(ns.adapter, scenarios=ns.scenarios, points=ns.points, kinds=ns.kinds,
                             shard=parse_shard(ns.shard), workers=ns.workers, out_dir=out, timeout_s=ns.timeout)
    except Exception as exc:  # a run that broke is reported, and its cases count as missing
        return {"run": index, "verdict": f"run failed: {type(exc).__name__}: {exc}"[:500], "cases": {},
                "why": {}, "seconds": time.monotonic() - t0, "out": str(out),
                "traceback": traceback.format_exc()[-2000:], "counts": {}, "leftovers": 0}
    seconds = time.monotonic() - t0
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
    statuses = {c["id"]: c["status"] for c in doc["cases"]}
    counts = {"passed": sum(s == "passed" for s in statuses.values()),
              "unknown": sum(s in UNKNOWN for s in statuses.values()),
              "invalid": sum(s in INVALID for s in statuses.values()),
              "not_implemented": sum(s == "not_implemented" for s in statuses.values())}
    return {"run": index, "verdict": doc["verdict"], "cases": statuses, "counts": counts, "seconds": seconds,
            "why": {c["id"]: str(c.get("why") or "; ".join(c.get("violations") or []))[:300]
                    for c in doc["cases"] if c["status"] != "passed"},
            "leftovers": sum(len(c.get("leftovers") or []) for c in doc["cases"]), "out": str(out)}


def differing(runs: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(every case id seen in any run, in first-seen order; the ids whose status is not the same in all)."""
    ids: dict[str, None] = {}
    for r in runs:
        ids.update(dict.fromkeys(r["cases"]))
    differ = [i for i in ids if len({r["cases"].get(i, MISSING) for r in runs}) > 1]
    return list(ids), differ


def print_report(runs: list[dict[str, Any]], ids: list[str], differ: list[str]) -> None:
    for r in runs:
        c = r["counts"]
        extra = f", not implemented {c['not_implemented']}" if c.get("not_implemented") else ""
        print(f"run {r['run']}: verdict {r['verdict']}, {len(r['cases'])} cases: passed {c.get('passed', 0)}, "
              f"unknown {c.get('unknown', 0)}, invalid {c.get('invalid', 0)}{extra}; {r['seconds']:.1f} s; "
              f"leftover processes {r['leftovers']} (results: {r['out']})")
    if differ:
        print(f"cases whose status differs between runs ({len(differ)}):")
        for case_id in differ:
            per_run = ", ".join(f"run {r['run']} {r['cases'].get(case_id, MISSING)}" for r in runs)
            print(f"  {case_id}: {per_run}")
            for r in runs:
                if case_id in r["why"]:
                    print(f"    run {r['run']}: {r['why'][case_id]}")
    else:
        print("cases whose status differs between runs: none")
    n = len(runs)
    print(f"stable: {len(ids) - len(differ)} of {len(ids)} cases same status in {n} of {n} runs")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="how many whole systematic runs (default 5)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers per run; 0: in this process")
    parser.add_argument("--adapter", default=None, help="adapter command (default: the reference runtime)")
    parser.add_argument("--scenarios", default=None, help="a comma list of scenarios (default all)")
    parser.add_argument("--points", default=None, help="a comma list of interruption points (default all)")
    parser.add_argument("--kinds", default=None, help="a comma list of restart kinds (default all)")
    parser.add_argument("--shard", default=None, help="K/N: only that part of the case list, in every run")
    parser.add_argument("--timeout", type=float, default=20.0, help="per-case point / reply timeout, seconds")
    parser.add_argument("--out", type=Path, default=None, help="keep each run's results here (run-1, run-2, ...)")
    parser.add_argument("--json", action="store_true", help="also print the per-run summaries as JSON")
    ns = parser.parse_args(argv)
    if ns.runs < 1 or ns.workers < 0:
        parser.error("--runs must be at least 1 and --workers at least 0")
    try:  # refuse a bad selection before the first run, not after it
        enumerate_cases(Trace({}), ns.scenarios, ns.points, ns.kinds)  # the names; each run's dry run gives the list
        parse_shard(ns.shard)
    except RecoveryKitError as exc:
        print(f"chaos_stability: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if ns.out is not None and ns.out.exists() and any(ns.out.iterdir()):
        print(f"chaos_stability: --out {ns.out} is not empty; give a new directory", file=sys.stderr)
        return EXIT_USAGE
    base = ns.out or Path(tempfile.mkdtemp(prefix="rk-bench-stability-"))
    base.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{ns.runs} systematic runs (each with its own dry run), {ns.workers} xdist worker(s) each; "
          f"{os.cpu_count()} CPUs, load {load:.2f}; results under {base}", flush=True)
    runs: list[dict[str, Any]] = []
    try:
        with handled():  # SIGTERM / SIGINT: reap the run's processes, compare the runs that finished, exit 143 / 130
            for index in range(1, ns.runs + 1):
                runs.append(one_run(index, ns, base))
                r = runs[-1]
                print(f"  run {index} done: {r['verdict']} in {r['seconds']:.1f} s", flush=True)
    except Interrupted as exc:
        if runs:
            print_report(runs, *differing(runs))
        finish(exc, base)
    ids, differ = differing(runs)
    print_report(runs, ids, differ)
    if ns.json:
        print(json.dumps({"runs": [{k: v for k, v in r.items() if k != "cases"} for r in runs],
                          "differ": {i: [r["cases"].get(i, MISSING) for r in runs] for i in differ},
                          "stable": len(ids) - len(differ), "cases": len(ids)}, indent=1))
    return EXIT_UNSTABLE if differ or any(not r["cases"] for r in runs) else EXIT_STABLE


if __name__ == "__main__":
    sys.exit(main())
