"""SIGTERM and SIGINT end certify and chaos like their other exits (recoverykit.signals).

A real ``recoverykit`` subprocess gets the signal mid-run; it must reap every process of its run,
write results.json with the cases finished so far marked ``"incomplete": true``, print one line
saying so (no traceback), and exit 128 + signum: 143 for SIGTERM, 130 for SIGINT.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from env_helpers import marked_by

BOUND_S = 120  # proves "no hang" only


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "recoverykit", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _after_first_case(proc: subprocess.Popen, finished: str) -> None:
    """Read the progress lines on stderr until one says a case finished (``finished`` in it)."""
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if finished in line and marked_by(proc.pid):
            return
    proc.kill()
    raise AssertionError(f"the run never finished a case: {proc.communicate()[1][-2000:]}")


def _stop(proc: subprocess.Popen, sig: int) -> tuple[int, str, float]:
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"no exit within {BOUND_S} s of the signal: {err[-2000:]}")
    return proc.returncode, err, time.monotonic() - t0


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_certify_reaps_writes_incomplete_results_and_exits_128_plus_signum(tmp_path, sig, code):
    out = tmp_path / "out"
    proc = _start("certify", "--out", str(out))
    _after_first_case(proc, ": valid")  # the first scenario is done; the next three run side by side
    rc, err, seconds = _stop(proc, sig)
    assert rc == code, err[-3000:]
    assert "Traceback" not in err and f"interrupted by {signal.Signals(sig).name}" in err
    assert marked_by(proc.pid) == [], "processes of the run outlived the interrupted certify"
    results = json.loads((out / "results.json").read_text())
    assert results["incomplete"] is True and results["interrupted_by"] == signal.Signals(sig).name
    assert results["exit_code"] == code and results["verdict"] != "valid"
    assert results["cases"], "the cases finished before the signal are missing"
    assert (out / "junit.xml").exists()
    assert seconds < BOUND_S


def test_a_sigterm_to_chaos_in_process_reaps_and_writes_incomplete_results(tmp_path):
    out = tmp_path / "out"
    proc = _start("chaos", "--workers", "0", "--scenarios", "chat_unknown_write", "--out", str(out))
    _after_first_case(proc, "] passed")
    rc, err, seconds = _stop(proc, signal.SIGTERM)
    assert rc == 143, err[-3000:]
    assert "Traceback" not in err and "interrupted by SIGTERM" in err
    assert marked_by(proc.pid) == [], "processes of the run outlived the interrupted chaos run"
    results = json.loads((out / "results.json").read_text())
    assert results["incomplete"] is True and results["verdict"] != "valid"
    assert results["cases"] and "interrupted by SIGTERM" in results["reasons"][0]
    assert seconds < BOUND_S
