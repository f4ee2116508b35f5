"""The committed report of the reference runtime is re-validated from its stored results.

Like etcd's stored robustness reports: the evidence (results.json.gz of a whole systematic run) is
kept, the rendered report is rebuilt from it and must match byte for byte, and the evidence itself
must show what the reference runtime promises: every declared cell exercised, no violation, no
leftover process. Regenerate with ``python -m recoverykit.reports.reference results.json``.
"""

from __future__ import annotations

from recoverykit.reports import failure_acceptance, reference


def test_committed_report_matches_its_results():
    results = reference.load()
    for name, text in reference.rendered(results).items():
        assert (reference.FOLDER / name).read_text(encoding="utf-8") == text, f"{name} is stale: {reference.COMMAND}"


def test_reference_runtime_evidence():
    results = reference.load()
    assert results["adapter"]["name"] == "recoverykit-reference-runtime"
    assert results["verdict"] == "valid", results["reasons"]
    cov = results["coverage"]
    assert cov["percent"] == 100.0 and cov["declared_never_hit"] == [] and cov["unknown_cells"] == []
    assert set(cov["declared_points"]) >= set(results["adapter"]["failpoints"])
    assert all(c["status"] in ("passed", "not_implemented") for c in results["cases"])
    assert all(not c.get("leftovers") for c in results["cases"])
    report = failure_acceptance.build(results)
    assert report["failing"] == [] and failure_acceptance.validate(report, results) == []
