"""Chaos against real processes: replay of one case, and the broken mini runtimes caught systematically.

Kept to a handful of representative cases (each one starts and kills real processes); the full
systematic run is benchmarks/chaos_cycle.py's business.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from recoverykit.chaos import systematic
from recoverykit.conformance.bundle import recheck

MINI = Path(__file__).resolve().parent / "adapters" / "mini_runtime.py"
CASE = "chat_unknown_write/tool.result.commit.before/1/tree_kill"


def mini(bug: str = "") -> list[str]:
    return [sys.executable, str(MINI), *(["--bug", bug] if bug else [])]


def test_replay_one_case_against_the_reference_runtime(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "recoverykit", "chaos", "--replay", CASE, "--json", "--quiet",
                           "--out", str(out)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["mode"] == "replay" and [c["id"] for c in doc["cases"]] == [CASE]
    (result,) = doc["cases"]
    assert result["status"] == "passed" and result["leftovers"] == [] and result["killed"]
    assert result["reached"]["via"] == "failpoint"
    assert {c["clause"] for c in result["clauses"]} >= {"INP-01", "FA-15", "USG-03", "FA-01"}
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert not (out / "runs").exists()  # passing cases leave no run directory behind
    for name in ("results.json", "report.json", "report.md", "report.html"):
        assert (out / name).exists()


@pytest.mark.parametrize(("bug", "select", "clause"), [
    ("rerun_unknown", {"points": "tool.running", "kinds": "tree_kill"}, "FA-15"),
    ("sum_usage", {"points": "tool.result.commit.before", "kinds": "tree_kill"}, "USG-05"),
    ("resume_paused", {"scenarios": "pause_then_restart", "points": "tool.result.commit.before",
                       "kinds": "tree_kill"}, "FA-14"),
])
def test_systematic_mode_catches_each_broken_mini_runtime(tmp_path, bug, select, clause):
    scenarios = select.get("scenarios", "chat_unknown_write")
    honest = systematic.run(mini(), out_dir=tmp_path / "honest", scenarios=scenarios, points=select["points"],
                            kinds=select["kinds"])
    assert honest["verdict"] == "valid", honest["reasons"]
    broken = systematic.run(mini(bug), out_dir=tmp_path / "broken", scenarios=scenarios, points=select["points"],
                            kinds=select["kinds"])
    assert broken["verdict"] == "invalid", [(c["id"], c["status"], c.get("why"), c["reached"],
                                             [x for x in c["clauses"] if x["verdict"] != "valid"])
                                            for c in broken["cases"]]
    (failed,) = [c for c in broken["cases"] if c["status"] == "failed"]
    assert any(v.startswith(f"broke {clause}:") for v in failed["violations"]), failed["violations"]
    bundle = Path(failed["bundle"])
    assert (bundle / "REPLAY").read_text().strip() == failed["replay"]
    assert f"--replay {failed['id']}" in failed["replay"] and "--bug" in failed["replay"]
    for name in ("bundle.json", "history.jsonl", "provider-ledger.jsonl", "adapter.stderr.log"):
        assert (bundle / name).exists(), name
    assert json.loads((bundle / "bundle.json").read_text())["case"] == failed["id"]
    if clause != "FA-14":  # the model prediction is chaos's own; the stored history re-checks the rest
        verdict, results = recheck(bundle)  # certify's bundle format: `recoverykit check` re-judges it
        assert verdict.value == "invalid" and any(r.clause_id == clause for r in results if r.verdict == verdict)


def test_undeclared_points_are_not_implemented_not_passed(tmp_path):
    doc = systematic.run(mini(), out_dir=tmp_path, scenarios="chat_unknown_write", points="input.accept.after",
                         kinds="tree_kill")
    (case,) = doc["cases"]
    assert case["status"] == "not_implemented" and "input.accept.after" in case["why"]
    cell = next(c for c in doc["coverage"]["cells"] if (c["point"], c["kind"]) == ("input.accept.after", "tree_kill"))
    assert cell["status"] == "not_implemented"
    assert doc["verdict"] == "unknown"  # nothing was exercised: never a pass


def test_random_waves_use_the_same_checker(tmp_path):
    done = subprocess.run([sys.executable, "-m", "recoverykit", "chaos", "--adapter", " ".join(mini("sum_usage")),
                           "--random", "2", "--seed", "5", "--json", "--quiet", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=180)
    doc = json.loads(done.stdout)
    assert doc["mode"] == "random" and [c["id"] for c in doc["cases"]] == ["random/5/0", "random/5/1"]
    assert all(c["leftovers"] == [] for c in doc["cases"])
    # summed cumulative usage shows in any wave whose stream completes after the kills
    assert done.returncode == 1 and any("broke USG-05" in v for c in doc["cases"] for v in c["violations"])
