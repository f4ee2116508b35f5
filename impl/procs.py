"""Starting, stopping and listing the runtime's processes (control, workers, tool shims).

Every process gets the run marker, the failpoint spec and broker socket, the host identity and the
clock offset in its environment. A reaper thread per child waits on it, so a process the kit kills
never lingers as a zombie that psutil would still report. Graceful stop is SIGTERM, a bounded wait,
then SIGKILL; tool shims are left running on a graceful stop (a restarted worker reattaches to them)
and only killed on ``shutdown``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
import time

import psutil

from . import schema, tools
from .config import Config
from .spawn import Child, start_all
from .worker import wake_all

log = logging.getLogger("recoverykit.impl.procs")
STOP_GRACE_S = 20.0
SHUTDOWN_GRACE_S = 3.0
READY_TIMEOUT_S = 30.0


class Runtime:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.control: Child | None = None
        self.workers: list[Child] = []
        self.lock = threading.Lock()
        self.migrated = False

    def env(self) -> dict[str, str]:
        cfg = self.cfg
        env = {**os.environ, "RK_IMPL_DATA_DIR": str(cfg.path), "RK_IMPL_HOST_ID": cfg.host_id,
               "RK_IMPL_CLOCK_OFFSET_S": repr(float(cfg.clock_offset_s)),
               "RECOVERYKIT_FAILPOINTS": cfg.failpoints or "", "RECOVERYKIT_FAILPOINT_SOCKET": cfg.failpoint_socket}
        if cfg.run_marker:
            env["RECOVERYKIT_RUN_MARKER"] = cfg.run_marker
        return env

    def _spawn(self, *modules: str) -> list[Child]:
        procs = start_all(list(modules), self.env())
        for proc in procs:
            threading.Thread(target=self._reap, args=(proc,), daemon=True, name=f"reap-{proc.pid}").start()
        return procs

    def _reap(self, proc: Child) -> None:
        proc.reap()
        # A dead process may have owned work: surviving workers confirm its death and recover it now.
        wake_all(self.cfg.run_dir)

    def start(self) -> None:
        # Control and workers start together (migrations are safe to race: each one is a BEGIN IMMEDIATE
        # that re-checks the version); `start` answers once all of them are ready.
        with self.lock:
            if not self.migrated:  # once per adapter: later starts find the schema current (and so would a read)
                self._migrate()
                self.migrated = True
            with_control = not _running(self.control)
            if with_control:
                self.cfg.run_dir.mkdir(parents=True, exist_ok=True)
                (self.cfg.run_dir / "control.ready").unlink(missing_ok=True)
            new = self._spawn_workers(with_control)
            if with_control:
                self.control, *new = new
                self._await(lambda: (self.cfg.run_dir / "control.ready").exists(), self.control, "control")
            self._await_workers(new)

    def _migrate(self) -> None:
        """Bring both databases to the current schema before anything starts, so the processes that start
        together do not queue on SQLite's write lock to find there is nothing to do. A failure here is
        not ours to report: each process meets it again and records it (recovery_failed_migration)."""
        for open_db in (schema.open_runtime_db, schema.open_usage_db):
            try:
                open_db(self.cfg.path).conn.close()
            except Exception as exc:
                log.warning("migration before start failed (%s); the runtime's processes will report it", exc)

    def start_workers(self) -> None:
        with self.lock:
            self._await_workers(self._spawn_workers())

    def _spawn_workers(self, with_control: bool = False) -> list[Child]:
        """Start the missing workers (and control first, if asked), all in one request to the zygote."""
        self.workers = [w for w in self.workers if _running(w)]
        wanted = int(os.environ.get("RK_IMPL_WORKERS") or self.cfg.workers)  # operator override (tests: 1)
        first = ["recoverykit.impl.control"] if with_control else []
        new = self._spawn(*first, *["recoverykit.impl.worker"] * (wanted - len(self.workers)))
        self.workers += new[len(first):]
        return new

    def _await_workers(self, new: list[Child]) -> None:
        for w in new:
            ready = self.cfg.run_dir / f"ready-{w.pid}"
            self._await(ready.exists, w, "worker", fatal=False)

    def _await(self, done, proc: Child, role: str, fatal: bool = True) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not done():
            if proc.poll() is not None:
                if fatal:
                    raise RuntimeError(f"the {role} process exited with status {proc.returncode} while starting")
                log.error("%s %d exited with %s while starting", role, proc.pid, proc.returncode)
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {role} process did not become ready in {READY_TIMEOUT_S}s")
            time.sleep(0.003)

    def stop_workers(self) -> None:
        with self.lock:
            _terminate(self.workers)
            self.workers = []

    def stop(self, grace_s: float = STOP_GRACE_S, together: bool = False) -> None:
        """Workers first, then control (it keeps admitting until they are gone); ``together``: all at once."""
        with self.lock:
            control = [self.control] if self.control is not None else []
            if together:
                _terminate([*self.workers, *control], grace_s)
            else:
                _terminate(self.workers, grace_s)
                _terminate(control, grace_s)
            self.workers, self.control = [], None
            for path in self.cfg.run_dir.glob("wake-*.sock"):
                path.unlink(missing_ok=True)

    def shutdown(self) -> None:
        # The session is over: a process held at a failpoint is not waited for, and nothing will submit
        # again, so control need not outlive the workers.
        self.stop(SHUTDOWN_GRACE_S, together=True)
        if self.cfg.path not in self.cfg.run_dir.parents:  # the short socket dir under /tmp is ours to remove
            shutil.rmtree(self.cfg.run_dir, ignore_errors=True)
        for proc in tools.tool_pids(self.cfg.path):
            with contextlib.suppress(psutil.Error):
                proc.kill()

    def processes(self) -> list[dict]:
        out = []
        with self.lock:
            mine = [("control", self.control)] if self.control else []
            mine += [("worker", w) for w in self.workers]
        for role, proc in mine:
            if _running(proc):
                info = _identity(proc.pid)
                if info:
                    out.append({"role": role, **info})
        for proc in tools.tool_pids(self.cfg.path):
            info = _identity(proc.pid)
            if info:
                out.append({"role": "tool", **info})
        return out


def _running(proc: Child | None) -> bool:
    """Alive and not a zombie (the reaper thread may not have seen a death yet)."""
    if proc is None or proc.returncode is not None:
        return False
    return _identity(proc.pid) is not None


def _identity(pid: int) -> dict | None:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return {"pid": pid, "create_time": proc.create_time()}
    except psutil.Error:
        return None


def _terminate(procs: list[Child], grace_s: float = STOP_GRACE_S) -> None:
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("process %d ignored SIGTERM for %ss; killing it", p.pid, grace_s)
            p.kill()
            p.wait()
