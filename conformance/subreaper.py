"""No orphan of a run escapes: the kit becomes the subreaper of everything it starts (Linux ``PR_SET_CHILD_SUBREAPER``).

A runtime process that double-forks, changes session, closes every descriptor it inherited and drops the
run marker cannot be told apart from a stranger's by the marker, the adapter's session or the run's files
(``client_process.kin``). But on Linux a process marked as a *child subreaper* adopts every orphaned
descendant: when the daemon's parent exits, the daemon becomes the kit's own child instead of init's. So
``adopting()`` (around a ``certify`` or ``chaos`` run) makes the kit a subreaper, and at its end kills and
waits every child the kit adopted: a child it did not start itself (``own``: the adapters and the pytest
controller it spawned, recorded when spawned) and that is not in the kit's own session (the short helpers it
runs with ``subprocess.run``, e.g. git), started since the run began. While the run goes on, a thread waits
for adopted children that died (a killed orphan would otherwise stay a zombie of the kit, and a runtime
asking "is pid N alive?" would be told yes). An interrupted run (``interrupts.stop_everything``) kills the
adopted children too. Elsewhere than Linux this is a no-op (``ENABLED`` is False): there an escaped daemon
is found only by the marker and the session, as before.

A helper the kit starts in a session of its own must be recorded with ``own`` (inside ``spawning``), as
``client_process.spawn`` and the chaos pytest controller are: otherwise it would count as adopted.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import weakref
from collections.abc import Iterator
from subprocess import Popen

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
POLL_S = 0.05  # how long an adopted child that died may stay a zombie of the kit
ENABLED = sys.platform.startswith("linux") and os.path.isdir("/proc/self/task")

_OWN: weakref.WeakSet[Popen] = weakref.WeakSet()
_LOCK = threading.Lock()
_SPAWNING = [0]  # Popen calls in flight: a child forked but not yet exec'd is the kit's own, not adopted
_ACTIVE: list[float] = []  # the start (clock ticks since boot) of each adopting() block in force


def _prctl(option: int, value: int = 0) -> int | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None
    if option == PR_GET_CHILD_SUBREAPER:
        out = ctypes.c_int(0)
        rc = libc.prctl(option, ctypes.byref(out), 0, 0, 0)
        return None if rc != 0 else out.value
    rc = libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0)
    return None if rc != 0 else 0


def own(proc: Popen) -> Popen:
    """``proc`` was started by the kit itself (an adapter, the chaos pytest controller): never an adopted orphan."""
    with _LOCK:
        _OWN.add(proc)
    return proc


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around a ``Popen`` call: its child, forked but not yet returned as a Popen, is the kit's own."""
    with _LOCK:
        _SPAWNING[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _SPAWNING[0] -= 1


def own_child(pid: int) -> bool:
    """Is ``pid`` (a child of the kit) one the kit started, or possibly one being started right now? Outside
    ``adopting()`` every child is: an escaped runtime process is then reparented to init, never to the kit."""
    with _LOCK:
        return not _ACTIVE or _SPAWNING[0] > 0 or any(p.pid == pid for p in _OWN)


def _children() -> list[int]:
    pids: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/children") as fh:
                pids.update(int(p) for p in fh.read().split())
    return sorted(pids)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, session, start in clock ticks since boot) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    try:
        return fields[0].decode(), int(fields[3]), int(fields[19])
    except (IndexError, ValueError):
        return None


def adopted() -> list[int]:
    """The kit's children that it adopted as a subreaper during a run (dead ones included, as zombies)."""
    if not ENABLED or not _ACTIVE:
        return []
    session, since = os.getsid(0), min(_ACTIVE)
    out = []
    for pid in _children():
        st = _stat(pid)
        if st is None or st[1] == session or st[2] < since or own_child(pid):
            continue
        out.append(pid)
    return out


def _wait(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def collect_dead() -> int:
    """Wait for every adopted child that died; how many."""
    n = 0
    for pid in adopted():
        st = _stat(pid)
        if st is not None and st[0] in ("Z", "X") and _wait(pid):
            n += 1
    return n


def reap_adopted(rounds: int = 20) -> list[int]:
    """Kill and wait every adopted child; again while killing one makes its own children the kit's (a daemon's
    workers), at most ``rounds`` times. The pids killed."""
    killed: list[int] = []
    for _ in range(rounds):
        pids = adopted()
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return killed


def _since_boot_ticks() -> int:
    """Now, in the clock ticks since boot that /proc/<pid>/stat gives a process's start in (less one: rounding)."""
    with open("/proc/uptime") as fh:
        uptime = float(fh.read().split()[0])
    return int(uptime * os.sysconf("SC_CLK_TCK")) - 1


@contextlib.contextmanager
def adopting() -> Iterator[bool]:
    """Make the kit a subreaper for the block; at its end kill and wait every child it adopted. Yields whether
    it is in force (False off Linux, or when prctl is refused: then nothing changes)."""
    before = _prctl(PR_GET_CHILD_SUBREAPER) if ENABLED else None
    if before is None or _prctl(PR_SET_CHILD_SUBREAPER, 1) is None:
        yield False
        return
    stop = threading.Event()
    _ACTIVE.append(_since_boot_ticks())

    def collector() -> None:
        while not stop.wait(POLL_S):
            with contextlib.suppress(Exception):
                collect_dead()

    thread = threading.Thread(target=collector, name="recoverykit-subreaper", daemon=True)
    thread.start()
    try:
        yield True
    finally:
        stop.set()
        thread.join()
        with contextlib.suppress(Exception):
            reap_adopted()
        _ACTIVE.pop()
        if not _ACTIVE:
            _prctl(PR_SET_CHILD_SUBREAPER, before)
