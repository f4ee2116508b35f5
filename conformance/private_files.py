"""Copying and writing the kit's evidence: private, and never a byte from outside the run.

Why a module: bundles copy the runtime's data directory, which the runtime (not the kit) filled. A
symlink in it must stay a symlink (following it read a loop until exit 70, or 300 MB and another
user's 0600 files from outside the run); a FIFO or socket is skipped (opening a FIFO blocks). And
what the kit writes for the user to keep (results, bundles) is private like the run directories:
directories 0700, files 0600.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

DIR_MODE, FILE_MODE = 0o700, 0o600


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


def copy_tree(source: Path, target: Path) -> None:
    """Copy ``source`` into ``target`` without following any symlink (links are copied as links).

    A source that is itself a link is copied as that link. What cannot be read is left out: a bundle
    is evidence, a partial copy of the runtime's own files is still worth keeping.
    """
    source, target = Path(source), Path(target)
    if source.is_symlink():
        with contextlib.suppress(OSError):
            os.symlink(os.readlink(source), target)
        return
    if not source.is_dir():
        return
    with contextlib.suppress(OSError):  # shutil.Error (an OSError) lists what could not be copied
        shutil.copytree(source, target, symlinks=True, ignore=_specials, dirs_exist_ok=True)


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
