"""`recoverykit protocol ping --start`: a runtime that crashes at start is told in one paragraph.

Each case runs the real command in a fresh interpreter: the exit code, one paragraph naming the
runtime's stderr log (and its last line), no traceback, and no process of the run left alive.
"""

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from env_helpers import tagged

ROOT = Path(__file__).resolve().parent.parent
ADAPTER = ROOT / "tests" / "adapters" / "start_crash_adapter.py"


def _ping(mode: str, tag: str, *extra: str) -> subprocess.CompletedProcess:
    adapter = f"{sys.executable} {ADAPTER} {mode} {tag}"
    return subprocess.run([sys.executable, "-m", "recoverykit", "protocol", "ping", "--adapter", adapter, *extra],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("mode", "says"), [
    ("refuse", "The runtime did not start"),
    ("dies", "The runtime crashed at start"),
])
def test_a_runtime_that_crashes_at_start_gets_one_paragraph(mode, says):
    tag = f"rk-start-crash-{uuid.uuid4().hex[:8]}"
    began = time.monotonic()
    result = _ping(mode, tag, "--start")
    assert time.monotonic() - began < 30
    assert result.returncode == 2, result.stdout + result.stderr
    assert says in result.stderr
    assert "adapter.stderr.log" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert len([ln for ln in result.stderr.splitlines() if ln.strip()]) == 1  # one paragraph
    if mode == "refuse":
        assert 'Its stderr ends: "runtime: cannot open its database: disk I/O error"' in result.stderr
    assert tagged(tag) == []


def test_without_start_the_same_adapter_pings_valid():
    # the crash is only seen once the runtime is started: what --start adds
    tag = f"rk-start-crash-{uuid.uuid4().hex[:8]}"
    result = _ping("dies", tag)
    assert result.returncode == 0, result.stdout + result.stderr
    assert tagged(tag) == []


def test_a_runtime_that_starts_is_valid_and_reaped():
    tag = f"rk-start-crash-{uuid.uuid4().hex[:8]}"
    result = _ping("lives", tag, "--start")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "started: 1 runtime process(es) listed, all alive" in result.stdout
    assert tagged(tag) == []


def test_the_reference_runtime_starts():
    adapter = f"{sys.executable} -m recoverykit.impl"
    result = subprocess.run([sys.executable, "-m", "recoverykit", "protocol", "ping", "--start", "--adapter", adapter],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all alive" in result.stdout


def test_a_runtime_whose_processes_list_nothing_is_unknown_not_valid():
    """``processes`` listing nothing: every restart would kill nothing, so a valid ping was a hollow pass (certify
    then ends its restart cases unknown, "killed nothing"). The reference runtime behind a proxy that empties it."""
    proxy = ROOT / "tests" / "adapters" / "procs_proxy.py"
    result = subprocess.run([sys.executable, "-m", "recoverykit", "protocol", "ping", "--start", "--adapter",
                             f"{sys.executable} {proxy} empty"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "listed no process" in result.stderr and "Traceback" not in result.stdout + result.stderr
    assert "started: 0 runtime process(es) listed" in result.stdout
