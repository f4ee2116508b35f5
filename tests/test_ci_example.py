"""The GitHub Actions example (examples/github-actions/recoverykit.yml) runs: its ``run:`` steps, in order, here.

The workflow is parsed as YAML and each job's ``run:`` steps are executed with bash ``-eo pipefail`` (GitHub's
``shell: bash``) in one workspace, on the kit's reference runtime with a tiny selection put in the workflow's own
variables (``ADAPTER``, ``CERTIFY_ARGS``, ``CHAOS_ARGS``, ``SHARDS``): certify with the baseline, each chaos
shard, the merge, the job summaries. ``uses:`` steps (checkout, artifacts, cache, junit publishing) are GitHub's
and are stood in for by the shared workspace; the install steps are skipped (the kit is installed). The merge job
runs twice, as on two nights, so the second runs ``recoverykit diff`` against the first.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import yaml  # the test extras: pyyaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "examples" / "github-actions" / "recoverykit.yml"
WAITS = ["wait_notify_during_restart", "wait_duplicate_notification", "wait_pause_then_notify",
         "wait_self_completing", "wait_lost_notification"]


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def run_steps(job: dict, env: dict[str, str], cwd: Path, matrix: dict[str, str] | None = None) -> list[tuple]:
    """Each ``run:`` step of ``job`` but the install: (name, exit code, continue-on-error, output)."""
    done = []
    for step in job["steps"]:
        script = step.get("run")
        if script is None or step.get("name") == "Install":
            continue
        for key, value in (matrix or {}).items():
            script = script.replace("${{ matrix." + key + " }}", value)
        assert "${{" not in script, f"{step.get('name')}: an expression the test does not stand in for: {script}"
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
        done.append((step.get("name"), proc.returncode, bool(step.get("continue-on-error")), proc.stdout + proc.stderr))
    return done


def test_the_workflow_s_commands_run_in_order_on_the_reference_runtime(tmp_path):
    flow = workflow()
    assert set(flow.get("on", flow.get(True))) >= {"pull_request", "schedule"}
    assert flow["defaults"]["run"]["shell"] == "bash"
    jobs = flow["jobs"]
    assert list(jobs) == ["certify", "chaos", "merge"] and jobs["merge"]["needs"] == "chaos"
    shards = jobs["chaos"]["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, int(flow["env"]["SHARDS"]) + 1)), "the matrix must list 1..$SHARDS"
    text = WORKFLOW.read_text()
    for must in ("--baseline", "--shard", "recoverykit merge", "recoverykit diff", "GITHUB_STEP_SUMMARY", "junit.xml"):
        assert must in text

    workspace = tmp_path / "repo"
    (workspace / ".recoverykit").mkdir(parents=True)
    bindir = str(Path(sys.executable).parent)
    summary = tmp_path / "summary.md"
    env = {**os.environ, **{k: str(v) for k, v in flow["env"].items()},
           "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "GITHUB_STEP_SUMMARY": str(summary),
           "GITHUB_RUN_NUMBER": "1", "ADAPTER": shlex.join([sys.executable, "-m", "recoverykit.impl"]),
           "CERTIFY_ARGS": " ".join(["--profile waits", *(f"--only {s}" for s in WAITS)]),
           "CHAOS_ARGS": "--scenarios pause_restart --kinds tree_kill", "SHARDS": "2"}
    # the committed baseline of known findings, written once as the workflow's header says
    base = subprocess.run(["recoverykit", "certify", "--adapter", env["ADAPTER"], "--profile", "waits", "--only",
                           WAITS[0], "--write-baseline", env["BASELINE"], "--out", tmp_path / "baseline-run"],
                          cwd=workspace, env=env, capture_output=True, text=True, timeout=300)
    assert base.returncode in (0, 2) and (workspace / env["BASELINE"]).exists(), base.stderr

    steps = run_steps(jobs["certify"], env, workspace)
    for shard in ("1", "2"):
        steps += run_steps(jobs["chaos"], env, workspace, {"shard": shard})
    steps += run_steps(jobs["merge"], env, workspace)
    names = [name for name, *_ in steps]
    assert names == ["Certify", "Report in the job summary", "Chaos shard", "Chaos shard", "Merge the shards",
                     "Report in the job summary", "What changed since the last night",
                     "Keep tonight's results for tomorrow's diff"]
    for name, code, _, out in steps:
        assert code == 0, f"step {name!r} exited {code}:\n{out[-3000:]}"
    out = workspace / "out"
    for junit in (out / "certify" / "junit.xml", out / "nightly" / "junit.xml"):
        assert ET.parse(junit).getroot().tag in ("testsuites", "testsuite")
    merged = (out / "nightly" / "report.md").read_text()
    assert summary.read_text().count("\n") > 10 and merged in summary.read_text()
    assert (out / "certify" / "report.md").read_text() in summary.read_text()
    assert "recoverykit diff" not in summary.read_text()  # the first night has nothing to compare with

    # the next night: the cache restored last night's results; the diff runs and finds no regression
    again = run_steps(jobs["merge"], env, workspace)
    assert all(code == 0 for _, code, _, _ in again), again
    assert re.search(r"^0 regressions: exit 0$", summary.read_text(), re.M)
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
