"""The killer and the reaper against real process trees."""

import os
import signal
import subprocess
import time

import psutil
import pytest
from env_helpers import spawner  # noqa: F401  (fixture)
from recoverykit.conformance.killer import ProcRef, graceful_stop, kill, kill_tree, kill_worker_only
from recoverykit.conformance.reaper import (
    ENV_RUN_MARKER,
    leftovers,
    marked_env,
    new_marker,
    owner_alive,
    reap,
    reap_stale,
    stale_markers,
)
from recoverykit.errors import InvalidArgument

# A worker with a child in its own process group and a grandchild in a new session; prints their pids.
TREE = """
import subprocess, sys, time
grandchild = ("import subprocess, sys, time\\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\\n"
              "print(p.pid, flush=True)\\ntime.sleep(120)")
child = subprocess.Popen([sys.executable, "-c", grandchild], stdout=subprocess.PIPE, text=True)
print(child.pid, child.stdout.readline().strip(), flush=True)
time.sleep(120)
"""


def _tree(spawner):  # noqa: F811
    worker = spawner.python(TREE, stdout=subprocess.PIPE, text=True)
    child, grandchild = (int(x) for x in worker.stdout.readline().split())
    return worker, ProcRef.of(child), ProcRef.of(grandchild)


def test_kill_tree_kills_every_descendant_including_new_sessions(spawner):  # noqa: F811
    worker, child, grandchild = _tree(spawner)
    assert psutil.Process(grandchild.pid).pid != psutil.Process(worker.pid).pid
    assert os.getsid(grandchild.pid) != os.getsid(worker.pid)
    report = kill_tree(worker.pid)
    assert report.ok and set(report.killed) == {ProcRef.of(worker.pid), child, grandchild}
    assert worker.wait(timeout=10) == -signal.SIGKILL
    assert not child.alive() and not grandchild.alive()


def test_kill_worker_only_leaves_its_children_running(spawner):  # noqa: F811
    worker, child, grandchild = _tree(spawner)
    report, survivors = kill_worker_only(worker.pid)
    assert report.ok and report.killed == [ProcRef.of(worker.pid)]
    assert worker.wait(timeout=10) == -signal.SIGKILL
    assert set(survivors) == {child, grandchild} and child.alive() and grandchild.alive()
    assert kill_tree(child, extra=[grandchild]).ok and not grandchild.alive()


def test_a_recycled_pid_is_never_killed(spawner):  # noqa: F811
    proc = spawner.python("import time; time.sleep(60)")
    real = ProcRef.of(proc.pid)
    impostor = ProcRef(real.pid, real.create_time - 1000.0)  # same pid, another process's start time
    report = kill(impostor)
    assert report.already_gone == [impostor] and report.killed == []
    assert real.alive()
    assert kill(real).ok and proc.wait(timeout=10) == -signal.SIGKILL


def test_graceful_stop_uses_sigterm_then_sigkill(spawner):  # noqa: F811
    polite = spawner.python("import time; time.sleep(60)")
    report = graceful_stop(polite.pid, timeout=10)
    assert report.graceful is True and report.ok and polite.wait(timeout=10) == -signal.SIGTERM
    stubborn = spawner.python("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                              "print('ready', flush=True)\ntime.sleep(60)", stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout.readline() == "ready\n"
    report = graceful_stop(stubborn.pid, timeout=0.2)
    assert report.graceful is False and report.ok and stubborn.wait(timeout=10) == -signal.SIGKILL


def test_stopping_a_process_that_is_gone_is_not_an_error(spawner):  # noqa: F811
    proc = spawner.python("pass")
    ref = ProcRef.of(proc.pid)
    proc.wait(timeout=30)
    assert kill(ref).already_gone == [ref] and graceful_stop(ref).graceful is True


def test_reap_finds_marked_processes_even_when_reparented(spawner):  # noqa: F811
    marker = new_marker()
    env = marked_env(marker)
    # a daemon: double fork, the survivor's parent is no longer us
    launcher = spawner.python("import subprocess, sys\n"
                              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],"
                              " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                              "print(p.pid, flush=True)", env=env, stdout=subprocess.PIPE, text=True)
    orphan = ProcRef.of(int(launcher.stdout.readline()))
    assert launcher.wait(timeout=30) == 0
    other = spawner.python("import time; time.sleep(120)")  # carries another marker: must survive
    try:
        assert orphan.alive() and leftovers(marker) == [orphan]
        report = reap(marker)
        assert report.ok and report.killed == [orphan] and leftovers(marker) == []
        assert other.poll() is None
    finally:
        kill(orphan)


def test_stale_markers_are_those_of_dead_kits(spawner):  # noqa: F811
    dead_owner = spawner.python("pass")
    dead_owner.wait(timeout=30)
    stale = f"recoverykit-{dead_owner.pid}-123-deadbeef"
    assert not owner_alive(stale) and owner_alive(new_marker())
    orphan = spawner.python("import time; time.sleep(120)", env={**os.environ, ENV_RUN_MARKER: stale})
    live = spawner.python("import time; time.sleep(120)")  # this kit's marker: owner alive
    deadline = time.monotonic() + 30
    while ProcRef.of(orphan.pid) not in stale_markers().get(stale, []) and time.monotonic() < deadline:
        time.sleep(0.01)  # environ is readable once the child has exec'd
    assert stale_markers()[stale] == [ProcRef.of(orphan.pid)]
    report = reap_stale(only=[stale])  # other engineers' stale runs are not this test's business
    assert ProcRef.of(orphan.pid) not in report.survivors
    assert orphan.wait(timeout=10) == -signal.SIGKILL and live.poll() is None


def test_marker_arguments_are_checked():
    with pytest.raises(InvalidArgument, match="not a run marker"):
        marked_env("my-marker")
    with pytest.raises(InvalidArgument, match="needs a marker"):
        reap("")


def test_the_kit_never_kills_itself_or_its_ancestors():
    for victim in (os.getpid(), os.getppid()):
        with pytest.raises(InvalidArgument, match="refusing"):
            kill(victim)
        with pytest.raises(InvalidArgument, match="refusing"):
            kill_tree(victim)
        with pytest.raises(InvalidArgument, match="refusing"):
            graceful_stop(victim)


def test_a_marked_process_reaping_its_own_marker_survives(spawner):  # noqa: F811
    marker = new_marker()
    code = ("import json, os\n"
            "from recoverykit.conformance.reaper import leftovers, reap\n"
            "m = os.environ['RECOVERYKIT_RUN_MARKER']\n"
            "print(json.dumps([len(leftovers(m)), len(reap(m).targets)]), flush=True)\n")
    proc = spawner.python(code, env=marked_env(marker), stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.strip() == "[0, 0]"
