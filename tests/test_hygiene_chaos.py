"""Nothing outlives a chaos run: not after a case, not after the chaos command itself is SIGKILLed.

Every process a case starts carries the case's run marker (``recoverykit-<chaos pid>-...``). A case
reaps its marker when it ends; a chaos command that was killed leaves marked processes whose owner is
dead, and the next chaos run reaps them before it starts (``reap_stale``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil
from recoverykit.chaos.reaper import ENV_RUN_MARKER

FAST_CASE = "chat_unknown_write/completion.commit.before_projection/1/frontend_reload"
SLOW_CASE = "chat_unknown_write/tool.running/1/worker_kill"


def marked_by(owner_pid: int) -> list[psutil.Process]:
    prefix = f"recoverykit-{owner_pid}-"
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(ENV_RUN_MARKER, "").startswith(prefix) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


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
    make_marker = "from recoverykit.chaos.reaper import new_marker; print(new_marker())"
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
