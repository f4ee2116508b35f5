"""docs/runtimes.md and reports/<runtime>/ are re-validated from their stored results (recoverykit.reports.runtimes).

Like tests/test_reports_reference.py: the committed matrix and each runtime's failure-acceptance report are rebuilt
from the stored results and must match byte for byte; and the evidence must still say what the docs claim of it.
Regenerate with ``python -m recoverykit.reports.runtimes [RUNTIME path/to/results.json]``.
"""

from __future__ import annotations

import re
from pathlib import Path

from recoverykit.model.catalogue import DURABLE_WRITE_POINTS
from recoverykit.reports import failure_acceptance, runtimes

ROOT = Path(__file__).resolve().parent.parent


def test_the_matrix_matches_the_stored_results():
    assert runtimes.DOC.read_text(encoding="utf-8") == runtimes.markdown(), f"docs/runtimes.md is stale: " \
                                                                             f"{runtimes.COMMAND}"


def test_each_runtime_report_matches_its_results():
    for runtime in runtimes.RUNTIMES:
        if runtime.name == "reference":
            continue  # tests/test_reports_reference.py
        results = runtime.load()
        for name, text in runtimes.rendered_report(runtime, results).items():
            assert (runtime.path / name).read_text(encoding="utf-8") == text, f"reports/{runtime.folder}/{name} " \
                                                                              f"is stale: {runtimes.COMMAND}"
        assert failure_acceptance.validate(failure_acceptance.build(results), results) == []


def test_every_replay_is_portable_and_names_a_stored_case():
    for runtime in runtimes.RUNTIMES:
        results = runtime.load()
        ids = {c["id"] for c in results["cases"]}
        for row in runtimes.rows(runtime, results):
            assert "/work/" not in row["replay"] and ".venv" not in row["replay"], row
            assert row["replay"].split()[3] in ids, row


def test_langgraph_run_exercised_the_durable_writes_and_every_invalid_clause_is_triaged():
    runtime = runtimes.named("langgraph")
    results = runtime.load()
    assert results["selection"]["durable_writes"] is True
    cells = {(c["point"], c["kind"]): c["status"] for c in results["coverage"]["cells"]}
    assert all(cells[(p, "tree_kill")] == "exercised" for p in DURABLE_WRITE_POINTS)
    durable = [c for c in results["cases"] if c["point"] in DURABLE_WRITE_POINTS]
    assert durable and all(c["status"] in ("passed", "failed") for c in durable), \
        [(c["id"], c.get("why")) for c in durable if c["status"] not in ("passed", "failed")]
    triage = (ROOT / runtime.triage).read_text(encoding="utf-8")
    section = triage.split("## Durable-write points", 1)[1]
    for clause, verdict in results["clauses"].items():
        if verdict == "invalid":
            assert re.search(rf"\b{re.escape(clause)}\b", section), f"{clause} is invalid but not triaged"


def test_every_invalid_dbos_clause_is_triaged_in_its_readme():
    runtime = runtimes.named("dbos")
    results = runtime.load()
    triage = (ROOT / runtime.triage).read_text(encoding="utf-8")
    invalid = [clause for clause, verdict in results["clauses"].items() if verdict == "invalid"]
    assert invalid, "the stored DBOS run is expected to carry its findings"
    for clause in invalid:
        assert re.search(rf"\b{re.escape(clause)}\b", triage), f"{clause} is invalid but not triaged"
