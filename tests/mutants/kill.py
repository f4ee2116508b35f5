"""Run one mutant through the kit's own command line and say whether, where and how fast it was killed.

A mutant is *killed* when a case's verdict is ``invalid`` and names the mutant's clause among its invalid
clauses; an ``invalid`` naming only other clauses is recorded (``clauses_named``) but is not a kill of that
clause. Each case goes through ``python -m recoverykit certify|chaos`` exactly as a user's CI runs it, so the
kill matrix proves the product path, not an in-process shortcut.

Stages, in order, stopping at the first kill: ``bounded`` (the one case the mutant names: what CI runs),
then, for the whole matrix, ``certify`` (every scenario and the lockstep machine) and ``chaos`` (systematic,
limited to the scenarios the caller names). ``ran`` says whether the mutated statement ever executed; a mutant
whose statement never ran is dead code and proves nothing, killed or not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutate

CASE_TIMEOUT_S = 300.0


@dataclass
class Stage:
    stage: str  # bounded / certify / chaos
    argv: list[str]
    verdict: str
    invalid: list[str]  # clauses the stage found invalid
    killing_case: str  # the first case whose verdict names the mutant's clause (else the first invalid case)
    seconds: float
    exit: int
    message: str = ""


@dataclass
class Outcome:
    name: str
    clause: str
    case: str
    source: str
    killed: bool = False  # some stage said invalid
    kills_clause: bool = False  # ... naming the mutant's clause (the kill that proves that clause's check)
    killing_case: str = ""
    clauses_named: list[str] = field(default_factory=list)
    seconds: float = 0.0  # from the start of the mutant's first stage to the end of the killing one
    ran: bool = False
    stage: str = ""
    stages: list[Stage] = field(default_factory=list)

    def as_dict(self, with_stages: bool = False) -> dict:
        d = asdict(self)
        if not with_stages:
            d.pop("stages")
        d["seconds"] = round(self.seconds, 2)
        return d


def _kit(*args: str) -> list[str]:
    return [sys.executable, "-m", "recoverykit", *args]


def _invalid_of_certify(doc: dict, clause: str) -> tuple[list[str], str]:
    bad = sorted(c for c, v in doc.get("clauses", {}).items() if v.get("verdict") == "invalid")
    first = ""
    for case in doc.get("cases", []):
        named = {r.get("clause") for r in case.get("results", []) if r.get("verdict") == "invalid"}
        if case.get("verdict") == "invalid" and (clause in named or not first):
            first = case["name"]
            if clause in named:
                break
    return bad, first


def _invalid_of_chaos(doc: dict, clause: str) -> tuple[list[str], str]:
    bad = sorted(c for c, v in doc.get("clauses", {}).items() if v == "invalid")
    first = ""
    for case in doc.get("cases", []):
        named = {r.get("clause") for r in case.get("clauses", []) if r.get("verdict") == "invalid"}
        if case.get("verdict") == "invalid" and (clause in named or not first):
            first = case.get("id", "")
            if clause in named:
                break
    return bad, first


def run_stage(m: mutate.Mutant, dest: Path, stage: str, argv_tail: list[str], seed: int,
              timeout_s: float = CASE_TIMEOUT_S) -> Stage:
    """One ``recoverykit`` run of the mutant; its clauses found invalid and its first killing case."""
    adapter = mutate.adapter_command(m, dest)
    out = dest / f"out-{stage}"
    command = argv_tail[0]
    argv = _kit(*argv_tail, "--adapter", adapter, "--out", str(out), "--json")
    if command == "certify":
        argv += ["--seed", str(seed)]
    began = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Stage(stage, argv, "unknown", [], "", time.perf_counter() - began, -1,
                     f"no verdict within {timeout_s:.0f} s")
    seconds = time.perf_counter() - began
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        return Stage(stage, argv, "unknown", [], "", seconds, done.returncode,
                     f"no results document (exit {done.returncode}): {done.stderr[-400:]}")
    bad, first = (_invalid_of_certify if command == "certify" else _invalid_of_chaos)(doc, m.clause)
    verdict = doc.get("verdict", "unknown")
    why = _why_not_invalid(doc, done.stderr) if verdict != "invalid" else (
        "" if m.clause in bad else _why_not_the_clause(doc, m.clause, bad))
    return Stage(stage, argv, verdict, bad, first, seconds, done.returncode, why)


def _why_not_invalid(doc: dict, stderr: str) -> str:
    """What a run that killed nothing said about itself: its cases that were not valid, with their messages (so a
    survivor in CI can be told from a run that never got going), and the tail of its stderr."""
    cases = [f"{c.get('name') or c.get('id')}: {c.get('verdict')} {str(c.get('message') or c.get('why') or '')[:300]}"
             for c in doc.get("cases", []) if c.get("verdict") != "valid"]
    return "; ".join(cases[:3]) + (f"; stderr: {stderr[-600:]}" if stderr.strip() else "")


def _why_not_the_clause(doc: dict, clause: str, bad: list[str]) -> str:
    """What a run that broke other clauses said of the expected one and of those it broke, per case: a survivor
    in CI (checkpoint_replays_its_calls once broke CTX-04 and REC-13 instead of CTX-02) must be diagnosable from
    the failure text alone, since its run folder is gone with the CI machine."""
    said = []
    for case in doc.get("cases", []):
        for r in case.get("results", []):
            if r.get("clause") == clause or (r.get("clause") in bad and r.get("verdict") == "invalid"):
                said.append(f"{case.get('name')}: {r.get('clause')} {r.get('verdict')}: "
                            f"{str(r.get('text') or '')[:300]} {'; '.join(map(str, r.get('evidence') or []))[:400]}")
    return "; ".join(said[:6])


def bounded_argv(m: mutate.Mutant) -> list[str]:
    """The kit command tail of the one case that should kill ``m`` (``certify --only`` or ``chaos --replay``)."""
    kind, _, what = m.case.partition(":")
    return ["certify", "--only", what] if kind == "certify" else ["chaos", "--replay", what]


def run(m: mutate.Mutant, work: Path, *, seed: int = 1, whole: bool = False,
        chaos_scenarios: str | None = None) -> Outcome:
    """The mutant's outcome: its bounded case, then (``whole``) all of certify, then chaos on ``chaos_scenarios``."""
    dest = mutate.materialize(m, work / m.package)
    outcome = Outcome(m.name, m.clause, m.case, m.source)
    plan = [("bounded", bounded_argv(m))]
    if whole:
        plan.append(("certify", ["certify"]))
        if chaos_scenarios:
            plan.append(("chaos", ["chaos", "--scenarios", chaos_scenarios, "--quiet"]))
    elapsed = 0.0
    for stage, tail in plan:
        result = run_stage(m, dest, stage, tail, seed)
        outcome.stages.append(result)
        elapsed += result.seconds
        if result.verdict == "invalid" and not outcome.clauses_named:
            outcome.clauses_named = result.invalid
        if result.verdict == "invalid" and m.clause in result.invalid:
            outcome.kills_clause = True
            outcome.killing_case = f"{stage}:{result.killing_case}"
            outcome.clauses_named = result.invalid
            outcome.stage = stage
            outcome.seconds = elapsed
            break
    else:
        outcome.seconds = elapsed
        invalid = [s for s in outcome.stages if s.verdict == "invalid"]
        if invalid:
            outcome.killing_case = f"{invalid[0].stage}:{invalid[0].killing_case}"
    outcome.killed = any(s.verdict == "invalid" for s in outcome.stages)
    outcome.ran = mutate.ran(m, dest)
    return outcome
