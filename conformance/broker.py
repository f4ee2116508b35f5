"""The failpoint broker: the kit's end of the failpoint socket.

A runtime that hits an armed point connects to a Unix stream socket in the run directory and
writes one JSON line (see ``failpoint_client``); for ``pause`` it then waits for one JSON line back.
The broker records every report with the time it arrived and the peer's pid from the kernel
(SO_PEERCRED, so a report's pid is checked, not taken on the runtime's word), lets the kit wait for
a hit and release it, and notices when a paused process dies while held.

One background thread serves every connection through a selector; ``close()`` stops it, closes
every socket and removes the socket file, so a test leaks neither threads nor descriptors.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import socket
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from recoverykit.conformance.errors import EnvironmentFault
from recoverykit.model.errors import InvalidArgument, RecoveryKitError

SOCKET_NAME = "failpoints.sock"
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS; stay clear of both
MAX_LINE = 64 * 1024
RESUME_ACTIONS = ("continue", "crash")


class FailpointNotHit(RecoveryKitError, TimeoutError):
    """The runtime did not reach a failpoint within the time the kit allowed."""


@dataclass
class Hit:
    """One report from a process that hit an armed failpoint."""

    seq: int
    point: str
    pid: int
    hit: int
    work_id: str | None
    action: str
    time: float  # the process's clock when it hit the point
    received: float  # the broker's clock when the report arrived
    peer_pid: int | None = None  # from the kernel; differs from pid only if a process lies
    released: float | None = None
    resume: str | None = None
    peer_closed: float | None = None  # the connection closed while held (the process died)
    item_pass: int | None = None  # under ``hold_nth``: which pass of its work item (any process) this was
    detail: dict | None = None  # the report's optional detail (the durable-write hook: file and operation)
    _conn: socket.socket | None = field(default=None, repr=False, compare=False)

    @property
    def held(self) -> bool:
        return self.action == "pause" and self.released is None and self.peer_closed is None

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


def socket_path_for(run_dir: str | os.PathLike) -> tuple[str, str | None]:
    """A socket path in ``run_dir``, or in a short private temp dir when that path is too long.

    Returns (path, temp_dir_to_remove_or_None).
    """
    candidate = os.path.join(os.fspath(run_dir), SOCKET_NAME)
    if len(os.fsencode(candidate)) < MAX_SOCKET_PATH:
        return candidate, None
    short = tempfile.mkdtemp(prefix="rkfp-", dir="/tmp" if os.path.isdir("/tmp") else None)
    return os.path.join(short, SOCKET_NAME), short


class FailpointBroker:
    """Listen on a Unix socket for failpoint hits; usable from any thread; close() when done."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.path, self._temp_dir = socket_path_for(run_dir)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind(self.path)
        except OSError as exc:
            self._listener.close()
            raise EnvironmentFault(f"cannot bind the failpoint socket at {self.path}: {exc}") from exc
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._cond = threading.Condition()
        self._hits: list[Hit] = []
        self._malformed: list[str] = []
        self._outbox: list[tuple[Hit, str]] = []
        self._nth: dict[str, int] = {}  # point -> the pass of a work item to hold (``hold_nth``)
        self._buffers: dict[socket.socket, bytes] = {}
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name=f"failpoint-broker:{self.path}", daemon=True)
        self._thread.start()

    # -- the kit's API -----------------------------------------------------------------------

    @property
    def address(self) -> str:
        return self.path

    def env(self) -> dict[str, str]:
        return {"RECOVERYKIT_FAILPOINT_SOCKET": self.path}

    def hits(self) -> list[Hit]:
        with self._cond:
            return list(self._hits)

    def malformed(self) -> list[str]:
        with self._cond:
            return list(self._malformed)

    def held(self) -> list[Hit]:
        with self._cond:
            return [h for h in self._hits if h.held]

    def hold_nth(self, point: str, nth: int) -> None:
        """Hold only the ``nth`` pass of a work item at ``point``, counted across every process (hits without a work
        item: per process); every other pause report there is answered ``continue`` at once. For a runtime that runs
        one item's successive attempts in different processes, where a per-process hit number depends on the
        scheduler: the point must be armed ``pause`` on every hit."""
        if nth < 1:
            raise InvalidArgument(f"nth must be at least 1, got {nth}")
        with self._cond:
            self._nth[point] = nth

    def wait_for_hit(self, point: str | None = None, timeout: float = 10.0, *, pid: int | None = None,
                     hit: int | None = None, after: int = 0, held: bool = False, why: str = "") -> Hit:
        """The first report (seq > ``after``) matching every filter given; FailpointNotHit on timeout
        (``why``: the window's name, in the message)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for h in self._hits:
                    if (h.seq > after and (point is None or h.point == point) and (pid is None or h.pid == pid)
                            and (hit is None or h.hit == hit) and (not held or h.held)):
                        return h
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopping:
                    seen = [(h.point, h.pid, h.hit, h.action) for h in self._hits]
                    raise FailpointNotHit(
                        f"no failpoint hit matching point={point!r} pid={pid} hit={hit} within {timeout:g} s"
                        f"{f' ({why})' if why else ''}; "
                        f"hits so far (point, pid, hit, action): {seen or 'none'}")
                self._cond.wait(remaining)

    def release(self, target: Hit | None = None, *, point: str | None = None, pid: int | None = None,
                resume: str = "continue") -> int:
        """Answer held hits (one, or all matching point/pid); returns how many were released."""
        if resume not in RESUME_ACTIONS:
            raise InvalidArgument(f"resume must be one of {RESUME_ACTIONS}, got {resume!r}")
        with self._cond:
            chosen = [h for h in self._hits if h.held and (target is None or h.seq == target.seq)
                      and (point is None or h.point == point) and (pid is None or h.pid == pid)]
            now = time.time()
            for h in chosen:
                h.released, h.resume = now, resume
                self._outbox.append((h, resume))
        if chosen:
            self._wake()
        return len(chosen)

    def release_all(self) -> int:
        return self.release()

    def close(self) -> None:
        """Stop the thread, close every connection (held processes see EOF and continue)."""
        with self._cond:
            if self._stopping:
                return
            self._stopping = True
            self._cond.notify_all()
        self._wake()
        self._thread.join(timeout=10)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()
        self._selector.close()
        self._wake_w.close()
        for h in self._hits:
            if h._conn is not None:
                h._conn.close()
                h._conn = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self._temp_dir:
            shutil.rmtree(self._temp_dir, ignore_errors=True)

    def __enter__(self) -> FailpointBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the serving thread ------------------------------------------------------------------

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _serve(self) -> None:
        while not self._stopping:
            for key, _ in self._selector.select(timeout=1.0):
                if key.data == "accept":
                    self._accept()
                elif key.data == "wake":
                    with contextlib.suppress(BlockingIOError):
                        self._wake_r.recv(4096)
                else:
                    self._readable(key.fileobj, key.data)
            self._flush_outbox()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            self._buffers[conn] = b""
            self._selector.register(conn, selectors.EVENT_READ, None)

    def _readable(self, conn: socket.socket, hit: Hit | None) -> None:
        try:
            chunk = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if hit is not None:  # a held connection: only EOF (the process died) is expected here
            if not chunk:
                with self._cond:
                    hit.peer_closed = time.time() if hit.released is None else hit.peer_closed
                    hit._conn = None
                    self._cond.notify_all()
                self._drop(conn)
            return
        buffer = self._buffers.get(conn, b"") + chunk
        if b"\n" not in buffer and chunk and len(buffer) < MAX_LINE:
            self._buffers[conn] = buffer
            return
        line = buffer.split(b"\n", 1)[0]
        if not line.strip():
            self._drop(conn)
            return
        record = self._record(conn, line)
        if record is not None and record.action == "pause":
            self._buffers.pop(conn, None)
            self._selector.modify(conn, selectors.EVENT_READ, record)
        else:
            self._drop(conn)

    def _record(self, conn: socket.socket, line: bytes) -> Hit | None:
        try:
            msg = json.loads(line)
            if msg.get("type") != "hit":
                raise ValueError(f"type must be 'hit', got {msg.get('type')!r}")
            peer = _peer_pid(conn)
            with self._cond:
                hit = Hit(seq=len(self._hits) + 1, point=str(msg["point"]), pid=int(msg["pid"]), hit=int(msg["hit"]),
                          work_id=msg.get("work_id"), action=str(msg.get("action", "pause")),
                          time=float(msg.get("time", 0.0)), received=time.time(), peer_pid=peer,
                          detail=msg["detail"] if isinstance(msg.get("detail"), dict) else None,
                          _conn=conn if msg.get("action", "pause") == "pause" else None)
                self._hits.append(hit)
                nth = self._nth.get(hit.point)
                if nth is not None and hit.action == "pause":
                    hit.item_pass = sum(1 for h in self._hits if h.point == hit.point and h.work_id == hit.work_id
                                        and (hit.work_id is not None or h.pid == hit.pid))
                    if hit.item_pass != nth:  # not the pass the kit waits for: it goes on at once
                        hit.released, hit.resume = time.time(), "continue"
                        self._outbox.append((hit, "continue"))
                self._cond.notify_all()
            return hit
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            with self._cond:
                self._malformed.append(f"{line[:200]!r}: {exc}")
            return None

    def _flush_outbox(self) -> None:
        with self._cond:
            outbox, self._outbox = self._outbox, []
        for hit, resume in outbox:
            conn = hit._conn
            if conn is None:
                continue
            with contextlib.suppress(OSError):
                conn.send((json.dumps({"v": 1, "type": "resume", "resume": resume}) + "\n").encode())
            with self._cond:
                hit._conn = None
            self._drop(conn)

    def _drop(self, conn: socket.socket) -> None:
        self._buffers.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        conn.close()


def _peer_pid(conn: socket.socket) -> int | None:
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    return struct.unpack("3i", raw)[0]
