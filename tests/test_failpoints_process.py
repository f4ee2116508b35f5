"""Failpoints in real processes: pause is reported and held, the kit kills from outside, crash exits by SIGKILL."""

import signal
import subprocess
import time

import pytest
from env_helpers import short_dir, spawner  # noqa: F401  (fixtures)
from recoverykit.chaos.failpoints import arm_env
from recoverykit.conformance.broker import FailpointBroker
from recoverykit.conformance.killer import ProcRef, exit_status, kill

RUNTIME = """
import sys
from recoverykit.conformance.failpoint_client import failpoint
for step in range(3):
    failpoint("tool.result.commit.before", "work-%d" % step)
    print("committed", step, flush=True)
failpoint("usage.persist.after", "work-x")
print("done", flush=True)
"""


def _runtime(spawner, broker, spec):  # noqa: F811
    env = spawner.env(**arm_env(spec, socket_path=broker.path))
    return spawner.python(RUNTIME, env=env, stdout=subprocess.PIPE, text=True)


def test_a_paused_process_is_reported_then_killed_from_outside(spawner, short_dir):  # noqa: F811
    with FailpointBroker(short_dir) as broker:
        proc = _runtime(spawner, broker, {"tool.result.commit.before": "1*off->1*pause"})
        hit = broker.wait_for_hit("tool.result.commit.before", timeout=30)
        assert (hit.pid, hit.hit, hit.work_id, hit.action) == (proc.pid, 2, "work-1", "pause")
        assert hit.peer_pid == proc.pid  # the kernel's word, not the runtime's
        assert hit.held and proc.poll() is None
        ref = ProcRef.of(proc.pid)
        report = kill(ref)
        assert report.ok and report.killed == [ref] and not ref.alive()
        assert exit_status(proc) == -signal.SIGKILL
        assert proc.stdout.read() == "committed 0\n"  # hit 2 never committed
        deadline = time.monotonic() + 10
        while hit.peer_closed is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert hit.peer_closed is not None and broker.held() == []  # the broker saw the held process die


def test_released_pause_continues_and_the_chain_is_used_up(spawner, short_dir):  # noqa: F811
    with FailpointBroker(short_dir) as broker:
        proc = _runtime(spawner, broker, {"tool.result.commit.before": "1*pause->1*off->1*pause"})
        first = broker.wait_for_hit("tool.result.commit.before", timeout=30)
        assert broker.release(first) == 1
        third = broker.wait_for_hit("tool.result.commit.before", timeout=30, after=first.seq)
        assert third.hit == 3 and third.work_id == "work-2"
        broker.release(point="tool.result.commit.before")
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert out.splitlines() == ["committed 0", "committed 1", "committed 2", "done"]
        assert [h.hit for h in broker.hits()] == [1, 3]


def test_crash_kills_the_process_with_sigkill(spawner, short_dir):  # noqa: F811
    with FailpointBroker(short_dir) as broker:
        proc = _runtime(spawner, broker, {"usage.persist.after": "crash"})
        assert exit_status(proc, timeout=30) == -signal.SIGKILL
        assert proc.stdout.read().splitlines()[-1] == "committed 2"
        hit = broker.wait_for_hit("usage.persist.after", timeout=5)
        assert hit.action == "crash" and hit.pid == proc.pid


def test_broker_answer_crash_makes_a_paused_process_kill_itself(spawner, short_dir):  # noqa: F811
    with FailpointBroker(short_dir) as broker:
        proc = _runtime(spawner, broker, {"tool.result.commit.before": "pause"})
        hit = broker.wait_for_hit(timeout=30)
        broker.release(hit, resume="crash")
        assert exit_status(proc, timeout=30) == -signal.SIGKILL
        assert proc.stdout.read() == ""


def test_a_runtime_continues_when_the_broker_is_gone(spawner, short_dir):  # noqa: F811
    broker = FailpointBroker(short_dir)
    proc = _runtime(spawner, broker, {"tool.result.commit.before": "1*pause"})
    broker.wait_for_hit(timeout=30)
    broker.close()  # the kit died: a runtime must not hang forever
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.endswith("done\n")


def test_sleep_reports_and_goes_on(spawner, short_dir):  # noqa: F811
    with FailpointBroker(short_dir) as broker:
        proc = _runtime(spawner, broker, {"usage.persist.after": "sleep(10)"})
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and out.endswith("done\n")
        assert [(h.point, h.action) for h in broker.hits()] == [("usage.persist.after", "sleep")]


@pytest.mark.parametrize("spec", ["", "tool.dispatch.after=pause"])
def test_unarmed_points_do_nothing(spawner, short_dir, spec):  # noqa: F811
    with FailpointBroker(short_dir) as broker:
        env = spawner.env(RECOVERYKIT_FAILPOINTS=spec, RECOVERYKIT_FAILPOINT_SOCKET=broker.path)
        proc = spawner.python(RUNTIME, env=env, stdout=subprocess.PIPE, text=True)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and out.endswith("done\n") and broker.hits() == []


FORKING = """
import os
from recoverykit.conformance.failpoint_client import failpoint
failpoint("tool.dispatch.after", "before-fork")      # hit 1 in the parent: off
child = os.fork()
if child == 0:
    failpoint("tool.dispatch.after", "child")         # hit 1 in the child: off again
    os._exit(0)
os.waitpid(child, 0)
failpoint("tool.dispatch.after", "parent")            # hit 2 in the parent: pause
print("released", flush=True)
"""


def test_hits_are_counted_per_process_across_fork(spawner, short_dir):  # noqa: F811
    with FailpointBroker(short_dir) as broker:
        env = spawner.env(**arm_env({"tool.dispatch.after": "1*off->1*pause"}, socket_path=broker.path))
        proc = spawner.python(FORKING, env=env, stdout=subprocess.PIPE, text=True)
        hit = broker.wait_for_hit("tool.dispatch.after", timeout=30)
        assert (hit.pid, hit.hit, hit.work_id) == (proc.pid, 2, "parent")
        broker.release(hit)
        out, _ = proc.communicate(timeout=30)
        assert out == "released\n" and len(broker.hits()) == 1
