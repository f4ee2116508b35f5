"""The LangGraph adapter (adapters/recoverykit_adapters/langgraph), with the [langgraph] extra installed:
it speaks the protocol and starts its worker, certify ends in a verdict, and its finding reproduces without
the kit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite", reason="the [langgraph] extra is not installed")

ROOT = Path(__file__).resolve().parent.parent
ADAPTER = f"{sys.executable} -m recoverykit_adapters.langgraph"
HERE = ROOT / "adapters" / "recoverykit_adapters" / "langgraph"


def _kit(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recoverykit", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_the_langgraph_adapter_pings_with_its_worker_started(tmp_path):
    result = _kit("protocol", "ping", "--start", "--adapter", ADAPTER, "--timeout", "60", "--out", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "started: 1 runtime process(es) listed, all alive" in result.stdout


def test_certify_ends_in_a_verdict_and_finds_the_rerun_tool(tmp_path):
    result = _kit("certify", "--adapter", ADAPTER, "--only", "chat_unknown_write", "--seed", "1", "--json",
                  "--out", str(tmp_path))
    assert result.returncode in (0, 1, 2), result.stderr
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "invalid"
    assert doc["clauses"]["FA-15"]["verdict"] == "invalid"  # LangGraph re-runs a tool killed mid-call (README.md)


@pytest.mark.parametrize("script", ["repro_fa15_tool_rerun.py", "repro_ctx11_duplicate_call_ids.py",
                                    "repro_usg01_attribution_after_response.py", "repro_own03_any_host_resumes.py",
                                    "repro_async_checkpoint_durability.py"])
def test_each_true_finding_reproduces_without_the_kit(script, tmp_path):
    result = subprocess.run([sys.executable, str(HERE / script)], capture_output=True, text=True, timeout=120,
                            env={"REPRO_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "REPRODUCED" in result.stdout


def test_one_chaos_case_at_a_durable_write_stops_the_worker_at_an_sqlite_commit(tmp_path):
    """The durable-write hook on a runtime with no failpoint of its own (docs/failpoints.md section 7): the
    worker is held just after a commit of one of its SQLite files, killed with its tree, and recovers."""
    case = "chat_read_tool/durable.write.after/3/tree_kill"
    result = _kit("chaos", "--adapter", ADAPTER, "--replay", case, "--json", "--quiet", "--out", str(tmp_path))
    assert result.returncode in (0, 1, 2), result.stderr
    [found] = json.loads(result.stdout)["cases"]
    assert found["status"] in ("passed", "failed"), found.get("why")
    assert found["reached"]["via"] == "failpoint" and found["reached"]["hit"] == 3
    assert Path(found["reached"]["detail"]["file"]).suffix == ".sqlite"
    assert found["killed"]


def test_a_pause_the_held_commit_blocks_is_answered_after_the_kill(tmp_path):
    """pause_restart's user Pause while the worker is held before an ``intent.sqlite`` COMMIT: the held
    transaction keeps SQLite's write lock, which the adapter's Pause needs, so the Pause can only answer once the
    kill releases the lock (as a real crash does within milliseconds). The kit leaves it in flight across the
    restart and judges its outcome; waiting for it before the kill timed out, and every such case was unknown."""
    case = "pause_restart/durable.write.before/2/tree_kill"
    result = _kit("chaos", "--adapter", ADAPTER, "--replay", case, "--json", "--quiet", "--out", str(tmp_path))
    assert result.returncode in (0, 1, 2), result.stderr
    [found] = json.loads(result.stdout)["cases"]
    assert found["status"] in ("passed", "failed"), found.get("why")
    assert Path(found["reached"]["detail"]["file"]).name == "intent.sqlite"
    [fa14] = [c for c in found["clauses"] if c["clause"] == "FA-14" and c["text"].startswith("held")]
    assert fa14["verdict"] == "valid"  # the Pause answered after the kill, and the work stayed paused
