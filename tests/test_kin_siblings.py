"""An adapter's close never kills another run's adapter that the kit is forking at that moment.

Between fork and exec a new child of the kit holds copies of every descriptor the kit has, this run's
stdio pipes and stderr log among them. ``client_process.kin`` looks for escaped runtime processes by
those descriptors, so without care it took a sibling adapter being started by another scenario
thread for a stray and SIGKILLed it (seen under load as "the adapter exited with status -9" during
``init``). A child of the kit is never an escaped runtime process: those are reparented to init.
"""

from __future__ import annotations

import os
import subprocess
import sys

from recoverykit.conformance import client_process


def test_a_child_of_the_kit_holding_the_runs_pipe_is_not_kin():
    adapter = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdin=subprocess.PIPE,
                               start_new_session=True)
    files = frozenset({os.readlink(f"/proc/self/fd/{adapter.stdin.fileno()}")})  # pipe:[inode]
    # a sibling started after the adapter that still holds the adapter's pipe, as a fork before its exec does
    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                               pass_fds=(adapter.stdin.fileno(),), start_new_session=True)
    try:
        assert client_process.holds(sibling.pid, files)  # the descriptor is really there
        found = {p.pid for p in client_process.kin(adapter.pid, files)}
        assert sibling.pid not in found
    finally:
        for proc in (sibling, adapter):
            proc.kill()
            proc.wait()


def test_an_escaped_process_holding_the_runs_pipe_is_still_kin():
    adapter = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdin=subprocess.PIPE,
                               start_new_session=True)
    files = frozenset({os.readlink(f"/proc/self/fd/{adapter.stdin.fileno()}")})
    fd = adapter.stdin.fileno()
    # a double fork: the grandchild is reparented away from the kit and keeps the pipe
    launcher = subprocess.run(
        [sys.executable, "-c", "import os, subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
         "'import time; time.sleep(30)'], pass_fds=(int(sys.argv[1]),), start_new_session=True, "
         "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid)",
         str(fd)], pass_fds=(fd,), capture_output=True, text=True, timeout=30)
    escaped = int(launcher.stdout.strip())
    try:
        assert escaped in {p.pid for p in client_process.kin(adapter.pid, files)}
    finally:
        with_kill(escaped)
        adapter.kill()
        adapter.wait()


def with_kill(pid: int) -> None:
    import contextlib
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_a_process_without_memory_is_no_proof_of_a_dropped_marker():
    """An exiting process (memory released, not yet a zombie) shows no environment; chaos once reported such a
    process as having dropped the run marker. ``has_memory`` tells it from a live one started with an empty
    environment, which still shows its command line."""
    import subprocess
    import sys

    from recoverykit.conformance import proc_markers
    assert proc_markers.has_memory(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env={})
    try:
        assert proc_markers.has_memory(child.pid)
        assert proc_markers.value_of(child.pid, "RECOVERYKIT_RUN_MARKER") is None
    finally:
        child.kill()
        child.wait()
    assert not proc_markers.has_memory(child.pid)  # reaped: gone


def test_while_the_kit_adopts_orphans_a_sibling_it_spawned_is_not_kin_but_an_adopted_one_is():
    """As a subreaper (conformance.subreaper) the kit's children include adopted runtime processes: only the
    ones it spawned itself (``own``) are skipped."""
    from recoverykit.conformance import subreaper
    with subreaper.adopting() as on:
        adapter = subreaper.own(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                                 stdin=subprocess.PIPE, start_new_session=True))
        files = frozenset({os.readlink(f"/proc/self/fd/{adapter.stdin.fileno()}")})
        sibling = subreaper.own(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                                 pass_fds=(adapter.stdin.fileno(),), start_new_session=True))
        stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],  # not the kit's own
                                 pass_fds=(adapter.stdin.fileno(),), start_new_session=True)
        try:
            found = {p.pid for p in client_process.kin(adapter.pid, files)}
            assert sibling.pid not in found
            assert stray.pid in found or not on
        finally:
            for proc in (stray, sibling, adapter):
                proc.kill()
                proc.wait()
