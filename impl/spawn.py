"""How the runtime starts its control process and workers: forked from the adapter's zygote.

``warm()`` (called once by the adapter's entry point, while it is single-threaded) forks the zygote
(``zygote``); every later start is a fork of it, ~20 ms instead of an interpreter start and ~150 ms
of imports. ``RK_IMPL_START=spawn`` restores a plain interpreter per process (``python -m
<module>``); so does any failure to reach the zygote. A started process is a ``Child``: the part of
``Popen`` the supervisor uses, whichever way it was started.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import psutil

from .zygote import Zygote, ZygoteGone

log = logging.getLogger("recoverykit.impl.spawn")
PRELOAD = ["recoverykit.impl.control", "recoverykit.impl.worker"]
_zygote: Zygote | None = None


def mode() -> str:
    wanted = os.environ.get("RK_IMPL_START", "fork")
    return "fork" if wanted == "fork" and _zygote is not None and not _zygote.gone else "spawn"


def warm() -> None:
    """Fork the zygote now. Only the adapter's entry point calls this, before it starts any thread:
    a fork of a multi-threaded process may inherit a lock some other thread held."""
    global _zygote
    if os.environ.get("RK_IMPL_START", "fork") != "fork" or threading.active_count() > 1:
        return
    try:
        _zygote = Zygote(PRELOAD)
    except OSError as exc:  # every start falls back to an interpreter, and says so once here
        log.warning("no zygote (%s); runtime processes start as fresh interpreters", exc)


def start_all(modules: list[str], env: dict[str, str]) -> list[Child]:
    """Start one process per module, together (one round trip to the zygote for all of them)."""
    forked: list[int | ZygoteGone | None] = [None] * len(modules)
    if mode() == "fork" and modules:
        try:
            forked = _zygote.spawn_many([(m, env) for m in modules])  # type: ignore[union-attr, assignment]
        except ZygoteGone as exc:
            forked = [exc] * len(modules)
    return [Child(m, env, f) for m, f in zip(modules, forked, strict=True)]


class Child:
    """A runtime process, started either way. Only the reaper thread waits on it."""

    def __init__(self, module: str, env: dict[str, str], forked: int | ZygoteGone | None) -> None:
        """``forked``: the pid the zygote forked, why it could not, or None (no zygote: an interpreter)."""
        self.returncode: int | None = None
        self._done = threading.Event()
        self._popen: subprocess.Popen | None = None
        if isinstance(forked, int):
            self.pid = forked
            return
        if forked is not None:
            log.warning("zygote start of %s failed (%s); starting an interpreter instead", module, forked)
        self._popen = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.DEVNULL,
                                       stdout=sys.stderr.fileno(), stderr=sys.stderr.fileno(), env=env,
                                       close_fds=True)
        self.pid = self._popen.pid

    def reap(self) -> int:
        """Block until the process exits (called by exactly one thread)."""
        if self._popen is not None:
            code = self._popen.wait()
        else:
            code = _zygote.wait(self.pid)  # type: ignore[union-attr]
            if code is None:  # the zygote died first: the orphan is init's now; watch it by pid
                while _alive(self.pid):
                    time.sleep(0.05)
                code = 255
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


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
