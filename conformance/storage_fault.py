"""Storage faults the kit applies itself: an unreadable store, a store at a newer schema.

Why a module: REC-01, RES-05 and OWN-04 ask what a runtime does when it cannot read or migrate its facts,
and the kit must not take the runtime's word for whether its old state survived. So the kit damages the
store the adapter declared (``init_ok.storage``) itself, while the runtime is down, keeping a private copy
and a SHA-256 of every file; when it restores them it first hashes what it finds. Both moments are recorded
in the history as faults (``storage_fault``, ``storage_restore``) with the hashes, so the checks
(``checks_storage``) and a later ``recoverykit check`` of the bundle judge the same evidence:

- ``unreadable``: the first ``DAMAGE_BYTES`` bytes of every declared file that exists, and of its ``-wal``
  sibling (SQLite reads page 1 from the WAL when there is one), are inverted. The rest of each file is
  untouched, so restoring the same bytes gives back the original exactly;
- ``newer_schema``: ``PRAGMA user_version`` of the first declared file (a SQLite database whose adapter
  declared ``schema_version: sqlite_user_version``) is raised by one, as if a newer runtime had migrated it.
  Restoring lowers it again; SQLite's header counters move, so only the window's hashes are compared.

Every declared path must stay inside the data directory (no absolute path, no ``..``, no symlink out):
the kit never touches a byte outside the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recoverykit.conformance import runtime_dir
from recoverykit.model.catalogue import StorageFault
from recoverykit.model.errors import RecoveryKitError

if TYPE_CHECKING:
    from recoverykit.conformance.environment import Run

DAMAGE_BYTES = 100  # SQLite's database header; the WAL's is 32. Enough to break any file's magic number.
SIBLINGS = ("-wal",)  # parts of a SQLite file that hold committed pages between checkpoints
FAULT, RESTORE = "storage_fault", "storage_restore"  # the history's fault kinds


class StorageDeclRefused(RecoveryKitError):
    """The adapter's ``init_ok.storage`` names a file the kit will not touch (outside the data directory)."""


@dataclass
class Applied:
    """One fault in place: what the kit changed, and the copies it keeps to put everything back."""

    fault: StorageFault
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {original, damaged, size}
    copies: Path | None = None
    user_version: int | None = None  # newer_schema: the value before the fault
    modes: dict[str, int] = field(default_factory=dict)  # name -> the file's permission bits (a restore keeps them)
    started: float = 0.0


def declared(run: Run) -> Any:
    return getattr(run.init_ok, "storage", None) if run.init_ok is not None else None


def supports(run: Run, fault: StorageFault) -> str | None:
    """None if the adapter declared what ``fault`` needs, else why not (the case is then not applicable)."""
    decl = declared(run)
    if decl is None:
        return "the adapter declares no durable store (init_ok.storage)"
    if fault is StorageFault.NEWER_SCHEMA and decl.schema_version != "sqlite_user_version":
        return "the adapter declares no schema version the kit can raise (init_ok.storage.schema_version)"
    return None


def _inside(data_dir: Path, name: str) -> Path:
    if not name or os.path.isabs(name) or ".." in Path(name).parts:
        raise StorageDeclRefused(f"init_ok.storage.files names {name!r}: give a path relative to data_dir, "
                                 "without '..'")
    path = data_dir / name
    real, root = path.resolve(), data_dir.resolve()
    if root != real and root not in real.parents:
        raise StorageDeclRefused(f"init_ok.storage.files names {name!r}, which resolves outside data_dir ({real})")
    return path


def _files(run: Run) -> list[tuple[str, Path]]:
    """Every declared file that exists, with its siblings, as (name relative to data_dir, path)."""
    out = []
    for name in declared(run).files:
        for suffix in ("", *SIBLINGS):
            path = _inside(run.data_dir, name + suffix)
            if path.is_file() and not path.is_symlink():
                out.append((name + suffix, path))
    return out


def sha256(path: Path, root: Path | None = None) -> str | None:
    """The file's SHA-256, or None when it is gone (or no longer a regular file). With ``root``, ``path`` is
    relative to it and reached without following any link (``runtime_dir``)."""
    root, rel = (Path(root), path) if root is not None else (Path(path).parent, Path(path).name)
    try:
        with runtime_dir.open_regular(root, rel) as fd:
            digest = hashlib.sha256()
            while block := os.read(fd, 1 << 20):
                digest.update(block)
            return digest.hexdigest()
    except OSError:
        return None


def _invert(root: Path, name: str, n: int = DAMAGE_BYTES) -> None:
    """Invert the head in place: only a regular file with one link, reached without following a link."""
    with runtime_dir.open_regular(root, name, write=True) as fd:
        head = os.pread(fd, n, 0)
        os.pwrite(fd, bytes(b ^ 0xFF for b in head), 0)
        os.fsync(fd)


def apply(run: Run, fault: StorageFault, **detail: Any) -> Applied:
    """Fault the declared store (the runtime must be down); recorded as a ``storage_fault`` with its hashes."""
    why = supports(run, fault)
    if why is not None:
        raise StorageDeclRefused(why)
    copies = run.run_dir / "storage-fault"
    copies.mkdir(mode=0o700, exist_ok=True)
    applied = Applied(fault, copies=copies)
    if fault is StorageFault.NEWER_SCHEMA:
        name = declared(run).files[0]
        path = _inside(run.data_dir, name)
        if not path.is_file():
            raise StorageDeclRefused(f"the declared store {name!r} does not exist in data_dir")
        # the kit's connection is the only one (the runtime is down): closing it checkpoints the WAL into the file
        with contextlib.closing(sqlite3.connect(str(path), isolation_level=None)) as conn:
            applied.user_version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            conn.execute(f"PRAGMA user_version = {applied.user_version + 1}")
    files = _files(run)
    if not files:
        raise StorageDeclRefused(f"none of the declared store files {list(declared(run).files)} exists in data_dir")
    for name, path in files:
        safe = name.replace("/", "__")
        shutil.copyfile(path, copies / f"{safe}.original")  # before the damage: what a restore puts back
        original = sha256(Path(name), run.data_dir)
        if fault is StorageFault.UNREADABLE:
            _invert(run.data_dir, name)
        st = path.stat()
        applied.files[name] = {"original": original, "damaged": sha256(Path(name), run.data_dir), "size": st.st_size}
        applied.modes[name] = stat.S_IMODE(st.st_mode)
    applied.started = time.time()
    run.recorder.fault(FAULT, fault=fault.value, files=applied.files, user_version=applied.user_version, **detail)
    return applied


def restore(run: Run, applied: Applied) -> dict[str, Any]:
    """Hash what is there now (the runtime's doing during the window), then put the store back.

    A file the runtime left as the kit damaged it gets exactly its original bytes back (the inverted head
    inverted again, or the schema version lowered); one it changed, replaced or removed gets the kit's own
    copy, so a runtime that cleared its store is found out and still gets its facts back for what follows.
    Recorded as a ``storage_restore`` fault: its time ends the fault window.

    The runtime is running meanwhile and may have planted links anywhere in its data dir: every file is
    reached without following one and written as a new file of the kit's renamed into place (``runtime_dir``).
    A file whose directory the runtime turned into a link is not restored; ``refused`` says which and why."""
    found = {name: sha256(Path(name), run.data_dir) for name in applied.files}
    run.recorder.fault(RESTORE, fault=applied.fault.value, found=found,
                       intact=all(found[n] == f["damaged"] for n, f in applied.files.items()))
    refused: dict[str, str] = {}
    main = declared(run).files[0] if applied.fault is StorageFault.NEWER_SCHEMA else None
    for name, info in applied.files.items():
        source = applied.copies / f"{name.replace('/', '__')}.original"
        try:
            if name == main and applied.user_version is not None:
                runtime_dir.install(run.data_dir, name, _lowered(source, applied.user_version),
                                    applied.modes.get(name, 0o644))
            elif found[name] != info["damaged"]:
                runtime_dir.install(run.data_dir, name, source, applied.modes.get(name, 0o644))
            elif applied.fault is StorageFault.UNREADABLE:
                try:
                    _invert(run.data_dir, name)
                except OSError:  # swapped since it was hashed (a hard link, say): the kit's own copy instead
                    runtime_dir.install(run.data_dir, name, source, applied.modes.get(name, 0o644))
        except OSError as exc:
            refused[name] = f"{type(exc).__name__}: {exc.strerror or exc}"
    restored = {name: sha256(Path(name), run.data_dir) for name in applied.files}
    return {"found": found, "restored": restored, **({"refused": refused} if refused else {})}


def _lowered(original: Path, user_version: int) -> Path:
    """The kit's copy of the store (taken at the newer version) with ``user_version`` lowered again, made in the
    kit's own folder: SQLite never opens a path in the runtime's data dir here."""
    work = original.with_name(original.name + ".restored")
    for leftover in (work, *(work.with_name(work.name + s) for s in ("-wal", "-shm", "-journal"))):
        leftover.unlink(missing_ok=True)
    shutil.copyfile(original, work)
    with contextlib.closing(sqlite3.connect(str(work), isolation_level=None, timeout=30)) as conn:
        conn.execute(f"PRAGMA user_version = {int(user_version)}")
    return work
