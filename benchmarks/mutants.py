"""The mutant kill matrix: every mutant of tests/mutants/ run through certify (and chaos), one table.

    python benchmarks/mutants.py                     # whole: bounded case, then all of certify, then chaos
    python benchmarks/mutants.py --bounded           # each mutant against the one case that should kill it (CI)
    python benchmarks/mutants.py --only a,b --json   # some mutants; the matrix as JSON on stdout
    python benchmarks/mutants.py --workers 2         # mutants at once (each runs its own processes)

Columns: mutant | killing case | clauses named | seconds to first detection | ran | stage. A row is a proof
only when the verdict names the mutant's own clause (``kills``) and its changed statement ran (``ran``); the
summary counts both, and the clauses whose checks they prove. It prints figures and exits 0 when every
mutant is killed naming its clause with its statement run, 1 otherwise (a survivor is a check that cannot
fail, or a mutant that proves nothing).

JSON: {"kit_version", "seconds", "mode", "mutants": [{name, clause, case, source, killed, kills_clause,
killing_case, clauses_named, seconds, ran, stage}], "proven_clauses": [...], "survivors": [...]}.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "mutants"))
import kill
import mutate


def _row(o: kill.Outcome) -> str:
    mark = "KILLED" if o.kills_clause and o.ran else ("dead" if not o.ran else
                                                       ("other" if o.killed else "SURVIVED"))
    named = ",".join(o.clauses_named[:4]) + ("..." if len(o.clauses_named) > 4 else "")
    return (f"{o.name:34} {o.clause:7} {mark:8} {o.killing_case[:44]:44} {named[:30]:30} {o.seconds:7.1f} "
            f"{'yes' if o.ran else 'NO':4} {o.stage}")


PROOFS = Path(__file__).resolve().parent.parent / "conformance" / "proofs.json"


def proofs_of(pairs) -> dict:
    """The proofs document from (clause, mutant name) pairs of kills."""
    clauses: dict[str, list[str]] = {}
    for clause, name in pairs:
        clauses.setdefault(clause, []).append(name)
    return {"about": "clause -> mutants of the reference runtime whose kill names it (tests/mutants/; written "
                     "by benchmarks/mutants.py --write-proofs, checked by tests/test_mutants.py)",
            "clauses": {c: sorted(n) for c, n in sorted(clauses.items())}}


def write_proofs(outcomes) -> None:
    doc = proofs_of((o.clause, o.name) for o in outcomes if o.kills_clause and o.ran)
    PROOFS.write_text(json.dumps(doc, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bounded", action="store_true", help="only each mutant's own case (what CI runs)")
    parser.add_argument("--only", default="", help="comma list of mutant names")
    parser.add_argument("--workers", type=int, default=2, help="mutants run at once")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chaos-scenarios", default="all",
                        help="scenarios chaos runs for a mutant certify passes ('' skips chaos)")
    parser.add_argument("--json", action="store_true", help="print the matrix as JSON on stdout")
    parser.add_argument("--keep", default=None, help="materialize mutants and keep results here")
    parser.add_argument("--write-proofs", action="store_true",
                        help="write conformance/proofs.json from the killed mutants (CI checks it stays true)")
    ns = parser.parse_args()
    mutants = mutate.load()
    if ns.only:
        wanted = {n.strip() for n in ns.only.split(",") if n.strip()}
        unknown = wanted - {m.name for m in mutants}
        if unknown:
            parser.error(f"no mutant named {', '.join(sorted(unknown))}")
        mutants = [m for m in mutants if m.name in wanted]
    work = Path(ns.keep) if ns.keep else Path(tempfile.mkdtemp(prefix="rk-mutants-"))
    began = time.perf_counter()
    log = sys.stderr if ns.json else sys.stdout
    print(f"{'mutant':34} {'clause':7} {'result':8} {'killing case':44} {'clauses named':30} {'seconds':>7} "
          f"{'ran':4} stage", file=log, flush=True)

    def one(m: mutate.Mutant) -> kill.Outcome:
        o = kill.run(m, work, seed=ns.seed, whole=not ns.bounded, chaos_scenarios=ns.chaos_scenarios or None)
        print(_row(o), file=log, flush=True)
        return o

    with ThreadPoolExecutor(max_workers=max(1, ns.workers)) as pool:
        outcomes = list(pool.map(one, mutants))
    wall = time.perf_counter() - began
    proven = sorted({o.clause for o in outcomes if o.kills_clause and o.ran})
    survivors = [o.name for o in outcomes if not (o.kills_clause and o.ran)]
    detect = sorted(o.seconds for o in outcomes if o.kills_clause)
    print(f"{len(outcomes)} mutants: {len(outcomes) - len(survivors)} killed naming their clause with their "
          f"statement run; {sum(o.killed for o in outcomes)} invalid at all; {len(proven)} clauses proven; "
          f"{sum(not o.ran for o in outcomes)} dead; wall {wall:.0f} s with {ns.workers} worker(s)"
          + (f"; time to first detection median {detect[len(detect) // 2]:.1f} s, max {detect[-1]:.1f} s"
             if detect else ""), file=log)
    if survivors:
        print(f"survivors: {', '.join(survivors)}", file=log)
    if ns.write_proofs:
        if ns.only:
            parser.error("--write-proofs needs the whole library (drop --only)")
        write_proofs(outcomes)
        print(f"wrote {PROOFS} ({len(proven)} clauses)", file=log)
    if ns.json:
        from recoverykit import __version__
        print(json.dumps({"kit_version": __version__, "seconds": round(wall, 1),
                          "mode": "bounded" if ns.bounded else "whole",
                          "mutants": [o.as_dict() for o in outcomes], "proven_clauses": proven,
                          "survivors": survivors}, indent=1))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
