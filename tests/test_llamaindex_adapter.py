"""The llama-index-workflows adapter (adapters/recoverykit_adapters/llamaindex), with the [llamaindex] extra
installed: it speaks the protocol and starts its worker. Skipped without the extra (CI installs
``.[test,langgraph,dbos]``)."""

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
