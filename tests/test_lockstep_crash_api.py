"""The lockstep machine crashes the runtime at a declared failpoint without the CLI (issue 17, D15).

The environment owns the failpoint broker, so a run from the Python API or from the pytest plugin
has one: the crash seed program arms a point, the runtime kills itself there, and the kit records
the crash with the broker's hit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from recoverykit.conformance.lockstep import LockstepConfig
from recoverykit.conformance.lockstep_run import SEED_PROGRAMS, run_program

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = f"{sys.executable} -m recoverykit.impl"
CRASH_PROGRAM = next(p for p in SEED_PROGRAMS if p[0][0] == "arm_crash")


def _crash_faults(out: Path) -> list[dict]:
    found = []
    for history in out.rglob("history.jsonl"):
        for line in history.read_text().splitlines():
            record = json.loads(line)
            if record.get("event") == "fault" and record.get("kind") == "crash":
                found.append(record)
    return found


def test_the_python_api_crashes_at_a_failpoint(tmp_path):
    config = LockstepConfig(REFERENCE, out=tmp_path)  # no broker passed: the environment's own is used
    outcome = run_program(config, CRASH_PROGRAM)
    assert outcome.verdict.value == "valid", outcome.message
    crashes = _crash_faults(tmp_path)
    assert crashes, "no crash-rule step was executed"
    assert any(c["detail"].get("hit") for c in crashes)  # the broker saw the hit


def test_the_pytest_plugin_runs_the_crash_rule(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--recoverykit-adapter={REFERENCE}",
         f"--recoverykit-out={out}", "--recoverykit-lockstep", "-k", "lockstep"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    assert _crash_faults(out), "the plugin's lockstep machine never crashed the runtime at a failpoint"
