"""``recoverykit certify`` end to end against the mini runtime: the honest one passes, each bug is caught.

These start real processes (the mini runtime's adapter and worker, probe tools, the scripted
provider), so every test ends by proving that nothing it started is still running.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from env_helpers import leftovers
from recoverykit.conformance.certify import Options, certify
from recoverykit.conformance.scenarios import all_scenarios

ROOT = Path(__file__).resolve().parent.parent
MINI = f"{sys.executable} {ROOT / 'tests' / 'adapters' / 'mini_runtime.py'}"
BUGS = {"resume_paused": "RI-03", "rerun_unknown": "FA-15", "sum_usage": "USG-05"}

pytestmark = pytest.mark.slow


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recoverykit", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    out = tmp_path_factory.mktemp("honest")
    cert = certify(Options(adapter=MINI, out=out, seed=7, examples=1))
    yield cert
    assert leftovers(out) == []


def test_the_honest_mini_runtime_certifies_valid(honest):
    assert honest.verdict.value == "valid", [(c.name, c.verdict.value, c.message) for c in honest.cases]
    assert honest.exit_code == 0
    assert {c for c, v in honest.clauses.items() if v.value == "valid"} >= honest.required
    results = json.loads((honest.out / "results.json").read_text())
    assert results["verdict"] == "valid" and results["seed"] == 7
    assert results["adapter"]["name"] == "mini-runtime"
    assert not (honest.out / "bundles").exists()  # bundles only for failing cases


def test_undeclared_profiles_are_not_applicable_never_passed(honest):
    na = {c.name for c in honest.cases if c.verdict.value == "not_applicable"}
    by_profile = {s.id for s in all_scenarios() if s.profile.value != "chat_core"}  # the mini declares chat_core
    # no init_ok.storage, init_ok.resources, input-acceptance failpoints, init_ok.automatic_recovery_setting,
    # init_ok.legacy_paused_record, init_ok.pricing nor the recovery.repair.after failpoint, and protocol 1.0 (no
    # start.probe_tools):
    # never passed, not required
    by_capability = {"storage_unreadable", "migration_newer_schema", "resources_after_downtime", "input_acceptance",
                     "recovery_disabled", "legacy_paused_record", "stop_before_resource", "second_crash",
                     "effect_boundary", "pricing_history"}
    assert na == by_profile | by_capability
    assert honest.clauses["GOAL-01"].value == "not_applicable"
    assert honest.clauses["REC-01"].value == "not_applicable" and "REC-01" not in honest.required
    assert honest.clauses["RES-02"].value in ("unknown", "not_applicable") and "RES-02" not in honest.required
    assert "RI-06" not in honest.required and "INP-02" not in honest.required
    suite = ET.parse(honest.out / "junit.xml").getroot().find("testsuite")
    skipped = [tc for tc in suite.iter("testcase") if tc.find("skipped") is not None]
    assert {tc.get("name") for tc in skipped} == na
    assert all(tc.find("skipped").get("message") == ("capability not declared" if tc.get("name") in by_capability
                                                     else "profile not declared") for tc in skipped)
    assert suite.get("failures") == "0" and suite.get("tests") == str(len(honest.cases))


def test_a_stored_run_rechecks_with_the_history_checker(honest, tmp_path):
    run_dir = honest.out / "runs" / "chat_unknown_write"
    done = cli("check", str(run_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FA-15" in done.stdout


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_broken_adapter_is_caught_with_a_short_reproduction(bug, tmp_path):
    out = tmp_path / "out"
    done = cli("certify", "--adapter", f"{MINI} --bug {bug}", "--out", str(out), "--seed", "3", "--examples", "1",
               "--only", "lockstep", "--json")  # the scenarios are judged on the honest runtime's own test
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    results = json.loads(done.stdout)
    clause_id = BUGS[bug]
    assert results["verdict"] == "invalid"
    assert results["clauses"][clause_id]["verdict"] == "invalid"
    lockstep = next(c for c in results["cases"] if c["name"] == "lockstep")
    assert lockstep["verdict"] == "invalid" and clause_id in lockstep["message"]
    steps = [line for line in lockstep["program"] if line.startswith("state.") and "teardown" not in line]
    assert 1 <= len(steps) <= 5, lockstep["program"]
    bundle = Path(lockstep["bundle"])
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["seed"] == 3 and manifest["replay"].startswith("recoverykit certify --adapter")
    assert {"history.jsonl", "provider-ledger.jsonl", "adapter.stderr.log", "program.txt"} <= {
        p.name for p in bundle.iterdir()}
    assert (bundle / "data" / "state.db").exists()
    recheck = cli("check", str(bundle))
    assert recheck.returncode == 1 and clause_id in recheck.stdout
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    failed = {tc.get("name") for tc in suite.iter("testcase") if tc.find("failure") is not None}
    assert "lockstep" in failed
    assert leftovers(out) == []


def test_an_unknown_profile_is_a_usage_error():
    done = cli("certify", "--adapter", MINI, "--profile", "chat")
    assert done.returncode == 64, done.stderr
    assert "chat_core" in done.stderr and "Traceback" not in done.stderr


def test_an_unknown_case_is_a_usage_error():
    done = cli("certify", "--adapter", MINI, "--only", "no_such_case")
    assert done.returncode == 64 and "not a case" in done.stderr


def test_check_of_a_folder_without_history_is_a_usage_error(tmp_path):
    done = cli("check", str(tmp_path))
    assert done.returncode == 64, done.stderr
    assert "not a recoverykit bundle" in done.stderr


def test_a_required_clause_never_exercised_makes_the_verdict_unknown(tmp_path):
    done = cli("certify", "--adapter", MINI, "--only", "chat_read_tool", "--out", str(tmp_path), "--json")
    assert done.returncode == 2, done.stderr[-2000:]
    results = json.loads(done.stdout)
    assert results["verdict"] == "unknown"
    assert results["clauses"]["RI-03"] == {"verdict": "unknown", "required": True,  # nobody paused anything
                                           "unknown": {"class": "not_exercised",  # and the kit says so
                                                       "why": "no pause, end or stop_all was acknowledged"}}
    assert results["clauses"]["INP-01"]["verdict"] == "valid"
    assert leftovers(tmp_path) == []


def test_verdict_rules():
    from recoverykit.conformance.certify import verdict_of
    from recoverykit.model.catalogue import Verdict as V

    required = frozenset({"INP-01", "RI-03"})
    assert verdict_of({"INP-01": V.VALID, "RI-03": V.VALID, "GOAL-01": V.NOT_APPLICABLE}, required) is V.VALID
    assert verdict_of({"INP-01": V.VALID, "RI-03": V.UNKNOWN}, required) is V.UNKNOWN
    assert verdict_of({"INP-01": V.VALID}, required) is V.UNKNOWN
    assert verdict_of({"INP-01": V.VALID, "RI-03": V.VALID, "X-01": V.INVALID}, required) is V.INVALID


def test_the_default_adapter_is_the_bundled_reference_runtime():
    from recoverykit.conformance.certify import default_adapter

    assert default_adapter().endswith("-m recoverykit.impl") and sys.executable in default_adapter()


def test_an_adapter_that_cannot_start_is_a_usage_error(tmp_path):
    done = cli("certify", "--adapter", str(tmp_path / "no-such-adapter"), "--out", str(tmp_path / "out"))
    assert done.returncode == 64, done.stderr
    assert "was not found" in done.stderr and "Traceback" not in done.stderr


def test_a_run_reaps_every_process_by_its_marker_even_after_an_error(tmp_path):
    from recoverykit.conformance.environment import Run
    from recoverykit.conformance.reaper import leftovers as marked
    from recoverykit.conformance.scenarios import SCENARIOS_BY_ID, submit

    scenario = SCENARIOS_BY_ID["chat_long_tool"]
    with pytest.raises(RuntimeError, match="boom"), Run(MINI, tmp_path, scenario.provider_script()) as run:
        run.start()
        submit(run, "long")
        assert run.wait_witness(lambda e: e.tool == "probe_unknown", timeout_s=20)
        marker = run.marker
        assert marked(marker)  # the worker and the long-running probe carry the marker
        raise RuntimeError("boom")
    assert marked(marker) == []
    history = (tmp_path / "history.jsonl").read_text()
    assert '"f": "start"' in history and '"f": "submit"' in history


def test_a_declared_but_unimplemented_profile_is_unknown_not_passed(tmp_path):
    adapter = f"{MINI} --profiles chat_core,goals"
    done = cli("certify", "--adapter", adapter, "--profile", "goals", "--only", "goal_restart", "--out",
               str(tmp_path), "--json")
    assert done.returncode == 2, done.stderr[-2000:]
    results = json.loads(done.stdout)
    (case,) = results["cases"]
    assert case["verdict"] == "unknown" and results["clauses"]["GOAL-01"]["verdict"] == "unknown"
    assert leftovers(tmp_path) == []
