"""Starting, listing and stopping the runtime's processes, the way the kit needs them.

``Supervisor.spawn`` starts one process (no shell) with the kit's environment (``RuntimeEnv.environ``:
run marker, failpoints, host id, clock offset ...), reaps it from a thread whoever kills it, and returns
once it is ready: ``ready="file"`` waits for it to call ``signal_ready()``, a callable is polled, None
does not wait. A process that exits before it is ready is an error with its exit status.

``processes()`` is what ``processes`` answers: every live, non-zombie process the supervisor started,
with its role, and every live descendant of them as ``tool`` (a probe tool the runtime runs as a child),
with psutil's create time so the kit never kills a reused pid. On Linux the adapter makes itself a
child subreaper, so a tool whose worker the kit killed is re-parented to the adapter, not to init, and
stays listed (and reaped) until it ends. ``stop()`` is SIGTERM, a bounded wait, then SIGKILL; with ``tools``
the strays (descendants that are not supervised) are swept only after that, so a worker always gets its
SIGTERM and its grace period.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

READY_TIMEOUT_S = 30.0
STOP_GRACE_S = 10.0
PR_SET_CHILD_SUBREAPER = 36


class StartFailed(RuntimeError):
    """A runtime process exited, or never became ready, while starting."""


@dataclass
class Child:
    role: str
    popen: subprocess.Popen
    create_time: float | None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return identity(self.pid, self.create_time) is not None


def identity(pid: int, create_time: float | None = None) -> dict | None:
    """``{"pid", "create_time"}`` of a live, non-zombie process (the same one, if ``create_time`` is given)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        started = proc.create_time()
    except psutil.Error:
        return None
    if create_time is not None and abs(started - create_time) > 0.05:
        return None  # the pid was reused
    return {"pid": pid, "create_time": started}


def become_subreaper() -> bool:
    """Orphaned descendants come to this process instead of init (Linux); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class Supervisor:
    def __init__(self, subreaper: bool = True) -> None:
        self.children: list[Child] = []
        self.lock = threading.RLock()
        self.subreaper = become_subreaper() if subreaper else False

    def spawn(self, argv: list[str], env: dict[str, str], role: str = "worker",
              ready: str | Callable[[], bool] | None = "file", cwd: str | None = None,
              timeout_s: float = READY_TIMEOUT_S) -> Child:
        ready_file = None
        if ready == "file":
            ready_file = Path(env.get("RECOVERYKIT_DATA_DIR", "/tmp")) / f".ready-{os.urandom(6).hex()}"
            env = {**env, "RECOVERYKIT_READY_FILE": str(ready_file)}
        popen = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(),
                                 stderr=sys.stderr.fileno(), close_fds=True)
        found = identity(popen.pid)
        child = Child(role, popen, found["create_time"] if found else None)
        threading.Thread(target=self._reap, args=(child,), daemon=True, name=f"reap-{popen.pid}").start()
        with self.lock:
            self.children.append(child)
        check = ready_file.exists if ready_file is not None else ready
        if callable(check):
            deadline = time.monotonic() + timeout_s
            while not check():
                if popen.poll() is not None or not child.alive():
                    # poll() says None while the reaper thread is inside wait(): wait for its status briefly
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        popen.wait(2)
                    raise StartFailed(f"{role} {argv!r} exited with status {popen.returncode} while starting")
                if time.monotonic() > deadline:
                    raise StartFailed(f"{role} {argv!r} did not become ready in {timeout_s}s")
                time.sleep(0.01)
        if ready_file is not None:
            ready_file.unlink(missing_ok=True)
        return child

    def _reap(self, child: Child) -> None:
        """Wait for the process whoever ends it, and say so on stderr: a worker that died is evidence."""
        code = child.popen.wait()
        print(f"recoverykit.adapter: {child.role} {child.pid} exited with status {code}", file=sys.stderr, flush=True)

    def live(self, role: str | None = None) -> list[Child]:
        with self.lock:
            self.children = [c for c in self.children if c.alive()]
            return [c for c in self.children if role is None or c.role == role]

    def processes(self, extra: list[tuple[str, int, float | None]] = ()) -> list[dict]:
        """Every live runtime process: started here (their role), their descendants and orphans (``tool``),
        and ``extra`` (role, pid, create_time) the runtime recorded itself."""
        out: dict[int, dict] = {}
        for child in self.live():
            out[child.pid] = {"role": child.role, "pid": child.pid, "create_time": child.create_time}
        for pid in self._descendants():
            if pid not in out:
                found = identity(pid)
                if found:
                    out[pid] = {"role": "tool", **found}
        for role, pid, create_time in extra:
            found = identity(pid, create_time) if pid else None
            if found and pid not in out:
                out[pid] = {"role": role, **found}
        return list(out.values())

    def _descendants(self) -> list[int]:
        roots = [c.pid for c in self.live()]
        if self.subreaper:
            self._reap_orphans()
            roots = [os.getpid()]
        pids: list[int] = []
        for root in roots:
            with contextlib.suppress(psutil.Error):
                pids += [p.pid for p in psutil.Process(root).children(recursive=True)]
        return pids

    def _reap_orphans(self) -> None:
        """Orphans re-parented to this subreaper are ours to wait for; the tracked ones have their threads."""
        with self.lock:
            tracked = {c.pid for c in self.children}
        with contextlib.suppress(psutil.Error):
            for proc in psutil.Process().children():
                if proc.pid not in tracked:
                    with contextlib.suppress(ChildProcessError, psutil.Error):
                        if proc.status() == psutil.STATUS_ZOMBIE:
                            os.waitpid(proc.pid, os.WNOHANG)

    def stop(self, role: str | None = None, grace_s: float = STOP_GRACE_S, tools: bool = False) -> None:
        """Graceful: SIGTERM the supervised processes (of ``role``, or all), wait up to ``grace_s``, SIGKILL any
        still alive; only then, with ``tools``, SIGKILL every stray descendant left (a tool child, an orphan).

        The supervised processes are never among the strays: with the adapter a child subreaper, its own
        descendants include them, and sweeping first would SIGKILL the worker before its SIGTERM (a graceful
        restart that was really a kill). A worker may end its own tools in its grace period; what it leaves is
        swept. Strays are named before the SIGTERM too (pid and create time), since without a subreaper a
        worker's children go to init when it exits."""
        with self.lock:
            chosen = [c for c in self.children if role is None or c.role == role]
        strays = self._strays(chosen) if tools else {}
        for child in chosen:
            if child.alive():
                with contextlib.suppress(OSError):
                    child.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in chosen:
            while child.alive() and time.monotonic() < deadline:
                time.sleep(0.01)
            if child.alive():
                with contextlib.suppress(OSError):
                    child.popen.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.popen.wait(5)
        with self.lock:
            self.children = [c for c in self.children if c not in chosen]
        if not tools:
            return
        strays.update(self._strays(chosen))  # orphans the stopped processes left to this subreaper
        killed = []
        for pid, create_time in strays.items():
            if identity(pid, create_time) is not None:  # the same process still (a pid may be reused)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
        deadline = time.monotonic() + 2.0  # SIGKILL is asynchronous: wait until the tools are really gone
        while any(identity(pid, strays[pid]) for pid in killed) and time.monotonic() < deadline:
            if self.subreaper:
                self._reap_orphans()
            time.sleep(0.01)
        if self.subreaper:
            self._reap_orphans()

    def _strays(self, chosen: list[Child]) -> dict[int, float | None]:
        """Descendants that are not supervised processes, nor below a supervised process that is not being
        stopped (another role's tools are its own): pid -> create time."""
        with self.lock:
            supervised = {c.pid for c in self.children if c.alive()}
        stopping = {c.pid for c in chosen}
        spared: set[int] = set()
        for pid in supervised - stopping:
            spared.add(pid)
            with contextlib.suppress(psutil.Error):
                spared.update(p.pid for p in psutil.Process(pid).children(recursive=True))
        out: dict[int, float | None] = {}
        for pid in self._descendants():
            if pid in supervised or pid in spared:
                continue
            found = identity(pid)
            if found is not None:
                out[pid] = found["create_time"]
        return out
