"""Pacing that scales: a runtime slower than the kit's windows gets more time (``--timeout-scale``, calibration).

A framework that loads its model client at its first model call took longer than the request window on a loaded
machine, and 14 scenarios came back unknown with no way to give it time. The kit's mini runtime with
``--slow-start SECONDS`` (each worker's first model request waits) is that framework. The windows are scaled down
here (``--timeout-scale 0.3``: a 6 s request window) so that an 8 s slow start outruns them in modest wall time;
the same scenario is then valid with more time, given by the user or found by the calibration.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from env_helpers import cli_in_process, marked_by
from recoverykit.conformance.pacing import GOAL_SETTLE, REQUEST, Pacing, check_scale, using
from recoverykit.model.errors import InvalidArgument

ROOT = Path(__file__).resolve().parent.parent
SLOW_S = 8.0  # the mini runtime's first model request per worker waits this long
SLOW = shlex.join([sys.executable, str(ROOT / "tests" / "adapters" / "mini_runtime.py"), "--slow-start", f"{SLOW_S:g}"])
CASE = "pause_restart"  # one worker start with a model request, a graceful restart, no second model request


def certify(tmp_path: Path, *args: str, bound_s: float = 240.0) -> tuple[int, str, dict]:
    """``recoverykit certify`` of the slow runtime, CASE only, in a subprocess run from ``tmp_path``: (exit code,
    output, results.json). Asserts no traceback, no hang, no process of the run left, nothing written outside
    ``--out``."""
    out = tmp_path / "out"
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", "certify", "--adapter", SLOW, "--only", CASE,
                             "--out", str(out), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=tmp_path)
    try:
        text, _ = proc.communicate(timeout=bound_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"certify hung past {bound_s} s") from None
    assert time.monotonic() - began < bound_s
    assert "Traceback" not in text, text
    left = marked_by(proc.pid)
    assert not left, [p.cmdline() for p in left]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    return proc.returncode, text, json.loads((out / "results.json").read_text())


def case_of(results: dict) -> dict:
    return next(c for c in results["cases"] if c["name"] == CASE)


@pytest.mark.slow
def test_a_runtime_slower_than_the_request_window_is_unknown_and_the_reason_names_the_window(tmp_path):
    code, _, results = certify(tmp_path, "--timeout-scale", "0.3", "--no-calibrate")
    assert code == 2
    case = case_of(results)
    assert case["verdict"] == "unknown"
    # the window, the time it was given, and the knob that gives more
    assert "no request held" in case["message"] and "within 6 s" in case["message"], case["message"]
    assert "(request window 20 s x0.3 = 6 s; --timeout-scale gives more)" in case["message"], case["message"]
    assert results["pacing"]["scale"] == 0.3 and results["pacing"]["calibration"] is None


@pytest.mark.slow
def test_the_same_runtime_given_more_time_is_valid(tmp_path):
    """Old code: no --timeout-scale at all (exit 64), and no way to give the runtime more than 20 s."""
    code, _, results = certify(tmp_path, "--timeout-scale", "0.6", "--no-calibrate")  # a 12 s request window
    assert code in (0, 2), code  # (the run is unknown overall: one case leaves required clauses unexercised)
    case = case_of(results)
    assert case["verdict"] == "valid", case["message"]
    assert results["pacing"]["windows"]["request"] == pytest.approx(12.0)


@pytest.mark.slow
def test_calibration_measures_the_slow_runtime_scales_the_windows_and_records_it(tmp_path):
    code, text, results = certify(tmp_path, "--timeout-scale", "0.3")  # too little, as above; calibration is on
    pacing = results["pacing"]
    calibration = pacing["calibration"]
    assert calibration is not None, pacing
    assert calibration["first_request_s"] >= SLOW_S  # the slow start is a sleep: a lower bound, never flaky
    assert calibration["start_s"] is not None and calibration["turn_s"] >= calibration["first_request_s"]
    assert pacing["asked"] == 0.3 and pacing["scale"] == calibration["scale"]
    assert pacing["scale"] >= 4 * SLOW_S / REQUEST.seconds  # at least HEADROOM times the first request, in windows
    assert "calibration: start" in text and f"timeout scale x{pacing['scale']:g}" in " ".join(text.split())
    assert case_of(results)["verdict"] == "valid", case_of(results)["message"]
    assert code in (0, 2), code


def test_the_scale_is_checked_where_it_is_given():
    for bad in ("0", "-1", "abc", "nan", "1000"):
        with pytest.raises(InvalidArgument):
            check_scale(bad)
    assert check_scale("2.5") == 2.5
    for command in ("certify", "chaos"):
        code, out = cli_in_process(command, "--timeout-scale", "0", "--out", "/nonexistent/never-written")
        assert code == 64 and "--timeout-scale" in out and "Traceback" not in out, out


def test_every_window_scales_and_names_itself():
    pacing = Pacing(2.0, 2.0)
    assert pacing(REQUEST) == 40.0 and pacing(GOAL_SETTLE) == 60.0 and pacing(0.5) == 1.0
    assert pacing.says(REQUEST) == "request window 20 s x2 = 40 s; --timeout-scale gives more"
    assert Pacing().says(REQUEST) == "request window 20 s x1; --timeout-scale gives more"
    with using(pacing):
        from recoverykit.conformance.scenarios import SETTLE_S, unsettled
        text = unsettled("w-1 is still meant to run", SETTLE_S)
    assert "quiesce(40) answered quiescent: false" in text
    assert "the kit gave it 40 s: settle window 20 s x2 = 40 s; --timeout-scale gives more" in text


@pytest.mark.slow
def test_the_pytest_plugin_gives_the_slow_runtime_time_with_its_own_option(tmp_path):
    """``--recoverykit-timeout-scale``: too little is unknown naming the window (the case fails); enough is valid."""
    def plugin(scale: str, out: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                f"--recoverykit-adapter={SLOW}", f"--recoverykit-out={tmp_path / out}", "-k", CASE,
                f"--recoverykit-timeout-scale={scale}", "--recoverykit-no-calibrate"]
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    short = plugin("0.3", "a")
    assert short.returncode == 1 and "request window 20 s x0.3 = 6 s; --timeout-scale gives more" in short.stdout, \
        short.stdout[-3000:]
    enough = plugin("0.6", "b")
    assert enough.returncode == 0 and "1 passed" in enough.stdout, enough.stdout[-3000:]
    bad = plugin("0", "c")
    assert bad.returncode == 4 and "--recoverykit-timeout-scale" in bad.stderr + bad.stdout


def test_the_xdist_workers_of_a_chaos_run_get_its_scale(tmp_path):
    from recoverykit.chaos.xdist_run import pytest_argv
    with using(Pacing(2.5, 2.5)):
        argv = pytest_argv(2, tmp_path, None, base_dir=None, bundle_dir=None, timeout_s=20.0, keep=False, seed=0)
    assert argv[argv.index("--chaos-timeout-scale") + 1] == "2.5"
