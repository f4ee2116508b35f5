"""How the runtime starts its control process and workers: forked from a preloaded forkserver.

A control or worker process spends ~150 ms importing sqlite-utils, psutil and this runtime before it
does anything; a chaos cycle starts them twice (before and after the kill). The forkserver imports
them once per adapter, and every start after that is a fork of a clean, single-threaded process that
has run no runtime logic: what a fresh interpreter would be after its imports. Nothing durable lives
in it, so killing "the whole runtime" (control, workers, tools) loses exactly what it lost before.

``RK_IMPL_START=spawn`` restores a plain interpreter per process (``python -m <module>``); so does
any failure to reach the forkserver. A started process is a ``Child``: the part of ``Popen`` the
supervisor uses, whichever way it was started.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import subprocess
import sys
import threading

log = logging.getLogger("recoverykit.impl.spawn")
PRELOAD = ["recoverykit.impl.control", "recoverykit.impl.worker"]
_ctx = multiprocessing.get_context("forkserver") if "forkserver" in multiprocessing.get_all_start_methods() else None


_enabled = False


def mode() -> str:
    wanted = os.environ.get("RK_IMPL_START", "forkserver")
    return "forkserver" if _enabled and wanted == "forkserver" and _ctx is not None else "spawn"


def warm() -> None:
    """Use the forkserver from now on and start it in the background, so the first ``start`` is a fork.

    Only the adapter's entry point calls this. A forked child re-imports the parent's ``__main__``
    unless it is a ``-m pkg`` or guarded script (multiprocessing's "safe importing of the main
    module"); the adapter's entry points are, an arbitrary program embedding ``Runtime`` may not be.
    """
    global _enabled
    _enabled = True
    if mode() != "forkserver":
        return

    def run() -> None:
        try:
            multiprocessing.forkserver.ensure_running()
        except Exception as exc:  # the first start falls back to spawn and says why
            log.warning("forkserver not started: %s", exc)
    multiprocessing.set_forkserver_preload(PRELOAD)
    threading.Thread(target=run, daemon=True, name="forkserver-warm").start()


def _forked_main(module: str, env: dict[str, str]) -> None:
    """Runs in the forked child: become the process ``python -m module`` with ``env`` would have been."""
    os.environ.clear()
    os.environ.update(env)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)  # stdout is never the adapter's protocol channel
    failpoints = importlib.import_module("recoverykit.impl.failpoints")
    failpoints.reload()  # imported in the forkserver, before this process's failpoint spec existed
    sys.exit(importlib.import_module(module).main())


class Child:
    """A runtime process, started either way. Only the reaper thread waits on it."""

    def __init__(self, module: str, env: dict[str, str]) -> None:
        self.returncode: int | None = None
        self._done = threading.Event()
        self._proc: subprocess.Popen | multiprocessing.process.BaseProcess
        if mode() == "forkserver":
            try:
                proc = _ctx.Process(target=_forked_main, args=(module, env), daemon=False)
                proc.start()
                self._proc = proc
                self.pid = proc.pid
                return
            except Exception as exc:
                log.warning("forkserver start of %s failed (%s); starting an interpreter instead", module, exc)
        self._proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.DEVNULL,
                                      stdout=sys.stderr.fileno(), stderr=sys.stderr.fileno(), env=env, close_fds=True)
        self.pid = self._proc.pid

    def reap(self) -> int:
        """Block until the process exits (called by exactly one thread)."""
        if isinstance(self._proc, subprocess.Popen):
            code = self._proc.wait()
        else:
            self._proc.join()
            code = self._proc.exitcode if self._proc.exitcode is not None else 255
        self.returncode = code
        self._done.set()
        return code

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
