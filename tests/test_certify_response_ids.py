"""certify judges usage for a runtime that sends no X-Request-Id: its receipts name the response id.

The mini runtime with ``--no-request-id`` keeps what an OpenAI client keeps (the ``chatcmpl-...`` id of
the reply) and nothing else; before, every usage clause of such a runtime was unknown.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_certify import leftovers  # live processes mentioning the run's path

ROOT = Path(__file__).resolve().parent.parent
MINI = f"{sys.executable} {ROOT / 'tests' / 'adapters' / 'mini_runtime.py'} --no-request-id"
USAGE = ("USG-03", "USG-05", "USG-10")

pytestmark = pytest.mark.slow


def _certify(adapter: str, out: Path) -> tuple[subprocess.CompletedProcess, dict]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "recoverykit", "certify", "--adapter", adapter, "--out", str(out),
                           "--seed", "3", "--examples", "1", "--only", "chat_read_tool", "--only", "multi_session",
                           "--json"], capture_output=True, text=True, timeout=300)
    assert time.monotonic() - started < 120
    assert "Traceback" not in done.stderr + done.stdout
    assert leftovers(out) == []
    return done, json.loads(done.stdout)


def _ledgers(out: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((out / "runs").glob("*/provider-ledger.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]


def test_receipts_named_by_response_id_are_judged_without_a_header(tmp_path):
    done, results = _certify(MINI, tmp_path / "out")
    assert done.returncode == 2, done.stderr[-2000:]  # --only: other required clauses were not exercised
    assert {c: results["clauses"][c]["verdict"] for c in USAGE} == dict.fromkeys(USAGE, "valid")
    requests = [r for r in _ledgers(tmp_path / "out") if r["event"] == "request"]
    assert requests and all(r["request_id_source"] == "generated" for r in requests)  # no header was sent


def test_summed_usage_is_caught_by_response_id_too(tmp_path):
    done, results = _certify(f"{MINI} --bug sum_usage", tmp_path / "out")
    assert done.returncode == 1, done.stderr[-2000:]
    assert results["clauses"]["USG-05"]["verdict"] == "invalid"
    assert any("chatcmpl-" in c["message"] for c in results["cases"] if "USG-05" in (c["message"] or ""))
