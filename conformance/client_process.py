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
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import IO

import psutil
from recoverykit.conformance import proc_markers, subreaper
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
        with subreaper.spawning():
            return subreaper.own(subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                env=dict(env), cwd=cwd, start_new_session=True, close_fds=True,
            ))
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


def _stat_fields(pid: str) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2:].split()  # state ppid pgrp session ... (field 22, starttime, is [19])


def holds(pid: int | str, files: Collection[str]) -> bool:
    """Does the process have one of ``files`` open (paths, or ``pipe:[inode]`` as /proc/<pid>/fd shows them)?"""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") in files:
                return True
    return False


def kin(adapter_pid: int, files: Collection[str]) -> list[psutil.Process]:
    """Processes of the adapter's session or process group, or holding the run's private files (its stderr log,
    its stdio pipes) open: of the run even if they dropped the marker and left the adapter's tree (a double
    fork). Call while the adapter is alive or an unreaped zombie, so its pid (the session id) is not reused.
    A process that changed session, closed every inherited descriptor and dropped the marker cannot be
    told apart from a stranger's: the kit does not kill it (docs/certify.md, "Process hygiene")."""
    if not _linux_proc():
        return []
    me, found = os.getpid(), []
    try:
        since = _stat_fields(str(adapter_pid))
        since_ticks = int(since[19]) if since else 0
    except (IndexError, ValueError):
        since_ticks = 0
    key, mine = str(adapter_pid).encode(), str(me).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (me, adapter_pid):
            continue
        fields = _stat_fields(entry)
        if fields is None or len(fields) < 20 or fields[0] == b"Z":
            continue
        if fields[1] == mine and subreaper.own_child(int(entry)):
            # a child the kit started: another run's adapter, forked but not yet exec'd, holds copies of every
            # descriptor of the kit (this run's pipes and log too) for a moment. An escaped runtime process the
            # kit adopted as a subreaper (``subreaper.adopting``) is its child too, but never one it started.
            continue
        ours = key in (fields[2], fields[3])  # process group or session of the adapter
        if not ours and files and int(fields[19]) >= since_ticks:  # only a process started since can hold them
            ours = holds(entry, files)
        if ours:
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(int(entry)))
    return found


def _unmarked(found: list[psutil.Process], adapter_pid: int, marker: str | None) -> list[psutil.Process]:
    """Of ``found``, those that really escaped: no marker and not under the adapter, still so a while later (a
    process forked or exec'ing right now shows its parent and its environment a little late, and one exiting
    shows no environment at all; on a loaded machine either can last tens of milliseconds)."""
    def escaped(p: psutil.Process) -> bool:
        try:
            if adapter_pid in {a.pid for a in p.parents()}:
                return False
        except psutil.Error:
            return False  # gone: nothing to report
        if not marker:
            return True
        return proc_markers.has_memory(p.pid) and proc_markers.value_of(p.pid, MARKER_ENV) != marker
    suspects = [p for p in found if escaped(p)]
    for pause in (0.05, 0.1, 0.25):
        if not suspects:
            break
        time.sleep(pause)
        suspects = [p for p in suspects if alive(p) and escaped(p)]
    return suspects


def _linux_proc() -> bool:
    return os.path.isdir("/proc/self/fd")


def terminate(proc: subprocess.Popen, *, marker: str | None, grace_s: float, expect_exit: bool,
              files: Collection[str] = ()) -> list[int]:
    """End the adapter: let it exit (a full grace period if it was told to), SIGTERM its group, then SIGKILL.

    Returns the pids killed that neither descend from the adapter nor carry the marker (found by ``kin``):
    runtime processes that escaped the run's marker, for the caller to report.
    """
    family = descendants(proc.pid)
    known = {f.pid for f in family} | {proc.pid}
    if marker:
        family += [p for p in marked(marker) if p.pid not in known]
        known |= {p.pid for p in family}
    found = [p for p in kin(proc.pid, files) if p.pid not in known]
    family += found
    strays = _unmarked(found, proc.pid, marker)
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
    return [p.pid for p in strays]


def alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (a killed orphan may wait a while for a container's init to reap it)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
