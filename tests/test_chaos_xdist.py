"""Scale-out through pytest-xdist: the same results as in process, failures, shards, the plugin on its own.

Small selections against the mini runtime (a case costs well under a second there); the whole
systematic run with 1 and 2 xdist workers is benchmarks/chaos_cycle.py's business.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
from recoverykit.chaos import systematic
from recoverykit.conformance.reaper import ENV_RUN_MARKER

MINI = Path(__file__).resolve().parent / "adapters" / "mini_runtime.py"
# mini declares tool.result.commit.before but not input.accept.after: two passed, two not implemented
SELECT = {"scenarios": "chat_unknown_write", "points": "tool.result.commit.before,input.accept.after",
          "kinds": "tree_kill,worker_kill"}


def mini(bug: str = "") -> list[str]:
    return [sys.executable, str(MINI), *(["--bug", bug] if bug else [])]


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recoverykit", "chaos", *args], capture_output=True, text=True,
                          timeout=timeout)


def summary(doc: dict) -> dict:
    return {"ids": [c["id"] for c in doc["cases"]], "statuses": [c["status"] for c in doc["cases"]],
            "clauses": [sorted(x["clause"] for x in c["clauses"]) for c in doc["cases"]],
            "coverage": doc["coverage"], "verdict": doc["verdict"], "counts": doc["statuses"]}


def test_xdist_results_equal_those_of_an_in_process_run(tmp_path):
    here = systematic.run(mini(), workers=0, out_dir=tmp_path / "here", **SELECT)
    seen = []
    spread = systematic.run(mini(), workers=2, out_dir=tmp_path / "xdist", progress=seen.append, **SELECT)
    assert summary(spread) == summary(here)
    assert sorted(summary(here)["statuses"]) == ["not_implemented", "not_implemented", "passed", "passed"]
    assert here["verdict"] == "valid", here["reasons"]
    assert sorted(r["id"] for r in seen) == sorted(summary(here)["ids"])  # progress saw every case once
    assert all(c["leftovers"] == [] for c in spread["cases"])
    assert not list((tmp_path / "xdist").glob("xdist-*"))  # the xdist work dir is gone when every case reported


def test_a_failing_case_through_xdist_makes_the_cli_exit_invalid(tmp_path):
    out = tmp_path / "out"
    done = cli("--adapter", " ".join(mini("sum_usage")), "--workers", "2", "--scenarios", "chat_unknown_write",
               "--points", "tool.result.commit.before", "--kinds", "tree_kill,worker_kill", "--json", "--out", str(out))
    assert done.returncode == 1, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["verdict"] == "invalid" and doc["mode"] == "systematic"
    failed = [c for c in doc["cases"] if c["status"] == "failed"]
    assert failed and all(any(v.startswith("broke USG-05:") for v in c["violations"]) for c in failed)
    for case in failed:  # the same bundle layout as an in-process run: <out>/bundles/<case>
        assert Path(case["bundle"]).parent == out / "bundles" and (Path(case["bundle"]) / "REPLAY").exists()
        assert "--bug sum_usage" in case["replay"]
    progress = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == len(doc["cases"]) == 2  # one progress line per case, as in process
    assert (out / "results.json").exists() and (out / "report.html").exists()


def test_shards_with_workers_split_the_list(tmp_path):
    select = ["--scenarios", "chat_unknown_write", "--points", "provider.request.before,tool.result.commit.before",
              "--kinds", "tree_kill,worker_kill"]
    everything = cli("--list", *select).stdout.split()
    ran = []
    for k in (1, 2):
        listed = cli("--list", "--shard", f"{k}/2", *select).stdout.split()
        done = cli("--adapter", " ".join(mini()), "--workers", "2", "--shard", f"{k}/2", "--json", "--quiet",
                   "--out", str(tmp_path / f"s{k}"), *select)
        assert done.returncode == 0, done.stderr[-3000:]
        doc = json.loads(done.stdout)
        assert doc["shard"] == f"{k}/2" and [c["id"] for c in doc["cases"]] == listed
        ran += listed
    assert sorted(ran) == sorted(everything) and len(set(ran)) == len(everything) == 6


def test_workers_with_random_waves_is_a_usage_error(tmp_path):
    done = cli("--random", "1", "--workers", "2", "--out", str(tmp_path))
    assert done.returncode == 64 and "--random" in done.stderr


def test_the_plugin_runs_straight_from_pytest(tmp_path):
    results = tmp_path / "results"
    listed = cli("--adapter", " ".join(mini("sum_usage")), "--scenarios", "chat_unknown_write", "--list",
                 "--out", str(tmp_path / "listed"))  # the dry run writes the trace every worker enumerates from
    assert listed.returncode == 0, listed.stderr[-3000:]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "recoverykit.chaos.xdist_plugin", "-n", "0", "-rsf", "-q",
         "-p", "no:cacheprovider", "--chaos-results", str(results), "--chaos-adapter", " ".join(mini("sum_usage")),
         "--chaos-trace", str(tmp_path / "listed" / "trace.json"),
         "--chaos-scenarios", "chat_unknown_write", "--chaos-points", "tool.result.commit.before,input.accept.after",
         "--chaos-kinds", "tree_kill"], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 1, done.stdout[-3000:]  # a failed case fails its item
    assert "1 failed, 1 skipped" in done.stdout  # not implemented is skipped, never passed
    assert "SKIPPED [1] chat_unknown_write/input.accept.after/1/tree_kill: not_implemented" in done.stdout
    statuses = {json.loads(p.read_text())["id"]: json.loads(p.read_text())["status"]
                for p in (results / "cases").glob("*.json")}
    assert statuses == {"chat_unknown_write/tool.result.commit.before/1/tree_kill": "failed",
                        "chat_unknown_write/input.accept.after/1/tree_kill": "not_implemented"}
    assert json.loads((results / "declared.json").read_text())["failpoints"]  # the controller declared once


def test_the_plugin_refuses_to_enumerate_without_a_trace(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "recoverykit.chaos.xdist_plugin", "-p",
                           "no:cacheprovider", "--chaos-results", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 4 and "--chaos-trace" in done.stderr  # every worker must collect the same list


def test_the_plugin_refuses_to_run_without_a_results_dir(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "recoverykit.chaos.xdist_plugin", "-p",
                           "no:cacheprovider"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 4 and "--chaos-results" in done.stderr  # usage error, not a run of whatever is here


def marked_by(owner_pid: int) -> list[psutil.Process]:
    """Live processes whose run marker ``owner_pid`` made."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(ENV_RUN_MARKER, "").startswith(f"recoverykit-{owner_pid}-") and \
                    proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def _busy_worker(chaos_pid: int) -> psutil.Process | None:
    """An xdist worker of this chaos command (not its controller) whose case processes are running."""
    for proc in marked_by(chaos_pid):
        with contextlib.suppress(psutil.Error):
            if "xdist.plugin" not in " ".join(proc.cmdline()) and marked_by(proc.pid):
                return proc
    return None


def test_a_dead_xdist_worker_costs_only_its_case(tmp_path):
    out = tmp_path / "out"
    run = subprocess.Popen([sys.executable, "-m", "recoverykit", "chaos", "--workers", "2", "--json", "--quiet",
                            "--scenarios", "chat_unknown_write", "--points", "tool.running",
                            "--kinds", "worker_kill,tree_kill,normal_exit", "--out", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        victim = None
        while victim is None and run.poll() is None:  # a worker busy with a case: its case processes are running
            victim = _busy_worker(run.pid) or time.sleep(0.1)
        assert victim is not None, "no xdist worker was ever seen running a case"
        victim.kill()
        stdout, stderr = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 2, stderr[-3000:]  # unknown: a case without a result is missing evidence
    doc = json.loads(stdout)
    lost = [c for c in doc["cases"] if c["status"] == "error"]
    assert len(lost) == 1 and lost[0]["why"].startswith("no result"), [(c["id"], c["status"]) for c in doc["cases"]]
    assert [c["status"] for c in doc["cases"]].count("passed") == len(doc["cases"]) - 1  # the others still ran
    assert marked_by(run.pid) == [] and marked_by(victim.pid) == []  # the dead worker's case processes too
