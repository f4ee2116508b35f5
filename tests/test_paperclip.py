"""The Paperclip task-retry profile: the reference's retry policy, the kit's disk inspection, the protocol records,
and the #19759 case end to end against the reference runtime (certify --only; the mutants are tests/test_mutants)."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest
from recoverykit.conformance import disk
from recoverykit.conformance.protocol_snapshot import Snapshot
from recoverykit.conformance.scenarios import SCENARIOS_BY_ID, all_scenarios
from recoverykit.impl import retry_policy
from recoverykit.model.catalogue import Profile


def test_the_policy_delays_jitter_window_and_budget():
    rng = random.Random(7)
    first = 1000.0
    for used, delay in enumerate(retry_policy.DELAYS_S):
        p = retry_policy.plan(used, first, first + 10, rng=rng)
        assert p is not None and p.attempt == used + 1 and abs(p.jitter) <= 0.2
        assert p.due_at == pytest.approx(first + 10 + delay * (1 + p.jitter))
    assert retry_policy.plan(5, first, first + 10, rng=rng) is None  # five retries, never a sixth
    assert retry_policy.plan(1, first, first + 1800, rng=rng) is None  # the window closed
    cooled = retry_policy.plan(1, first, first + 1800, cooldown_until=first + 2700, cooldown_source="x", rng=rng)
    assert cooled is not None and cooled.due_at == first + 2700  # a longer provider cooldown takes precedence
    short = retry_policy.plan(1, first, first + 10, cooldown_until=first + 11, rng=rng)
    assert short is not None and short.cooldown_until is None and short.due_at > first + 50  # the backoff is longer


def _git(*args: str, cwd: Path) -> None:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def test_the_kit_lists_attempts_and_worktrees_itself(tmp_path):
    task_dir = tmp_path / disk.ISOLATED / "acme" / "t1" / "r1"
    task_dir.mkdir(parents=True)
    _git("init", "-q", cwd=task_dir)
    (task_dir / "f").write_text("x")
    _git("add", "f", cwd=task_dir)
    _git("commit", "-q", "-m", "seed", cwd=task_dir)
    _git("worktree", "add", "-q", "--detach", str(tmp_path / "worktrees" / "w1"), cwd=task_dir)
    found = disk.scan(tmp_path)
    assert found["attempts"] == [f"{disk.ISOLATED}/acme/t1/r1"]
    assert found["repos"][f"{disk.ISOLATED}/acme/t1/r1"] == [f"{disk.ISOLATED}/acme/t1/r1", "worktrees/w1"]


def test_the_task_sections_are_additive():
    assert Snapshot.model_validate_json("{}").tasks is None  # an adapter of 1.2 sends none of them
    snap = Snapshot.model_validate_json('{"runs": [{"run_id": "r", "work_id": "w", "status": "queued", '
                                        '"retry_of": null, "idempotency_key": null}]}')
    assert snap.runs[0].generation is None  # the 1.3 fields of a run are optional


def test_the_paperclip_cases_are_in_the_one_catalogue():
    mine = {s.id for s in all_scenarios() if s.profile is Profile.PAPERCLIP_RETRY}
    assert mine == {"paperclip_19759", "paperclip_retry", "paperclip_schedule", "paperclip_cooldown"}
    assert SCENARIOS_BY_ID["paperclip_19759"].chaos.kick is not None  # chaos starts the task itself


def test_the_reference_passes_the_19759_case(tmp_path):
    import json
    import sys
    done = subprocess.run([sys.executable, "-m", "recoverykit", "certify", "--only", "paperclip_19759", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=240, check=False)
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    case = next(c for c in doc["cases"] if c["name"] == "paperclip_19759")
    assert case["verdict"] == "valid", done.stdout[-3000:]
    judged = {r["clause"]: r["verdict"] for r in case["results"]}
    for clause_id in ("RTY-12", "RTY-13", "RTY-14", "RTY-10", "RTY-19", "RTY-40"):
        assert judged[clause_id] == "valid"


def test_the_dry_run_reaches_settlement_only_through_the_kits_restart(tmp_path, monkeypatch):
    """coordinator.settle.* are reached only after a restart during bootstrap and a failed re-preparation: the
    dry run's own pass for them (``Chaos.restart_kick``) must reach them, or a whole chaos run is unknown."""
    from recoverykit.chaos.case_env import CaseEnv
    from recoverykit.chaos.cases import parse_case_id
    from recoverykit.chaos.dry_run import trace_scenario
    from recoverykit.chaos.runner import run_case
    monkeypatch.setenv("RECOVERYKIT_WARM_SPARES", "0")
    with CaseEnv(None, SCENARIOS_BY_ID["paperclip_19759"].provider_script(chaos=True),
                 base_dir=tmp_path / "probe") as env:
        declared = env.start().model_dump(mode="json")
    reached = trace_scenario(SCENARIOS_BY_ID["paperclip_19759"], None, declared, base_dir=tmp_path / "dry")
    assert reached.get("coordinator.settle.before") == 1 and reached.get("coordinator.settle.after") == 1, reached
    result = run_case(parse_case_id("paperclip_19759/coordinator.settle.before/1/worker_kill"), None,
                      base_dir=tmp_path / "runs", bundle_dir=tmp_path / "bundles")
    assert result["status"] == "passed", (result.get("why"), result["violations"][:3])
    assert result["reached"]["via"] == "failpoint"
    judged = {c["clause"]: c["verdict"] for c in result["clauses"]}
    assert judged["RTY-14"] == "valid"  # the click deferred while settling was woken by the taken-over settlement
