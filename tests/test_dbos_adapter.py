"""The DBOS adapter (adapters/recoverykit_adapters/dbos), with the [dbos] extra installed: certify ends in a
verdict, and its findings reproduce without the kit.

Kept within CI's budget: a DBOS worker's start (imports, SQLite migrations, launch) costs seconds, so the run is
one short certify scenario (which starts the worker as ``protocol ping --start`` would, so no ping of its own, and
judges FA-15 from the kit's witness log) and the three reproductions (about 4 s each), run every time: a test kept
behind a switch that CI never sets proves nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="the [dbos] extra is not installed")

ROOT = Path(__file__).resolve().parent.parent
ADAPTER = f"{sys.executable} -m recoverykit_adapters.dbos"
HERE = ROOT / "adapters" / "recoverykit_adapters" / "dbos"


def _kit(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recoverykit", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_certify_ends_in_a_verdict_and_finds_the_rerun_step(tmp_path):
    result = _kit("certify", "--adapter", ADAPTER, "--only", "chat_unknown_write", "--seed", "1", "--json",
                  "--out", str(tmp_path))
    assert result.returncode in (0, 1, 2), result.stderr
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "invalid"
    assert doc["clauses"]["FA-15"]["verdict"] == "invalid"  # DBOS re-runs a step killed mid-call (README.md)
    assert doc["clauses"]["RI-02"]["verdict"] == "valid"  # DBOS.launch() recovers the killed workflow


@pytest.mark.parametrize("script", ["repro_fa15_step_rerun.py", "repro_cancel_drops_inflight_step.py",
                                    "repro_ctx08_queue_order.py"])
def test_each_true_finding_reproduces_without_the_kit(script, tmp_path):
    result = subprocess.run([sys.executable, str(HERE / script)], capture_output=True, text=True, timeout=120,
                            env={"REPRO_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "REPRODUCED" in result.stdout
