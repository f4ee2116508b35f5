"""One run at a time in an ``--out`` directory, and every run in a fresh layout there.

Why: a reused ``--out`` mixed two runs. The second certify found the first one's run and data
directories (a false "broke INP-02", or FileExistsError on the data-dir link), history.jsonl grew,
and two concurrent runs wrote the same files. Now a run *claims* its ``--out``:

- an exclusive ``flock`` on ``<out>/.recoverykit.lock`` for the whole run; a second run into the same
  directory while one is going is refused at once with ``OutDirBusy`` (a usage error, exit 64). The
  lock is the kernel's: a killed run leaves no stale lock behind;
- then the outputs of an earlier run (results, reports, ``runs/``, ``bundles/``) are moved, untouched,
  to ``<out>/previous/NNN/`` (the paths inside its results.json and bundle.json files are re-pointed
  there), so the new run writes the documented layout into an empty place. ``hypothesis-db/`` stays:
  a replay into the same ``--out`` tries the failures stored there first.

Only the kit's own outputs move: a run marks the ``--out`` it claimed with ``OWNED`` (``.recoverykit-outputs.json``,
the output names it writes there), and only an ``--out`` so marked has outputs of the kit's. Another tool's
``results.json``, ``junit.xml``, ``report.md`` or ``runs/`` at those names are never moved, opened or rewritten: the
run is refused with ``ForeignOutputs`` (a usage error, exit 64) naming them, since its layout would overwrite them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from recoverykit.conformance.private_files import private_dir, write_private
from recoverykit.model.errors import InvalidArgument

LOCK_NAME = ".recoverykit.lock"
OWNED = ".recoverykit-outputs.json"  # the mark of an --out a recoverykit run claimed: its outputs are the kit's
PREVIOUS = "previous"
# what a certify or chaos run writes at the top of --out (hypothesis-db/ is deliberately not here)
OUTPUTS = ("results.json", "junit.xml", "trace.json", "runs", "bundles", "report.json", "report.md", "report.html",
           "results.db",
           "xdist-*")


class OutDirBusy(InvalidArgument):
    """Another recoverykit run holds this --out directory; the CLI exits 64."""


class ForeignOutputs(InvalidArgument):
    """This --out holds files at the kit's output names that no recoverykit run wrote; the CLI exits 64."""


@contextlib.contextmanager
def claim(out: str | os.PathLike) -> Iterator[Path | None]:
    """Hold ``out`` for one run; yields where an earlier run's outputs were moved (None: there were none)."""
    out = Path(out)
    if out.is_dir() and not out.is_symlink():
        _refuse_foreign(out)  # before anything is written there: not the lock, not the folder's mode
    try:
        private_dir(out)
        fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise InvalidArgument(f"--out {out}: cannot use it as the results directory ({exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise OutDirBusy(f"--out {out} is in use by another recoverykit run (pid {holder}); wait for it to "
                             "finish or give another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            moved = move_previous(out)
            mark(out)
            yield moved
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the last descriptor releases the flock


def mark(out: Path) -> None:
    """Mark ``out`` as claimed by a recoverykit run: whatever later appears at an output name is the kit's."""
    from recoverykit import __version__
    write_private(out / OWNED, json.dumps({"written_by": "recoverykit", "kit_version": __version__,
                                           "pid": os.getpid(), "outputs": list(OUTPUTS)}, indent=2) + "\n")


def _owned(out: Path) -> bool:
    path = out / OWNED
    try:
        if path.is_symlink() or not path.is_file():
            return False
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("written_by") == "recoverykit"


def move_previous(out: Path) -> Path | None:
    """Move an earlier run's outputs to ``<out>/previous/NNN/``; None when there were none.

    ``ForeignOutputs`` (exit 64), with nothing moved, when ``out`` holds files at the kit's output names but was
    never claimed by a recoverykit run (no ``OWNED`` mark): they are another tool's, and stay as they are."""
    found = _refuse_foreign(out)
    if not found:
        return None
    found.append(out / OWNED)
    folder = private_dir(out / PREVIOUS)
    taken = [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
    number = max(taken, default=0) + 1
    while True:
        target = folder / f"{number:03d}"
        try:
            target.mkdir(mode=0o700)
            break
        except FileExistsError:
            number += 1
    for path in found:
        os.rename(path, target / path.name)
    _repoint(out, target, [p.name for p in found])
    return target


def _refuse_foreign(out: Path) -> list[Path]:
    """The files at the kit's output names in ``out``; ``ForeignOutputs`` when there are some and no recoverykit run
    claimed ``out`` (no ``OWNED`` mark)."""
    found = sorted({p for pattern in OUTPUTS for p in out.glob(pattern)})
    if found and not _owned(out):
        names = ", ".join(p.name for p in found)
        raise ForeignOutputs(f"--out {out} already holds {names}, which no recoverykit run wrote there (no {OWNED}); "
                             "the kit would overwrite them, so it leaves them as they are. Give another --out, or "
                             "move them away first")
    return found


def _repoint(out: Path, target: Path, names: list[str]) -> None:
    """Paths inside the moved results.json and bundle.json files now name the moved copies."""
    prefixes = {str(out), str(out.resolve()), os.path.abspath(out)}
    moves = [(f"{p}/{name}", f"{target}/{name}") for p in prefixes for name in names]

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            for old, new in moves:
                if value == old or value.startswith(old + "/"):
                    return new + value[len(old):]
            return value
        if isinstance(value, list):
            return [fix(v) for v in value]
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        return value

    for path in [target / "results.json", *target.glob("bundles/*/bundle.json")]:
        with contextlib.suppress(OSError, ValueError):
            if path.is_file() and not path.is_symlink():
                doc = json.loads(path.read_text())
                fixed = fix(doc)
                if fixed != doc:  # only a path to re-point rewrites the file; its mode is kept
                    mode = path.stat().st_mode & 0o7777
                    write_private(path, json.dumps(fixed, indent=2) + "\n")
                    os.chmod(path, mode)
