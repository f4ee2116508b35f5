"""#19759's mutants under chaos: systematic mode beside random waves of the same budget, measured in one run.

Seed 001 says Paperclip's own restart-chaos waves never reproduced #19759 (the race needs a restart during the
Retry's bootstrap); only unit tests did. This prints, for each mutant of the two #19759 bugs (and any other mutant
named with ``--mutants``), against the one scenario ``paperclip_19759``:

- systematic mode: every chaos case of the scenario (each interruption point x hit x restart kind the dry run of
  that mutant shows), in order: cases run, cases that failed, the first failing case, its clause, and the time to
  it;
- random mode: as many seeded waves as systematic mode ran cases (the same budget, counted in runs), each killing
  the runtime one to three times at random moments of the same scenario's chaos kick: waves that failed, the first,
  its clause, and the time to it.

Prints figures; asserts nothing.

    python benchmarks/waves_vs_systematic_19759.py [--mutants worktree_base_19759,unsettled_claim_19759] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from recoverykit.chaos import random_waves, spares, systematic
from recoverykit.chaos.cases import enumerate_cases, not_implemented_reason
from recoverykit.chaos.runner import run_case

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "mutants"))
import mutate  # noqa: E402  (tests/mutants is not a package)

SCENARIO = "paperclip_19759"
MUTANTS = ("worktree_base_19759", "unsettled_claim_19759")


def _clause(result: dict) -> str | None:
    """Every clause the run's violations name (``broke RTY-13: ...``), in order."""
    named = [v.split(":")[0].removeprefix("broke ").strip() for v in result.get("violations") or []]
    return ", ".join(dict.fromkeys(named)) or None


def systematic_run(adapter: str, base: Path) -> dict:
    declared = systematic.declare(adapter, base)
    t0 = time.monotonic()
    trace = systematic.load_trace(None, adapter, declared, scenarios=[SCENARIO], base_dir=base)
    ran, failed, first = 0, 0, None
    with spares.warm_spares():
        for case in enumerate_cases(trace, scenarios=[SCENARIO]):
            if not_implemented_reason(case, declared["failpoints"], declared["restart_kinds"], declared["profiles"]):
                continue
            ran += 1
            result = run_case(case, adapter, base_dir=base)
            if result["status"] == "failed":
                failed += 1
                if first is None:
                    first = {"case": case.id, "clause": _clause(result), "seconds": time.monotonic() - t0,
                             "after": ran}
    return {"cases": ran, "failed": failed, "first": first, "seconds": time.monotonic() - t0}


def random_run(adapter: str, waves: int, seed: int, base: Path) -> dict:
    t0 = time.monotonic()
    results = random_waves.run_waves(waves, seed, adapter, base_dir=base, scenario_id=SCENARIO)
    failed = [i for i, r in enumerate(results) if r["status"] == "failed"]
    first = None
    if failed:
        r = results[failed[0]]
        first = {"case": r["id"], "clause": _clause(r), "after": failed[0] + 1}
    errors = sum(r["status"] == "error" for r in results)
    return {"waves": len(results), "failed": len(failed), "errors": errors, "first": first,
            "seconds": time.monotonic() - t0}


def _first(first: dict | None) -> str:
    return "never" if first is None else f"run {first['after']}: {first['case']} ({first['clause']})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", default=",".join(MUTANTS), help="comma list of mutant names")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random waves")
    ns = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rk-waves-19759-"))
    print(f"scenario {SCENARIO}; random waves get as many runs as systematic mode's cases (seed {ns.seed})")
    print(f"{'mutant':26} {'mode':11} {'runs':>5} {'failed':>6} {'seconds':>8}  first detection")
    for name in [n.strip() for n in ns.mutants.split(",") if n.strip()]:
        m = mutate.by_name(name)
        dest = mutate.materialize(m, base / name)
        adapter = mutate.adapter_command(m, dest)
        s = systematic_run(adapter, base / name)
        print(f"{name:26} {'systematic':11} {s['cases']:5d} {s['failed']:6d} {s['seconds']:8.1f}  {_first(s['first'])}",
              flush=True)
        r = random_run(adapter, s["cases"], ns.seed, base / name)
        errors = f" ({r['errors']} waves ended in error)" if r["errors"] else ""
        print(f"{name:26} {'random':11} {r['waves']:5d} {r['failed']:6d} {r['seconds']:8.1f}  {_first(r['first'])}"
              f"{errors}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
