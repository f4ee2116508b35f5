"""Starting and ending the adapter process: no shell, its own process group, nothing left behind.

Kept apart from the message handling in ``client`` because process hygiene has its own rules: the
adapter's descendants are collected *before* anything is killed (once the adapter dies they are
re-parented and psutil can no longer find them by ancestry), and a sweep by the run marker catches
processes that left the group (a runtime that daemonises itself).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import psutil
from recoverykit.conformance import proc_markers
from recoverykit.conformance.errors import AdapterCommandError

MARKER_ENV = "RECOVERYKIT_RUN_MARKER"


def split_command(command: str | Sequence[str]) -> list[str]:
    """The argv of an adapter command, split like a POSIX shell would but never run by one."""
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise AdapterCommandError(f"The adapter command {command!r} cannot be split into arguments ({exc}); "
                                      "check its quoting.") from None
    else:
        argv = [str(a) for a in command]
    if not argv:
        raise AdapterCommandError(f"The adapter command {command!r} is empty; pass the program that speaks the "
                                  "adapter protocol, e.g. --adapter 'python examples/demo_adapter.py'.")
    return argv


def spawn(argv: list[str], *, stderr: IO[bytes] | int, env: Mapping[str, str], cwd: Path | None) -> subprocess.Popen:
    try:
        return subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            env=dict(env), cwd=cwd, start_new_session=True, close_fds=True,
        )
    except FileNotFoundError:
        raise AdapterCommandError(f"The adapter program {argv[0]!r} was not found (command: {shlex.join(argv)}); "
                                  "give a path or a program on PATH.") from None
    except PermissionError:
        raise AdapterCommandError(f"The adapter program {argv[0]!r} is not executable (command: "
                                  f"{shlex.join(argv)}); chmod +x it or run it through its interpreter.") from None
    except OSError as exc:
        raise AdapterCommandError(f"The adapter command {shlex.join(argv)} could not be started: {exc}.") from None


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def marked(marker: str) -> list[psutil.Process]:
    """Processes of this user whose environment carries the run marker (they may have left the group)."""
    found = []
    me = os.getpid()
    for pid in proc_markers.carrying(MARKER_ENV, marker):
        if pid == me:
            continue
        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(pid))
    return found


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def peek_exit(pid: int) -> int | None:
    """The adapter's exit status (negative: killed by that signal) without reaping it, or None if running.

    Not reaping matters: while the adapter is an unreaped zombie its pid (which is also its process
    group id) cannot be reused, so signalling the group can never hit another run's processes.
    """
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return 0  # already reaped elsewhere
    if info is None:
        return None
    return -info.si_status if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else info.si_status


def _wait_exit(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while peek_exit(pid) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)  # one waitid per poll; this wait is in every case's teardown
    return True


def terminate(proc: subprocess.Popen, *, marker: str | None, grace_s: float, expect_exit: bool) -> None:
    """End the adapter: let it exit (a full grace period if it was told to), SIGTERM its group, then SIGKILL."""
    family = descendants(proc.pid)
    if marker:
        known = {f.pid for f in family} | {proc.pid}
        family += [p for p in marked(marker) if p.pid not in known]
    if not _wait_exit(proc.pid, grace_s if expect_exit else min(grace_s, 0.2)):
        _signal_group(proc.pid, signal.SIGTERM)
        if not _wait_exit(proc.pid, grace_s):
            _signal_group(proc.pid, signal.SIGKILL)
            _wait_exit(proc.pid, max(grace_s, 5.0))
    _signal_group(proc.pid, signal.SIGKILL)  # stragglers in the group; safe: the adapter is not reaped yet
    proc.wait()
    for child in family:
        with contextlib.suppress(psutil.Error):
            child.kill()
    deadline = time.monotonic() + grace_s
    while any(alive(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.002)


def alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (a killed orphan may wait a while for a container's init to reap it)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
