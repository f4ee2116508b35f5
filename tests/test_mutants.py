"""The bounded kill matrix in CI: each mutant of tests/mutants/ against the one case that should kill it.

A check that stops failing breaks CI here: the mutant must come out ``invalid`` naming its own clause, and its
changed statement must have run (else the mutant is dead code and its "kill" proves nothing). The whole matrix
(certify, then chaos) is ``python benchmarks/mutants.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "mutants"))
import kill
import mutate

MUTANTS = mutate.load()


def test_the_library_holds_at_least_thirty_mutants_with_unique_names():
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    assert len(MUTANTS) >= 30, f"only {len(MUTANTS)} mutants"


def test_every_mutant_materializes_and_compiles(tmp_path):
    for m in MUTANTS:
        dest = mutate.materialize(m, tmp_path / m.name)
        assert (dest / m.package / m.file).read_text().count(f".hit({m.name!r})") == 1


@pytest.mark.parametrize("m", MUTANTS, ids=[m.name for m in MUTANTS])
def test_the_mutant_is_killed_naming_its_clause(m, tmp_path):
    outcome = kill.run(m, tmp_path / "1")
    stage = outcome.stages[0]
    if outcome.ran and not outcome.kills_clause and stage.verdict == "invalid":
        # Caught (invalid), but through a neighbouring clause: a mutant of a timing-dependent path can show its
        # breakage there in an unlucky interleaving (undelivered_completion_requeued once faulted in its re-run and
        # broke REC-03 with FA-09 unjudged; 1 of 5 CI runs, 0 of 4 alone). One more run must name its own clause; a
        # mutant the kit called valid or unknown is never run again (D101).
        outcome = kill.run(m, tmp_path / "2")
        stage = outcome.stages[0]
    assert outcome.ran, f"{m.name}: the mutated statement never ran in {m.case}; it proves nothing"
    assert outcome.kills_clause, (
        f"{m.name} survived {m.case}: verdict {stage.verdict}, invalid clauses {stage.invalid}, expected "
        f"{m.clause} invalid. {stage.message}\nreplay: {' '.join(stage.argv)}")


def test_the_shipped_proofs_name_exactly_the_library_s_mutants():
    """conformance/proofs.json is what certify and coverage call proven; each entry is a mutant the tests above
    kill naming that clause, so a mutant dropped, renamed or retargeted must be re-proven and re-written
    (python benchmarks/mutants.py --bounded --write-proofs)."""
    from recoverykit.conformance.proofs import PROOFS
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import mutants as matrix

    expected = matrix.proofs_of((m.clause, m.name) for m in MUTANTS)
    assert json.loads(PROOFS.read_text())["clauses"] == expected["clauses"]


def test_a_survivor_that_broke_other_clauses_says_what_the_expected_one_said(tmp_path, monkeypatch):
    """CI once showed only "verdict invalid, invalid clauses ['CTX-04', 'FA-01', 'REC-13'], expected CTX-02
    invalid." with an empty message: the flake could not be diagnosed once the CI machine was gone. The stage now
    carries the expected clause's own verdict and text and the texts of the clauses that did break."""
    doc = {"verdict": "invalid", "clauses": {"CTX-02": {"verdict": "valid"}, "REC-13": {"verdict": "invalid"}},
           "cases": [{"name": "repair_twice", "verdict": "invalid", "results": [
               {"clause": "CTX-02", "verdict": "valid", "text": "held CTX-02 (1 call(s) committed)", "evidence": []},
               {"clause": "REC-13", "verdict": "invalid", "text": "broke REC-13",
                "evidence": ["pid 7 sent a new attempt while pid 6's attempt was unanswered"]}]}]}

    class Done:
        returncode, stdout, stderr = 1, json.dumps(doc), ""

    monkeypatch.setattr(kill.subprocess, "run", lambda *a, **k: Done())
    monkeypatch.setattr(kill.mutate, "adapter_command", lambda m, dest: "unused")
    m = mutate.by_name("checkpoint_replays_its_calls")
    stage = kill.run_stage(m, tmp_path, "bounded", kill.bounded_argv(m), 1)
    assert stage.invalid == ["REC-13"]
    assert "CTX-02 valid: held CTX-02" in stage.message
    assert "pid 7 sent a new attempt while pid 6's attempt was unanswered" in stage.message
