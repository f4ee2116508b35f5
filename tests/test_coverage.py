"""Coverage generated from the code (checks, evidence, mutants) and evidence labels in certify's verdicts."""

from __future__ import annotations

import json

from env_helpers import cli_in_process
from recoverykit.conformance.certify import Case, Certification, _write
from recoverykit.conformance.checker import KIT, SELF_REPORTED, ClauseResult
from recoverykit.model.catalogue import Verdict
from recoverykit.reports.coverage import coverage, registry


def test_the_registry_is_read_from_the_checks_themselves():
    reg = registry()
    own02 = {x["check"]: x["evidence"] for x in reg["OWN-02"]}
    assert own02["checks_owners.check_one_sender"] == KIT
    assert own02["checker.check_generations"] == SELF_REPORTED
    assert any(x["kind"] == "scenario" for x in reg["CTL-02"])
    assert "RTY-32" not in reg  # no check names it: no entry, never a claim


def test_valid_without_a_killing_mutant_is_unproven_and_not_judged():
    doc = coverage({"OWN-02": "valid", "FA-13": "valid", "RTY-32": "unknown"})
    rows = {r["clause"]: r for r in doc["clauses"]}
    assert rows["OWN-02"]["status"] == "judged" and rows["OWN-02"]["killing_mutants"]
    assert rows["OWN-02"]["evidence"] == KIT
    assert rows["FA-13"]["status"] in ("unproven", "judged")  # judged only once a mutant proves its check
    assert rows["RTY-32"]["status"] == "no check"
    chat = doc["profiles"]["chat_core"]
    assert chat["judged"] <= chat["proven"] and chat["judged"] <= chat["valid"]


def test_strict_evidence_makes_a_self_reported_only_required_clause_unknown(tmp_path):
    def cert(strict):
        c = Certification("x", tmp_path / str(strict), 1, ("chat_core",), frozenset({"INP-01", "OWN-02"}),
                          strict_evidence=strict)
        (tmp_path / str(strict)).mkdir()
        c.cases = [Case("s", "scenario", Verdict.VALID, ("INP-01", "OWN-02"), [
            ClauseResult("INP-01", Verdict.VALID, "held", basis=SELF_REPORTED),
            ClauseResult("OWN-02", Verdict.VALID, "held", basis=KIT)])]
        _write(c, 0.0)
        return c, json.loads((tmp_path / str(strict) / "results.json").read_text())

    lax, doc = cert(False)
    assert lax.clauses["INP-01"] is Verdict.VALID and doc["clauses"]["INP-01"]["evidence"] == SELF_REPORTED
    assert doc["clauses"]["OWN-02"]["evidence"] == KIT and doc["clauses"]["OWN-02"]["proof"] == "mutant"
    strict, doc = cert(True)
    assert strict.clauses["INP-01"] is Verdict.UNKNOWN and strict.clauses["OWN-02"] is Verdict.VALID
    assert strict.verdict is Verdict.UNKNOWN and doc["strict_evidence"] is True


def test_coverage_of_a_corrupt_results_file_is_a_usage_error(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text("{not json")
    code, output = cli_in_process("contract", "coverage", "--results", str(bad))
    assert code == 64 and "not a certify results.json" in output


def test_a_clause_the_kit_does_not_judge_says_why_and_the_list_stays_true():
    """NOT_JUDGED names clauses without a check that can fail; one that gets a killing mutant must leave it, and a
    clause no outside check can judge does not count among the observable ones."""
    from recoverykit.conformance.proofs import proven
    from recoverykit.model.contract import NOT_JUDGED, clause

    stale = sorted(set(NOT_JUDGED) & set(proven()))
    assert not stale, f"proven by a mutant, yet listed as not judged: {stale}"
    for clause_id, nj in NOT_JUDGED.items():
        assert clause(clause_id) and len(nj.reason) > 40
    rows = {r["clause"]: r for r in coverage({})["clauses"]}
    assert rows["REC-07"]["observable"] is False and rows["REC-07"]["why_not_judged"]
    assert rows["CTX-05"]["observable"] is True and rows["CTX-05"]["why_not_judged"]
    assert rows["OWN-02"]["why_not_judged"] is None
