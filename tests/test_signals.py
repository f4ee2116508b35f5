"""SIGTERM, SIGINT and SIGHUP end certify and chaos like their other exits (recoverykit.signals).

A real ``recoverykit`` subprocess gets the signal mid-run; it must reap every process of its run,
write results.json with the cases finished so far marked ``"incomplete": true``, print one line
saying so (no traceback), and exit 128 + signum: 143 for SIGTERM, 130 for SIGINT, 129 for SIGHUP.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time

import psutil
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


def _reap_after(proc: subprocess.Popen) -> None:
    """A failing run (the old kit died on SIGHUP) must not leave its processes to the next test."""
    for leftover in marked_by(proc.pid):
        with contextlib.suppress(psutil.Error):
            leftover.kill()


def _paused_process(proc: subprocess.Popen) -> int | None:
    """Poll the run until one of its processes is stopped (the pause nemesis); its pid, or None if the run ended."""
    deadline = time.monotonic() + BOUND_S
    while proc.poll() is None and time.monotonic() < deadline:
        for p in marked_by(proc.pid):
            with contextlib.suppress(psutil.Error):
                if p.status() == psutil.STATUS_STOPPED:
                    return p.pid
        time.sleep(0.01)
    return None


def test_a_sighup_to_certify_while_a_process_is_paused_reaps_resumes_and_exits_129(tmp_path):
    """A closed terminal or a dropped ssh session (SIGHUP) while the pause nemesis holds a runtime process
    stopped: the old kit died at once (exit -1), leaving 18 marked processes, one of them SIGSTOPped, and no
    results. Now: exit 129, nothing of the run left (the stopped one neither), results.json incomplete."""
    out = tmp_path / "out"
    proc = _start("certify", "--only", "paused_owner", "--out", str(out))
    try:
        stopped = _paused_process(proc)
        assert stopped is not None, "the run never paused a process"
        rc, err, seconds = _stop(proc, signal.SIGHUP)
        assert rc == 129, err[-3000:]
        assert "Traceback" not in err and "interrupted by SIGHUP" in err
        assert marked_by(proc.pid) == [], "processes of the run outlived the hung-up certify"
        with contextlib.suppress(psutil.NoSuchProcess):
            assert psutil.Process(stopped).status() != psutil.STATUS_STOPPED, "a paused process was left stopped"
        results = json.loads((out / "results.json").read_text())
        assert results["incomplete"] is True and results["interrupted_by"] == "SIGHUP"
        assert results["exit_code"] == 129 and results["verdict"] == "unknown"
        assert seconds < BOUND_S
    finally:
        _reap_after(proc)


def test_a_sighup_to_certify_mid_run_reaps_writes_incomplete_results_and_exits_129(tmp_path):
    out = tmp_path / "out"
    proc = _start("certify", "--out", str(out))
    try:
        _after_first_case(proc, ": valid")
        rc, err, _ = _stop(proc, signal.SIGHUP)
        assert rc == 129, err[-3000:]
        assert "Traceback" not in err and "interrupted by SIGHUP" in err
        assert marked_by(proc.pid) == [], "processes of the run outlived the hung-up certify"
        results = json.loads((out / "results.json").read_text())
        assert results["incomplete"] is True and results["exit_code"] == 129 and results["verdict"] != "valid"
        assert results["cases"] and (out / "junit.xml").exists()
    finally:
        _reap_after(proc)


def test_a_sighup_to_chaos_with_xdist_workers_reaps_workers_and_cases_and_exits_129(tmp_path):
    """chaos --workers 1 runs its cases in a pytest-xdist controller and worker: a SIGHUP to the chaos command
    kills those and every case process of theirs, and the cases that reported are written, incomplete."""
    out = tmp_path / "out"
    proc = _start("chaos", "--workers", "1", "--scenarios", "chat_unknown_write", "--out", str(out))
    try:
        _after_first_case(proc, "] passed")
        rc, err, _ = _stop(proc, signal.SIGHUP)
        assert rc == 129, err[-3000:]
        assert "Traceback" not in err and "interrupted by SIGHUP" in err
        assert marked_by(proc.pid) == [], "processes of the run outlived the hung-up chaos run"
        results = json.loads((out / "results.json").read_text())
        assert results["incomplete"] is True and results["verdict"] != "valid"
        assert "interrupted by SIGHUP" in results["reasons"][0]
    finally:
        _reap_after(proc)
