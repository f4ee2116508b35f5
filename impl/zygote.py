"""The zygote: a fork of the adapter, made before it starts any thread, that forks runtime processes.

A control or worker process spends ~150 ms importing sqlite-utils, psutil and this runtime before it
does anything, and a chaos cycle starts them twice. The adapter imports them once, forks the zygote
while it is still single-threaded, and from then on every runtime process is a fork of the zygote:
a process that has run no runtime logic and holds no state, i.e. what a fresh interpreter would be
after its imports. multiprocessing's forkserver does the same job but execs a second interpreter
that imports everything again, plus a resource-tracker process: ~250 ms of CPU for every adapter,
and the chaos runner starts one adapter per case.

Protocol on a socketpair, one JSON object per line:

- adapter -> zygote ``{"module": "recoverykit.impl.worker", "env": {...}}``: fork one process;
- zygote -> adapter ``{"pid": N}`` (answers in request order) or ``{"error": "..."}``;
- zygote -> adapter ``{"exit": N, "code": C}`` when a child ends (C < 0: killed by signal -C).

The zygote exits when the adapter's end closes. Its children live on: they belong to the runtime,
and the runtime (or the kit) stops them.

Standbys: a fork costs ~3.5 ms here (the zygote's page tables are copied), and a start forks control
and two workers one after another. So while nothing is asked of it, the zygote forks up to
``STANDBYS`` children ahead of time, each blocked reading its orders from a pipe; a spawn hands the
request to a standby and answers with its pid at once. A standby has run no runtime logic (it is
the zygote, forked), it exits when its pipe closes (the zygote is gone), and its exit is reported
like any child's only once it has been handed a request.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import queue
import select
import signal
import socket
import sys
import threading
import traceback

SPAWN_TIMEOUT_S = 10.0
STANDBYS = 3  # one start: control and two workers
REFILL_AFTER_S = 0.02  # fork standbys only once requests have stopped coming: a start's spawns come together


class ZygoteGone(Exception):
    """The zygote is not running (it died, or never started): start an interpreter instead."""


class Zygote:
    """The adapter's handle on its zygote. Create it while the process has a single thread."""

    def __init__(self, preload: list[str]) -> None:
        for module in preload:
            importlib.import_module(module)
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the zygote; runs until the adapter goes away
            ours.close()
            _serve(theirs)
        theirs.close()
        self.pid = pid
        self._sock = ours
        self._lock = threading.Lock()  # one spawn request at a time, so answers match requests
        self._cond = threading.Condition()
        self._pids: queue.Queue[dict] = queue.Queue()
        self._exits: dict[int, int] = {}
        self.gone = False
        threading.Thread(target=self._read, daemon=True, name="zygote-reader").start()

    def spawn_many(self, requests: list[tuple[str, dict[str, str]]]) -> list[int | ZygoteGone]:
        """Fork one process per (module, env), all requests sent before any answer is awaited: every
        round trip to the zygote waits for two processes to be woken, and a start needs three forks.
        An entry is the pid, or the ZygoteGone that says why that one was not forked."""
        with self._lock:
            if self.gone:
                raise ZygoteGone("the zygote is not running")
            try:
                self._sock.sendall(b"".join(json.dumps({"module": m, "env": e}).encode() + b"\n" for m, e in requests))
                answers = [self._pids.get(timeout=SPAWN_TIMEOUT_S) for _ in requests]
            except (OSError, queue.Empty) as exc:
                self.gone = True  # a late answer would be taken for the next request's: never ask again
                raise ZygoteGone(f"the zygote did not answer ({exc or 'timeout'})") from exc
        return [int(a["pid"]) if "pid" in a else ZygoteGone(a.get("error", "the zygote stopped")) for a in answers]

    def wait(self, pid: int, timeout: float | None = None) -> int | None:
        """The exit code of a child the zygote forked, once it has ended; None on timeout or zygote death."""
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or self.gone, timeout)
            return self._exits.get(pid)

    def _read(self) -> None:
        stream = self._sock.makefile("rb")
        for line in stream:
            try:
                msg = json.loads(line)
            except ValueError:  # cannot happen with our zygote; if it does, stop trusting it
                break
            if "exit" in msg:
                with self._cond:
                    self._exits[int(msg["exit"])] = int(msg["code"])
                    self._cond.notify_all()
            else:
                if "pid" in msg:  # a reused pid: forget the exit of its earlier owner (it came before this)
                    with self._cond:
                        self._exits.pop(int(msg["pid"]), None)
                self._pids.put(msg)
        with self._cond:
            self.gone = True
            self._cond.notify_all()
        self._pids.put({"error": "the zygote exited"})
        with contextlib.suppress(OSError):  # still there after talking nonsense? (it is unreaped: no pid reuse)
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)  # it is our child: no zombie left behind


def _serve(sock: socket.socket) -> None:  # pragma: no cover - runs in the forked zygote
    keep = sock.fileno()
    os.closerange(3, keep)  # the adapter's protocol pipes and sockets are not ours to hold open
    os.closerange(keep + 1, 65536)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # the wakeup fd is what tells the loop to reap
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    standbys: dict[int, int] = {}  # pid -> write end of its orders pipe, oldest first
    buf = b""
    try:
        while True:
            idle = len(standbys) < STANDBYS and not buf
            with contextlib.suppress(InterruptedError):
                ready, _, _ = select.select([sock, wake_r], [], [], REFILL_AFTER_S if idle else None)
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 512):
                        pass
            _reap(sock, standbys)
            if not ready and idle:
                _standby(standbys)
            if sock in ready:
                data = sock.recv(65536)
                if not data:
                    break
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    _fork(sock, line, standbys)
    except OSError:
        pass
    os._exit(0)  # standbys see their pipes close and exit


def _reap(sock: socket.socket, standbys: dict[int, int]) -> None:  # pragma: no cover - runs in the zygote
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in standbys:  # never handed a request: nobody knows this pid
            os.close(standbys.pop(pid))
            continue
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        sock.sendall(json.dumps({"exit": pid, "code": code}).encode() + b"\n")


def _standby(standbys: dict[int, int]) -> None:  # pragma: no cover - runs in the zygote
    """Fork one child that waits for its orders (a spawn request line) on a pipe."""
    orders_r, orders_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(orders_r)
        os.close(orders_w)
        return
    if pid == 0:
        try:  # whatever happens, this fork never returns into the zygote's loop
            _become_child()
            os.closerange(3, orders_r)  # the zygote's socket, its wake pipe, the other standbys' pipes
            os.closerange(orders_r + 1, 65536)
            line = b""
            while not line.endswith(b"\n"):
                chunk = os.read(orders_r, 1 << 16)
                if not chunk:
                    os._exit(0)  # the zygote is gone: there will be no orders
                line += chunk
            os.close(orders_r)
            request = json.loads(line)
            run_child(request["module"], request["env"])  # never returns
        finally:
            os._exit(70)
    os.close(orders_r)
    standbys[pid] = orders_w


def _fork(sock: socket.socket, line: bytes, standbys: dict[int, int]) -> None:  # pragma: no cover - zygote
    while standbys:
        pid = next(iter(standbys))
        orders_w = standbys.pop(pid)
        try:
            orders = line + b"\n"
            while orders:  # the standby is blocked reading it: even orders larger than the pipe go through
                orders = orders[os.write(orders_w, orders):]
        except OSError:  # that standby died unreported: try the next one
            continue
        finally:
            os.close(orders_w)
        sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        return
    request = json.loads(line)
    try:
        pid = os.fork()
    except OSError as exc:
        sock.sendall(json.dumps({"error": f"fork failed: {exc}"}).encode() + b"\n")
        return
    if pid == 0:
        try:  # whatever happens, this fork never returns into the zygote's loop
            _become_child()
            os.closerange(3, 65536)  # the zygote's socket, its wake pipe, the standbys' pipes
            run_child(request["module"], request["env"])  # never returns
        finally:
            os._exit(70)
    sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def _become_child() -> None:  # pragma: no cover - runs in a forked child
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_child(module: str, env: dict[str, str]) -> None:  # pragma: no cover - runs in a forked child
    """Become the process ``python -m module`` with ``env`` would have been; never returns."""
    code = 1
    try:
        os.environ.clear()
        os.environ.update(env)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)  # stdout is never the adapter's protocol channel
        failpoints = importlib.import_module("recoverykit.impl.failpoints")
        failpoints.reload()  # imported before this process's failpoint spec existed
        code = importlib.import_module(module).main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(int(code or 0) & 0xFF)
