"""The adapter's stderr, kept bounded: its first and last bytes, with a line saying what was dropped.

Why: the adapter (and every process it starts) wrote straight into ``adapter.stderr.log``, so a
runtime that logs without end left 200 MB in the run directory, copied again into its bundle. Now
the adapter writes into a pipe, and a thread of the kit copies the first ``head`` bytes into the
log as they come (a reader sees them at once) and keeps the last ``tail`` bytes in memory; when the
adapter is gone (end of file, or ``close``) it writes a marker line with the number of bytes dropped
and then that tail. A log within ``head`` bytes is kept whole, byte for byte.
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import threading
import time
from pathlib import Path

MiB = 1 << 20
HEAD_BYTES = 2 * MiB
TAIL_BYTES = 2 * MiB
CHUNK = 64 * 1024
DRAIN_S = 1.0  # after close, read on for at most this long (an escaped process may hold the pipe open)


def marker(dropped: int, head: int, tail: int) -> bytes:
    return (f"\n[recoverykit: {dropped} bytes of adapter stderr dropped here; the log keeps the first {head} "
            f"and the last {tail} bytes]\n").encode()


class BoundedLog:
    """``write_fd`` goes to the child as its stderr; ``started()`` after the spawn, ``close()`` at the end."""

    def __init__(self, path: str | Path, *, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self.path = Path(path)
        self.head, self.tail = head, tail
        self.written = self.dropped = 0
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_len = 0
        self._file = open(self.path, "ab")  # noqa: SIM115 - closed by the pump thread or close()
        self._read_fd, self.write_fd = os.pipe()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, name=f"adapter-stderr-{self.path.parent.name}",
                                        daemon=True)

    def started(self) -> None:
        """The child holds its copy of the write end now: drop the kit's (else no end of file) and start."""
        self._close_write_end()
        self._thread.start()

    def close(self, timeout_s: float = DRAIN_S + 1.0) -> None:
        self._close_write_end()
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        elif self._thread.ident is None:  # never started (the spawn failed)
            self._finish()

    def _close_write_end(self) -> None:
        fd, self.write_fd = self.write_fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _pump(self) -> None:
        poller = select.poll()
        poller.register(self._read_fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        stop_at: float | None = None
        try:
            while True:
                if self._stop.is_set():
                    stop_at = stop_at or time.monotonic() + DRAIN_S
                    if time.monotonic() >= stop_at:
                        break
                if not poller.poll(100):
                    if self._stop.is_set():
                        break  # quiet after close: whoever still holds the pipe is not the adapter's run
                    continue
                chunk = os.read(self._read_fd, CHUNK)
                if not chunk:
                    break  # every writer closed its end
                self._take(chunk)
        except OSError:
            pass
        finally:
            self._finish()

    def _take(self, chunk: bytes) -> None:
        room = self.head - self.written
        if room > 0:
            part = chunk[:room]
            self._file.write(part)
            self._file.flush()
            self.written += len(part)
            chunk = chunk[room:]
        if not chunk:
            return
        self._tail.append(chunk)
        self._tail_len += len(chunk)
        while self._tail and self._tail_len - len(self._tail[0]) >= self.tail:
            old = self._tail.popleft()
            self._tail_len -= len(old)
            self.dropped += len(old)

    def _finish(self) -> None:
        if self._file.closed:
            return
        with contextlib.suppress(OSError):
            excess = self._tail_len - self.tail
            if excess > 0:
                self._tail[0] = self._tail[0][excess:]
                self._tail_len -= excess
                self.dropped += excess
            if self.dropped:
                self._file.write(marker(self.dropped, self.head, self.tail))
            for part in self._tail:
                self._file.write(part)
        self._tail.clear()
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(OSError):
            os.close(self._read_fd)
