"""The kit's reads and writes inside a directory the runtime owns, never through anything the runtime planted.

Why a module: the runtime runs while the kit restores a store it faulted (``storage_fault``) or leaves the agent's
work in a workspace (``disk.plant``), and the runtime can put a symlink (or a hard link) at any name there: a
``usage.db.rk-restore -> <a file outside the run>`` made ``shutil.copyfile`` write the store's bytes through the
link into a file the kit does not own. So here:

- every path is walked from the root directory one component at a time with ``O_NOFOLLOW`` (a directory the
  runtime replaced by a link is refused with ``ELOOP``/``ENOTDIR``, never followed out of the run);
- a file is written only as a new file the kit creates with ``O_CREAT | O_EXCL | O_NOFOLLOW`` under a fresh random
  name beside its target, then renamed over the target (``rename`` replaces a link, never writes through it);
- a file is read or changed in place only when ``fstat`` on the opened descriptor says it is a regular file with
  one link (a FIFO never blocks: ``O_NONBLOCK``).

Every refusal is an ``OSError``; the callers record what they could not do instead of doing it elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _parts(rel: str | os.PathLike) -> list[str]:
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or any(p in ("..", ".") for p in parts):
        raise OSError(errno.EINVAL, f"not a plain relative path: {rel!s}")
    return list(parts)


@contextlib.contextmanager
def parent(root: str | os.PathLike, rel: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """The directory that holds ``rel`` (a descriptor, walked without following a link) and ``rel``'s last name."""
    *dirs, name = _parts(rel)
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in dirs:
            inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        yield fd, name
    finally:
        os.close(fd)


def _regular(fd: int, *, single: bool) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    if single and st.st_nlink != 1:
        raise OSError(errno.EMLINK, "a file with another hard link (it may be a file outside the run)")
    return st


@contextlib.contextmanager
def open_regular(root: str | os.PathLike, rel: str | os.PathLike, *, write: bool = False) -> Iterator[int]:
    """A descriptor on the regular file ``rel`` under ``root``; ``write``: read-write, and only with one link."""
    with parent(root, rel) as (dir_fd, name):
        fd = os.open(name, (os.O_RDWR if write else os.O_RDONLY) | _FILE_FLAGS, dir_fd=dir_fd)
        try:
            _regular(fd, single=write)
            os.set_blocking(fd, True)
            yield fd
        finally:
            os.close(fd)


def _put(root: str | os.PathLike, rel: str | os.PathLike, mode: int, fill: Callable[[int], None]) -> None:
    """A new file of the kit's beside ``rel`` (``O_EXCL | O_NOFOLLOW``, a random name), filled, then renamed over
    whatever is at ``rel``: a link there is replaced, never followed."""
    with parent(root, rel) as (dir_fd, name):
        tmp = f".{name}.rk-{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode & 0o7777,
                     dir_fd=dir_fd)
        try:
            try:
                os.fchmod(fd, mode & 0o7777)  # the creation mode is masked by the umask
                fill(fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise


def install(root: str | os.PathLike, rel: str | os.PathLike, source: str | os.PathLike, mode: int = 0o600) -> None:
    """Put a copy of ``source`` (a file of the kit's) at ``rel`` under ``root``."""

    def fill(fd: int) -> None:
        with open(source, "rb") as src:
            while block := src.read(1 << 20):
                _write_all(fd, block)

    _put(root, rel, mode, fill)


def write_new(root: str | os.PathLike, rel: str | os.PathLike, data: bytes, mode: int = 0o644) -> None:
    """``data`` as the file ``rel`` under ``root`` (a new file of the kit's, renamed into place)."""

    _put(root, rel, mode, lambda fd: _write_all(fd, data))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def is_dir(root: str | os.PathLike, rel: str | os.PathLike) -> bool:
    """``rel`` is a directory under ``root`` reached without following any link."""
    try:
        with parent(root, rel) as (dir_fd, name):
            return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
