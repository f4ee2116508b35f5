"""Nothing outlives a chaos run: not after a case, not after the chaos command itself is SIGKILLed.

Every process a case starts carries the case's run marker (``recoverykit-<owner pid>-...``). A case
reaps its marker when it ends; a chaos command that was killed leaves marked processes whose owner is
dead, and the next chaos run reaps them before it starts (``reap_stale``). With ``--workers N`` the
pytest controller and its xdist workers carry the chaos command's marker and each case's processes
a marker owned by the worker running it: two levels, so ``reap_stale`` repeats until nothing is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from env_helpers import marked_by
from recoverykit.conformance.reaper import ENV_RUN_MARKER, reap_stale

FAST_CASE = "chat_unknown_write/completion.commit.before_projection/1/frontend_reload"
SLOW_CASE = "chat_unknown_write/tool.running/1/worker_kill"
# with --workers 2: enough cases (48) that the run is far from done when the test kills it
XDIST_SELECT = ("--workers", "2", "--scenarios", "chat_unknown_write", "--kinds", "worker_kill,tree_kill")


def chaos(*args: str, tmp_path, name: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "recoverykit", "chaos", "--quiet", "--out", str(tmp_path / name),
                             *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def test_a_finished_case_leaves_no_process(tmp_path):
    run = chaos("--replay", FAST_CASE, tmp_path=tmp_path, name="one")
    _, err = run.communicate(timeout=180)
    assert run.returncode == 0, err.decode()[-2000:]
    assert marked_by(run.pid) == []


def test_sigkilled_chaos_command_is_cleaned_up_by_the_next_run(tmp_path):
    # a leftover from an earlier kit that died: a marked process whose owner pid is gone
    make_marker = "from recoverykit.conformance.reaper import new_marker; print(new_marker())"
    owner = subprocess.run([sys.executable, "-c", make_marker], capture_output=True, text=True, check=True, timeout=60)
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True,
                              env={**os.environ, ENV_RUN_MARKER: owner.stdout.strip()})
    try:
        first = chaos("--replay", SLOW_CASE, tmp_path=tmp_path, name="killed")
        deadline = time.monotonic() + 120
        while len(marked_by(first.pid)) < 3 and time.monotonic() < deadline:  # adapter, control, worker(s)
            time.sleep(0.1)
        assert len(marked_by(first.pid)) >= 3, "the chaos command never started its runtime"
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        first.stderr.close()
        second = chaos("--replay", FAST_CASE, tmp_path=tmp_path, name="next")
        _, err = second.communicate(timeout=180)
        assert second.returncode == 0, err.decode()[-2000:]
        assert marked_by(first.pid) == [], "the next run did not reap what the killed run left"
        assert marked_by(second.pid) == []
        orphan.wait(timeout=30)  # reaped by the second run (SIGKILL), so this returns
        assert orphan.returncode == -signal.SIGKILL
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()


def _xdist_run_under_way(first: subprocess.Popen) -> list[int]:
    """Wait until the chaos command's pytest controller and workers run cases; the pids carrying its marker."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pytest_procs = marked_by(first.pid)
        if len(pytest_procs) >= 3 and any(marked_by(p.pid) for p in pytest_procs):  # controller, 2 workers, a case
            return [p.pid for p in pytest_procs]
        time.sleep(0.1)
    raise AssertionError(f"the xdist run never started a case: {first.stderr.read().decode()[-2000:]}")


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:  # gone meanwhile (a warm spare adapter closing, say)
        return []


def _nothing_left(owners: list[int]) -> None:
    left = {pid: [p.pid for p in marked_by(pid)] for pid in owners}
    assert all(v == [] for v in left.values()), f"marked processes outlived the run: {left}"


def test_reap_stale_repeats_until_a_dead_runs_chain_is_gone():
    # a dead chaos command's marker on a live "xdist worker", which made its own marker for its "case".
    # The command stays alive until the chain is built: other tests running meanwhile call reap_stale()
    # too, and would reap a chain whose owner is already dead before this test could look at it.
    make_marker = ("import time; from recoverykit.conformance.reaper import new_marker; "
                   "print(new_marker(), flush=True); time.sleep(300)")
    command = subprocess.Popen([sys.executable, "-c", make_marker], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    worker_code = ("import os, subprocess, sys, time\n"
                   "from recoverykit.conformance.reaper import ENV_RUN_MARKER, new_marker\n"
                   "m = new_marker()\n"
                   "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
                   " env={**os.environ, ENV_RUN_MARKER: m}, start_new_session=True)\n"
                   "print(m, c.pid, flush=True)\n"
                   "time.sleep(300)\n")
    outer = command.stdout.readline().strip()
    worker = subprocess.Popen([sys.executable, "-c", worker_code], stdout=subprocess.PIPE, text=True,
                              start_new_session=True, env={**os.environ, ENV_RUN_MARKER: outer})
    inner, case_pid = worker.stdout.readline().split()
    case = psutil.Process(int(case_pid))
    try:
        command.kill()  # the chaos command dies: its worker's marker is stale from now on
        command.wait(timeout=30)
        report = reap_stale(only=[outer, inner])  # other engineers' stale runs are not this test's business
        # one pass kills the worker only (the case's owner was alive when it looked); the repeat gets the case.
        # A concurrent test's reap_stale may have taken some of them in the last instant: then they are gone too.
        assert {r.pid for r in report.killed} <= {worker.pid, case.pid} and report.ok
        assert worker.wait(timeout=30) == -signal.SIGKILL
        assert not case.is_running() or case.status() == psutil.STATUS_ZOMBIE
    finally:
        with contextlib.suppress(OSError):
            command.kill()
        command.wait()
        command.stdout.close()
        for proc in (worker, case):
            with contextlib.suppress(psutil.Error, OSError):
                proc.kill()
        worker.wait()
        worker.stdout.close()


def test_sigterm_during_an_xdist_run_leaves_nothing(tmp_path):
    first = chaos(*XDIST_SELECT, tmp_path=tmp_path, name="terminated")
    owners = [first.pid, *_xdist_run_under_way(first)]
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 143, err.decode()[-2000:]  # 128 + SIGTERM (recoverykit.signals)
    _nothing_left(owners)  # at once: the command killed its pytest group and reaped the cases on its way out


@pytest.mark.parametrize("also_controller", [False, True], ids=["command", "command_and_pytest_controller"])
def test_sigkilled_xdist_chaos_run_is_cleaned_up_by_the_next_run(tmp_path, also_controller):
    first = chaos(*XDIST_SELECT, tmp_path=tmp_path, name="killed")
    pytest_pids = _xdist_run_under_way(first)
    (controller,) = [p for p in psutil.Process(first.pid).children() if "xdist.plugin" in _cmdline(p)]
    first.send_signal(signal.SIGKILL)
    if also_controller:  # the controller cannot clean up after its owner: workers and cases are left to the next run
        controller.kill()
    first.wait(timeout=30)
    first.stderr.close()
    if not also_controller:  # the controller notices its owner died and reaps its workers and their cases itself
        deadline = time.monotonic() + 60
        while any(marked_by(pid) for pid in [first.pid, *pytest_pids]) and time.monotonic() < deadline:
            time.sleep(0.2)
        _nothing_left([first.pid, *pytest_pids])
        reported = list((tmp_path / "killed").glob("xdist-*/cases/*.json"))
        assert len(reported) < 48, "the run went on to the end instead of stopping with its owner"
    second = chaos("--replay", FAST_CASE, tmp_path=tmp_path, name="next")
    _, err = second.communicate(timeout=180)
    assert second.returncode == 0, err.decode()[-2000:]
    _nothing_left([first.pid, *pytest_pids, second.pid])
