"""Copying and writing the kit's evidence: private, and never a byte from outside the run.

Why a module: bundles copy the runtime's data directory, which the runtime (not the kit) filled. A
symlink in it must stay a symlink (following it read a loop until exit 70, or 300 MB and another
user's 0600 files from outside the run); a FIFO or socket is skipped (opening a FIFO blocks). And
what the kit writes for the user to keep (results, bundles) is private like the run directories:
directories 0700, files 0600.

A copy of the runtime's files is also bounded and keeps holes: a 1 GiB sparse file (nothing on disk) was copied
as 1 GiB of zeros until ``--out`` was full, and the run ended in exit 70 with no results. ``copy_tree`` copies only
the data extents of a file (``SEEK_DATA`` / ``SEEK_HOLE``; the holes stay holes), at most ``FILE_CAP`` bytes of
any file and ``TREE_CAP`` bytes in all, and returns what it truncated or skipped (a bundle's manifest records it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from pathlib import Path
from typing import Any

DIR_MODE, FILE_MODE = 0o700, 0o600
FILE_CAP = 64 << 20  # at most this much of any one file of the runtime's is copied (bytes of its extent)
TREE_CAP = 256 << 20  # and at most this much data in one copy of its data directory


def _specials(folder: str, names: list[str]) -> set[str]:
    """shutil.copytree ``ignore``: every entry that is not a directory, a regular file or a symlink."""
    skipped = set()
    for name in names:
        try:
            mode = os.lstat(os.path.join(folder, name)).st_mode
        except OSError:
            skipped.add(name)
            continue
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            skipped.add(name)
    return skipped


def copy_tree(source: Path, target: Path, *, file_cap: int = FILE_CAP, tree_cap: int = TREE_CAP) -> dict[str, Any]:
    """Copy ``source`` into ``target`` without following any symlink (links are copied as links), bounded and
    keeping holes; returns ``{"bytes": data bytes written, "truncated": [...], "skipped": [...]}`` (paths relative
    to ``source``: a file cut at ``file_cap``, or left out once ``tree_cap`` was reached, or unreadable).

    A source that is itself a link is copied as that link. What cannot be read is left out: a bundle
    is evidence, a partial copy of the runtime's own files is still worth keeping. A full disk (``ENOSPC``,
    ``EDQUOT``) is not the runtime's doing: it is raised, so the caller can tell the user.
    """
    source, target = Path(source), Path(target)
    report: dict[str, Any] = {"bytes": 0, "truncated": [], "skipped": []}
    if source.is_symlink():
        with contextlib.suppress(OSError):
            os.symlink(os.readlink(source), target)
        return report
    if not source.is_dir():
        return report
    budget = [tree_cap]
    for here, dirs, files in os.walk(source, followlinks=False):
        rel_dir = Path(here).relative_to(source)
        into = target / rel_dir
        try:
            into.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        except OSError as exc:
            _raise_if_full(exc)
            dirs[:] = []
            report["skipped"].append({"path": str(rel_dir), "why": f"cannot create: {exc.strerror or exc}"})
            continue
        for name in sorted(dirs + files):
            src, dst, rel = Path(here) / name, into / name, str(rel_dir / name) if str(rel_dir) != "." else name
            try:
                mode = os.lstat(src).st_mode
                if stat.S_ISLNK(mode):
                    if name in dirs:
                        dirs.remove(name)  # os.walk lists a link to a directory among the directories
                    os.symlink(os.readlink(src), dst)
                elif stat.S_ISREG(mode):
                    _copy_bounded(src, dst, rel, file_cap, budget, report)
                elif not stat.S_ISDIR(mode):
                    report["skipped"].append({"path": rel, "why": "not a regular file, directory or link"})
            except OSError as exc:
                _raise_if_full(exc)
                report["skipped"].append({"path": rel, "why": f"cannot copy: {exc.strerror or exc}"})
    return report


FULL = (errno.ENOSPC, errno.EDQUOT)


def _raise_if_full(exc: OSError) -> None:
    if exc.errno in FULL:
        raise exc


def _copy_bounded(src: Path, dst: Path, rel: str, file_cap: int, budget: list[int], report: dict[str, Any]) -> None:
    """One regular file: its data extents only (holes stay holes), at most ``file_cap`` of its extent and what is
    left of the tree's budget; never follows a link (``O_NOFOLLOW``), never blocks (``O_NONBLOCK``)."""
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            report["skipped"].append({"path": rel, "why": "not a regular file"})
            return
        if budget[0] <= 0:
            report["skipped"].append({"path": rel, "size": st.st_size, "why": "the copy's byte cap was reached"})
            return
        limit, copied, cut = min(st.st_size, file_cap), 0, False
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            for start, end in _extents(fd, limit):
                while start < end and not cut:
                    n = min(1 << 20, end - start, budget[0])
                    block = os.pread(fd, n, start) if n > 0 else b""
                    if not block:
                        cut = n <= 0  # the tree's budget is spent (else the file shrank under the copy)
                        break
                    _pwrite_all(out, block, start)
                    start, copied, budget[0] = start + len(block), copied + len(block), budget[0] - len(block)
                if cut:
                    break
            os.ftruncate(out, limit)  # the file's length up to the cap: a trailing hole stays a hole
        finally:
            os.close(out)
        report["bytes"] += copied
        if cut or limit < st.st_size:
            report["truncated"].append({"path": rel, "size": st.st_size, "copied_to": limit, "data_bytes": copied,
                                        "why": "the copy's byte cap was reached" if cut else
                                        f"only the first {file_cap} bytes of a file are copied"})
    finally:
        os.close(fd)


def _extents(fd: int, limit: int) -> list[tuple[int, int]]:
    """The data extents of the file below ``limit`` (the whole range where the system cannot tell holes)."""
    out, pos = [], 0
    while pos < limit:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after pos: the rest is a hole
                break
            return [(pos, limit)]  # SEEK_DATA not supported here: copy it all (still capped)
        if start >= limit:
            break
        end = min(os.lseek(fd, start, os.SEEK_HOLE), limit)
        out.append((start, end))
        pos = end
    return out


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def copy_file(source: Path, target: Path) -> None:
    """One evidence file; a symlink planted in its place is copied as a link, never followed."""
    with contextlib.suppress(OSError):
        if os.path.lexists(source):
            shutil.copy2(source, target, follow_symlinks=False)


def privatize(path: Path) -> None:
    """Directories 0700 and files 0600, through a whole tree; symlinks are left alone (never followed)."""
    path = Path(path)
    if path.is_symlink() or not path.exists():
        return
    if not path.is_dir():
        _chmod(path, FILE_MODE)
        return
    _chmod(path, DIR_MODE)
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in dirs:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                _chmod(full, DIR_MODE)
        for name in files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                _chmod(full, FILE_MODE)


def _chmod(path: str | Path, mode: int) -> None:
    with contextlib.suppress(OSError):
        os.chmod(path, mode)


def private_dir(path: Path) -> Path:
    """``path`` as a directory, created 0700 if it was missing (an existing one is not re-moded)."""
    path = Path(path)
    if not path.is_dir():
        path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        _chmod(path, DIR_MODE)  # mkdir's mode is masked by the umask
    return path


def write_private(path: Path, text: str) -> None:
    """Write a text file created 0600 (an existing file is made 0600 too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), FILE_MODE)
        f.write(text)
