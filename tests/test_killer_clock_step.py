"""The killer, the guard and the reaper across a wall-clock step.

A process's create_time is its start in clock ticks since boot plus the boot time, and the system derives the boot
time from the wall clock, so a step (NTP, a virtual machine paused or forked) moves every create_time computed
after it. CI at 5e65cfa ran across such a step (the kernel logged "crng reseeded due to virtual machine fork"):
kills that reported success killed nothing (the target looked recycled, so it counted as already gone) and four
tests waited out their timeouts, one for 600 s. Here the step is made by moving the boot time psutil reports,
after the kit read its own.
"""

import signal

import psutil
import pytest
from env_helpers import spawner  # noqa: F401  (fixture)
from recoverykit.conformance import killer, proc_guard
from recoverykit.conformance.killer import ProcRef, kill
from recoverykit.conformance.reaper import new_marker, owner_alive

STEP_S = 100.0


@pytest.fixture
def clock_step(monkeypatch):
    """From here on, every boot time psutil computes is ``STEP_S`` later (the kit's own base was read before)."""
    killer._clock()  # the kit's base, read before the step as in a kit process that started earlier
    stepped = psutil.boot_time() + STEP_S
    monkeypatch.setattr(psutil, "boot_time", lambda: stepped)
    monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: stepped)
    return STEP_S


def test_a_kill_after_a_clock_step_kills(spawner, clock_step):  # noqa: F811
    proc = spawner.python("import time; time.sleep(60)")
    report = kill(proc.pid)
    assert report.ok and len(report.killed) == 1, report
    assert proc.wait(timeout=10) == -signal.SIGKILL


def test_a_create_time_listed_on_either_side_of_the_step_names_the_process(spawner, clock_step):  # noqa: F811
    proc = spawner.python("import time; time.sleep(60)")
    before = killer.create_time(proc.pid)
    after = psutil.Process(proc.pid).create_time()  # what an adapter's psutil lists after the step
    assert abs(after - before - clock_step) < 0.05
    for listed in (before, after):
        assert ProcRef(proc.pid, listed).alive() and ProcRef(proc.pid, listed).process() is not None
        assert proc_guard.vet([{"pid": proc.pid, "create_time": listed}], spawner.marker) == [(proc.pid, before)]
    assert not ProcRef(proc.pid, before - 1000.0).alive()  # another start time is still another process
    assert kill(ProcRef(proc.pid, after)).ok and proc.wait(timeout=10) == -signal.SIGKILL


def test_the_reaper_never_takes_a_live_owner_for_gone_after_a_step(monkeypatch):
    """A reaper taking a live owner for gone would reap the processes of a run still going (another xdist worker's)."""
    marker = new_marker()  # before the step
    stepped = psutil.boot_time() + STEP_S
    monkeypatch.setattr(psutil, "boot_time", lambda: stepped)
    monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: stepped)
    assert owner_alive(marker)  # in this kit process (its base read before the step)
    killer._clock.cache_clear()  # a kit process that started after the step reads the stepped base
    try:
        assert owner_alive(marker)
    finally:
        killer._clock.cache_clear()
