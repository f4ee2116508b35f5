"""The Node.js adapter (adapters/node): a runtime in another language speaks the protocol and is certified.

node-mini is plain JavaScript with no npm packages; these tests prove the protocol is language-neutral by
driving it exactly as any adapter is driven: ping (handshake, start, processes, observe) and one short
certify scenario whose worker the kit kills. Skipped when ``node`` is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_certify import leftovers  # live processes mentioning the run's path

ROOT = Path(__file__).resolve().parent.parent
NODE = shutil.which("node")
ADAPTER = f"{NODE} {ROOT / 'adapters' / 'node' / 'adapter.js'}"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(NODE is None, reason="node is not installed")]


def _kit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recoverykit", *args], capture_output=True, text=True, timeout=120)


def test_ping_with_start_speaks_the_protocol(tmp_path):
    done = _kit("protocol", "ping", "--start", "--adapter", ADAPTER, "--timeout", "10", "--out", str(tmp_path / "ping"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "node-mini 0.1.0 (protocol 1.3)" in done.stdout
    assert "1 runtime process(es) listed, all alive" in done.stdout
    assert leftovers(tmp_path) == []


def test_a_killed_worker_never_reruns_the_unknown_write(tmp_path):
    out = tmp_path / "out"
    started = time.monotonic()
    done = _kit("certify", "--adapter", ADAPTER, "--out", str(out), "--seed", "3", "--only", "chat_unknown_write",
                "--json")
    assert time.monotonic() - started < 60
    assert "Traceback" not in done.stderr + done.stdout
    assert done.returncode == 2, done.stderr[-2000:]  # --only: the other required clauses were not exercised
    results = json.loads(done.stdout)
    assert results["adapter"]["name"] == "node-mini"
    (case,) = results["cases"]
    assert case["name"] == "chat_unknown_write" and case["verdict"] == "valid", case["message"]
    fa15 = results["clauses"]["FA-15"]  # the unknown write never ran twice: the kit's witness log says so
    assert (fa15["verdict"], fa15["evidence"]) == ("valid", "kit")
    assert not [c for c, v in results["clauses"].items() if v["verdict"] == "invalid"]
    assert leftovers(out) == []
