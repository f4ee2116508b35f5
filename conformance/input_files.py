"""Reading a file the user hands the kit (a baseline, results, a trace, a bundle): only a regular file, bounded.

Every path a command takes as input may be anything: a FIFO (opening it for reading waits for a writer
that never comes: the command hangs), ``/dev/zero`` (an endless read: ``MemoryError``, exit 70), a
directory, or a 4.7 GB results.json that took ``report`` to 12 GB of memory. So input is opened with
``O_NONBLOCK`` (a FIFO opens at once instead of waiting), checked with ``fstat`` on the descriptor that
is then read (a regular file, or ``InvalidArgument``: exit 64), and read to at most ``limit()`` bytes
(``MAX_INPUT_MB`` MiB, ``RECOVERYKIT_MAX_INPUT_MB`` overrides it). ``regular_file`` is the same check
for readers that open the path themselves (a bundle's history and ledgers).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from recoverykit.model.errors import InvalidArgument

MAX_INPUT_MB = 256  # ten times the largest results the kit has written (a 962-case chaos run: 23 MB)
ENV_MAX_INPUT_MB = "RECOVERYKIT_MAX_INPUT_MB"
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def limit() -> int:
    """The largest input file read, in bytes."""
    raw = os.environ.get(ENV_MAX_INPUT_MB)
    if raw is None or not raw.strip():
        return MAX_INPUT_MB * 2**20
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not mb > 0:
        raise InvalidArgument(f"{ENV_MAX_INPUT_MB}={raw!r} is not a positive number of MiB (default {MAX_INPUT_MB})")
    return int(mb * 2**20)


def _refuse(path: str | os.PathLike, what: str, st: os.stat_result) -> None:
    kind = next((name for test, name in _KINDS if test(st.st_mode)), None)
    if kind is not None or not stat.S_ISREG(st.st_mode):
        raise InvalidArgument(f"{what} {path} cannot be read: it is {kind or 'not a regular file'}; pass a regular "
                              "file")
    if st.st_size > limit():
        raise InvalidArgument(f"{what} {path} cannot be read: it is {st.st_size / 2**20:.1f} MiB, more than the "
                              f"{limit() / 2**20:.1f} MiB the kit reads as input (set {ENV_MAX_INPUT_MB} to read"
                              " larger files)")


def regular_file(path: str | os.PathLike, what: str = "input") -> Path:
    """``path`` if it is a regular file under the size limit (``stat`` follows links and opens nothing)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InvalidArgument(f"{what} {path} cannot be read ({exc.strerror or type(exc).__name__})") from None
    _refuse(path, what, st)
    return Path(path)


def read_bytes(path: str | os.PathLike, what: str = "input") -> bytes:
    """The bytes of a regular file under the size limit; anything else is ``InvalidArgument`` (exit 64)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InvalidArgument(f"{what} {path} cannot be read ({exc.strerror or type(exc).__name__})") from None
    try:
        _refuse(path, what, os.fstat(fd))
        most, chunks, size = limit(), [], 0
        while size <= most:
            chunk = os.read(fd, min(1 << 20, most + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > most:  # it grew while it was read
            raise InvalidArgument(f"{what} {path} grew past the {most / 2**20:.0f} MiB the kit reads as input")
        return b"".join(chunks)
    except OSError as exc:
        raise InvalidArgument(f"{what} {path} cannot be read ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, what: str = "input") -> str:
    try:
        return read_bytes(path, what).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"{what} {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json(path: str | os.PathLike, what: str = "input") -> Any:
    """The JSON document in a regular file; unreadable, not a file, too large or not JSON: ``InvalidArgument``."""
    try:
        return json.loads(read_text(path, what))
    except (ValueError, RecursionError) as exc:
        raise InvalidArgument(f"{what} {path} cannot be read as JSON ({type(exc).__name__}: {str(exc)[:200]})") \
            from None
