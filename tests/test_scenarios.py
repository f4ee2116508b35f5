"""The scenario catalogue as data: every scenario names real clauses, valid scripts and known tools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from recoverykit.conformance.provider_script import ProviderScript
from recoverykit.conformance.scenarios import (
    BOUNDARY_TOOLS,
    NO_SCENARIO_YET,
    SCENARIOS,
    SCENARIOS_BY_ID,
    required_clauses,
)
from recoverykit.model.catalogue import Profile
from recoverykit.model.contract import clause

ROOT = Path(__file__).resolve().parent.parent
PROBES = {"probe_read", "probe_idempotent", "probe_unknown", "probe_external"}  # the last: profile waits


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_a_scenario_names_real_clauses_scripts_and_tools(scenario):
    assert scenario.clauses, f"{scenario.id} exercises no clause"
    for clause_id in scenario.clauses:
        clause(clause_id)  # raises UnknownClause for a typo
    script = ProviderScript.model_validate(scenario.provider_script())
    assert script.scripts
    styles = {s.style_of(step) for s in script.scripts for step in s.steps}
    if "USG-05" in scenario.clauses:  # summing is visible only when usage comes in more than one chunk
        assert "cumulative" in styles, scenario.id
    if "none" in styles:  # with no usage reported, what it aims at is that usage ends unknown (USG-10), or that
        # unknown cost is never available balance under a hard budget (USG-16)
        assert {"USG-10", "USG-16"} & set(scenario.clauses) and "USG-05" not in scenario.clauses, scenario.id
    assert set(scenario.tools) <= PROBES | {name for name, _ in BOUNDARY_TOOLS}  # effect_boundary registers its own
    called = {call.name for s in script.scripts for step in s.steps for call in step.tool_calls}
    assert called <= set(scenario.tools)


def test_every_usage_style_is_used_by_some_scenario():
    """So no single way of reporting usage hides a runtime's other behaviour (and chaos gets each too)."""
    used: dict[str, set[str]] = {}
    for scenario in SCENARIOS:
        for chaos in (False, True):
            for s in ProviderScript.model_validate(scenario.provider_script(chaos=chaos)).scripts:
                for step in s.steps:
                    used.setdefault(s.style_of(step), set()).add(scenario.id)
    assert set(used) == {"final", "cumulative", "none"}
    assert all(any(SCENARIOS_BY_ID[i].profile is Profile.CHAT_CORE for i in ids) for ids in used.values())


def test_every_public_entry_point_has_a_scenario():
    assert len(SCENARIOS_BY_ID) == len(SCENARIOS)
    assert {s.profile for s in SCENARIOS} | set(NO_SCENARIO_YET) == set(Profile)
    assert not {s.profile for s in SCENARIOS} & set(NO_SCENARIO_YET), "a profile with a scenario is listed as without"


def test_a_declared_profile_without_a_scenario_requires_all_its_clauses(monkeypatch):
    """A runtime that declares a profile no scenario can judge yet (as waits was before issue 14) cannot be
    certified valid on it: every clause of it is required."""
    from recoverykit.conformance import scenarios
    assert required_clauses("waits") == {f"WAIT-0{i}" for i in range(1, 7)} | {"RI-02", "INP-01"}
    monkeypatch.setattr(scenarios, "SCENARIOS", tuple(s for s in SCENARIOS if s.profile is not Profile.WAITS))
    monkeypatch.setitem(scenarios.NO_SCENARIO_YET, Profile.WAITS, "no scenario (test)")
    assert required_clauses("waits") == {f"WAIT-0{i}" for i in range(1, 7)}
    chat = {s.id for s in SCENARIOS if s.profile is Profile.CHAT_CORE}
    assert chat >= {"chat_read_tool", "chat_unknown_write", "chat_long_tool", "multi_session", "pause_restart",
                    "stop_all_restart", "long_downtime", "sessions_together", "pause_then_restart",
                    "pause_during_recovery", "end_during_recovery", "input_during_recovery", "graceful_midwork"}


def test_required_clauses_of_chat_core_are_those_its_scenarios_exercise():
    required = required_clauses(Profile.CHAT_CORE)
    assert {"INP-01", "FA-15", "USG-05", "RI-02", "RI-03", "RI-05", "CTL-02", "CTL-03", "OWN-02"} <= required
    assert not any(c.startswith(("GOAL", "APR", "JOB", "RTY")) for c in required)
    goals = required_clauses("goals")
    assert {"GOAL-01", "GOAL-04", "ACC-05", "ACC-10", "USG-16", "RI-02"} <= goals
    assert not any(c.startswith(("APR", "JOB", "RTY", "WAIT")) for c in goals)


def test_a_scenario_applies_only_when_its_profile_is_declared():
    goal = SCENARIOS_BY_ID["goal_restart"]
    assert not goal.applies({"chat_core"})
    assert goal.applies({"chat_core", "goals"})


@pytest.mark.slow
def test_the_pytest_plugin_runs_scenarios_and_skips_undeclared_profiles(tmp_path):
    adapter = f"{sys.executable} {ROOT / 'tests' / 'adapters' / 'mini_runtime.py'}"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", f"--recoverykit-adapter={adapter}",
         f"--recoverykit-out={tmp_path / 'out'}", "-k", "chat_read_tool or goal_restart"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed, 1 skipped" in done.stdout
    assert "profile not declared" in done.stdout


@pytest.mark.slow
def test_the_pytest_plugin_fails_a_broken_adapter(tmp_path):
    adapter = f"{sys.executable} {ROOT / 'tests' / 'adapters' / 'mini_runtime.py'} --bug sum_usage"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--recoverykit-adapter={adapter}",
         "-k", "chat_read_tool"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "USG-05" in done.stdout


@pytest.mark.slow
def test_the_pytest_plugin_reports_an_accepted_finding_xfail_and_refuses_a_bad_baseline(tmp_path):
    adapter = f"{sys.executable} {ROOT / 'tests' / 'adapters' / 'mini_runtime.py'} --bug sum_usage"
    base = [sys.executable, "-m", "pytest", "-q", "-rx", "-p", "no:cacheprovider", f"--recoverykit-adapter={adapter}",
            "-k", "chat_read_tool"]
    done = subprocess.run([*base, "--recoverykit-accept=USG-05"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 xfailed" in done.stdout and "accepted finding: USG-05" in done.stdout
    (tmp_path / "bad.json").write_text("{")
    bad = subprocess.run([*base, f"--recoverykit-baseline={tmp_path / 'bad.json'}"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 4 and "cannot be read as JSON" in bad.stderr, bad.stdout + bad.stderr  # pytest's usage


def test_docs_name_every_required_clause_and_every_scenario():
    text = (ROOT / "docs" / "certify.md").read_text()
    for clause_id in required_clauses(Profile.CHAT_CORE):
        assert clause_id in text, f"docs/certify.md does not list required clause {clause_id}"
    for scenario in SCENARIOS:
        assert f"`{scenario.id}`" in text, f"docs/certify.md does not describe scenario {scenario.id}"
