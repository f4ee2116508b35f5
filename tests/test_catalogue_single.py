"""One scenario catalogue: a scenario declared once reaches certify, chaos and the coverage matrix.

The fixture scenario below exists only in this test. It is added to ``conformance.scenarios.SCENARIOS``
(the one place scenarios are declared) and nowhere else; certify then runs it as a case, chaos's dry
run traces it against the reference runtime and enumerates cases for it, and the failure-acceptance
report aims its cells at it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from recoverykit.chaos import systematic
from recoverykit.chaos.cases import enumerate_cases
from recoverykit.chaos.shard import Shard
from recoverykit.conformance import scenarios
from recoverykit.conformance.certify import Options, certify
from recoverykit.conformance.scenarios import Chaos, Scenario, chaos_only_script, drive_read_tool
from recoverykit.model.catalogue import Profile, RestartKind

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Scenario("fixture_only_here", "a scenario this test adds to the catalogue", Profile.CHAT_CORE,
                   (chaos_only_script("fx", "probe_read"),), ("probe_read",), ("INP-01",), drive_read_tool,
                   Chaos(kinds=(RestartKind.TREE_KILL,), points=("tool.dispatch.after", "usage.persist.after"),
                         clauses=("FA-09",)))


@pytest.fixture
def with_fixture(monkeypatch):
    monkeypatch.setattr(scenarios, "SCENARIOS", (*scenarios.SCENARIOS, FIXTURE))
    return FIXTURE


def test_grep_finds_one_catalogue():
    found = subprocess.run(["grep", "-rln", "Scenario(", "conformance", "chaos"], cwd=ROOT, capture_output=True,
                           text=True).stdout.split()
    assert found == ["conformance/scenarios.py"], found


def test_a_scenario_added_only_to_the_catalogue_is_run_by_certify_and_by_chaos(with_fixture, tmp_path):
    cert = certify(Options(out=tmp_path / "certify", only=(FIXTURE.id,), seed=1))
    assert [c.name for c in cert.cases] == [FIXTURE.id]
    assert cert.cases[0].verdict.value == "valid", cert.cases[0].message

    declared = systematic.declare(None, tmp_path / "runs")
    trace = systematic.load_trace(None, None, declared, FIXTURE.id, tmp_path / "runs")
    assert trace.reached[FIXTURE.id]["tool.dispatch.after"] == 1  # what the runtime really did
    ids = [c.id for c in enumerate_cases(trace, FIXTURE.id)]
    assert ids == [f"{FIXTURE.id}/usage.persist.after/1/tree_kill", f"{FIXTURE.id}/usage.persist.after/2/tree_kill",
                   f"{FIXTURE.id}/tool.dispatch.after/1/tree_kill"]  # in the catalogue's order of points

    # and it shows in the coverage matrix: its cells are reachable (to be run), the others are not
    doc = systematic.results_document([], declared, mode="systematic", shard=Shard(1, 1),
                                      selection={"scenarios": FIXTURE.id, "points": None, "kinds": None},
                                      seed=0, started=0.0, wall_s=0.0, trace=trace)
    cells = {(c["point"], c["kind"]): c["status"] for c in doc["coverage"]["cells"]}
    assert cells[("tool.dispatch.after", "tree_kill")] == "not_selected"  # reachable, its case not run here
    assert cells[("tool.running", "tree_kill")] == "not_reachable"
    assert doc["dry_run"]["cases"] == 3


def test_every_certify_scenario_has_chaos_cells_or_says_why():
    for s in scenarios.all_scenarios():
        assert s.has_chaos or s.chaos.none, s.id
        if not s.has_chaos:
            assert len(s.chaos.none) > 20, f"{s.id}: say why it has no chaos cells"
