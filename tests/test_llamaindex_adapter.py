"""The llama-index-workflows adapter (adapters/recoverykit_adapters/llamaindex), with the [llamaindex] extra
installed: it speaks the protocol and starts its worker, and its true findings reproduce without the kit.
Skipped without the extra (CI installs ``.[test,langgraph,dbos]``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("workflows", reason="the [llamaindex] extra (llama-index-workflows) is not installed")
pytest.importorskip("openai", reason="the [llamaindex] extra (openai) is not installed")

ROOT = Path(__file__).resolve().parent.parent
ADAPTER = f"{sys.executable} -m recoverykit_adapters.llamaindex"


def test_the_llamaindex_adapter_pings_with_its_worker_started(tmp_path):
    result = subprocess.run([sys.executable, "-m", "recoverykit", "protocol", "ping", "--start", "--adapter", ADAPTER,
                             "--timeout", "60", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300,
                            cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "started: 1 runtime process(es) listed, all alive" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("script", ["repro_fa15_step_rerun.py", "repro_own03_any_host_resumes.py"])
def test_each_true_finding_reproduces_without_the_kit(script, tmp_path):
    here = ROOT / "adapters" / "recoverykit_adapters" / "llamaindex"
    result = subprocess.run([sys.executable, str(here / script)], capture_output=True, text=True, timeout=120,
                            env={"REPRO_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "REPRODUCED" in result.stdout
