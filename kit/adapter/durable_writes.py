"""Durable-write points: stop a Python runtime at every durable write it makes, with no code of its own.

A runtime that calls no failpoint still writes its state somewhere; as ALICE and CrashMonkey do for file
systems and storage engines, the kit can stop it just before and just after each such write. The adapter
declares ``durable.write.before`` / ``durable.write.after`` in ``init_ok.failpoints``; when chaos arms one
(``recoverykit chaos --durable-writes``), ``RuntimeEnv.environ`` puts ``durable_hook/`` first on the
process's ``PYTHONPATH`` (``environ_for``), and its ``sitecustomize`` calls ``install_if_armed`` here. Each
write is then reported through the failpoint client as a hit of ``durable.write.before`` and, once made, of
``durable.write.after`` (hits counted per process, ``work_id`` null, ``detail`` = the file and the operation).

What it sees (docs/failpoints.md section 7 says what it cannot):

- SQLite, for connections that ``sqlite3.connect`` opens on a file: ``Connection.commit()`` inside a
  transaction (op ``commit``: LangGraph's ``SqliteSaver``); leaving ``with conn:`` without an exception
  inside a transaction (``with``); an SQL ``COMMIT`` / ``END`` inside a transaction, run by ``execute`` /
  ``executemany`` of the connection or of a cursor (``COMMIT``: ``BEGIN IMMEDIATE ... COMMIT`` in autocommit
  mode); a writing statement that commits on its own (``autocommit INSERT`` and so on: DML with
  ``isolation_level=None``, DDL outside a transaction); ``executescript`` when a transaction is open (it
  commits it first) or the script writes (``executescript``);
- files: ``os.fsync`` / ``os.fdatasync`` (the file behind the descriptor), ``os.replace`` / ``os.rename``
  (the target).

It never breaks the runtime: a broker that cannot be reached is one line on stderr per write (the failpoint
client's behaviour) and the write goes on; a process not of the run (no run marker, no broker socket) or one
with no durable-write point armed is left as it is.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sqlite3
import sys
import threading
from collections.abc import Callable
from typing import Any

DURABLE_WRITE_POINTS = ("durable.write.before", "durable.write.after")
ENV_CLIENT = "RECOVERYKIT_FAILPOINT_CLIENT"  # the failpoint client's file, for runtimes without recoverykit
_DML = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})
_DDL = frozenset({"CREATE", "DROP", "ALTER"})
_SCRIPT_WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER|COMMIT|END)\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z]+")

_local = threading.local()
_failpoint: Callable[..., None] | None = None
_installed = False


def hook_dir() -> str:
    """The directory whose ``sitecustomize`` installs the hook."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "durable_hook")


def armed(spec: str | None) -> bool:
    """Whether a ``RECOVERYKIT_FAILPOINTS`` spec arms a durable-write point."""
    return any(entry.partition("=")[0].strip() in DURABLE_WRITE_POINTS for entry in (spec or "").split(";"))


def environ_for(spec: str | None, environ: dict[str, str]) -> dict[str, str]:
    """What a runtime process's environment needs for the hook: nothing unless ``spec`` arms a durable-write
    point; then the hook directory first on ``PYTHONPATH`` and where the failpoint client is."""
    if not armed(spec):
        return {}
    from recoverykit.conformance import failpoint_client

    rest = environ.get("PYTHONPATH")
    return {"PYTHONPATH": hook_dir() + (os.pathsep + rest if rest else ""),
            ENV_CLIENT: os.path.abspath(failpoint_client.__file__)}


def install_if_armed(environ: Any = os.environ) -> bool:
    """Install the hook in this process if it is one of the run's and a durable-write point is armed."""
    global _failpoint, _installed
    if _installed:
        return True
    if not (environ.get("RECOVERYKIT_RUN_MARKER") and environ.get("RECOVERYKIT_FAILPOINT_SOCKET")
            and armed(environ.get("RECOVERYKIT_FAILPOINTS"))):
        return False
    _failpoint = _client(environ).failpoint
    _patch_sqlite()
    _patch_os()
    _installed = True
    return True


def _client(environ: Any) -> Any:
    path = environ.get(ENV_CLIENT)
    if path and os.path.exists(path):
        spec = importlib.util.spec_from_file_location("_recoverykit_failpoint_client", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    from recoverykit.conformance import failpoint_client

    return failpoint_client


def _report(point: str, file: str, op: str) -> None:
    try:
        _failpoint(point, None, {"file": file, "op": op})
    except Exception as exc:  # the client already goes on when the broker is gone; anything else too
        sys.stderr.write(f"recoverykit durable-write hook: {point} {op} {file}: {exc!r}; going on\n")


def _around(file: str, op: str, write: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Report before, make the write, report after. A write made inside another (``with conn:`` committing
    through ``commit``) is the same write: reported once."""
    if getattr(_local, "inside", False):
        return write(*args, **kwargs)
    _local.inside = True
    try:
        _report(DURABLE_WRITE_POINTS[0], file, op)
        result = write(*args, **kwargs)
        _report(DURABLE_WRITE_POINTS[1], file, op)
        return result
    finally:
        _local.inside = False


# --- SQLite ----------------------------------------------------------------------------------------------


def _first_word(sql: Any) -> str:
    text = sql.lstrip() if isinstance(sql, str) else ""
    while text.startswith(("--", "/*")):
        text = (text.partition("\n")[2] if text.startswith("--") else text.partition("*/")[2]).lstrip()
    found = _WORD.match(text)
    return found.group(0).upper() if found else ""


def _commit_op(conn: Any, sql: Any) -> str | None:
    """The operation if running ``sql`` on ``conn`` commits, else None."""
    if getattr(conn, "_rk_file", None) is None:
        return None
    word = _first_word(sql)
    if word in ("COMMIT", "END"):
        return "COMMIT" if conn.in_transaction else None
    if conn.in_transaction:
        return None
    autocommits = conn.isolation_level is None or getattr(conn, "autocommit", None) is True  # 3.12's autocommit
    if (word in _DML and autocommits) or word in _DDL:
        return f"autocommit {word}"
    return None


class _HookedConnection:
    """Mixed into the connection class ``sqlite3.connect`` makes (its ``factory``)."""

    _rk_file: str | None = None

    def commit(self) -> None:
        if self._rk_file is None or not self.in_transaction:
            return super().commit()
        return _around(self._rk_file, "commit", super().commit)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        leave = functools.partial(super().__exit__, exc_type, exc, tb)
        if exc_type is not None or self._rk_file is None or not self.in_transaction:
            return leave()
        return _around(self._rk_file, "with", leave)

    def execute(self, sql: str, *args: Any) -> Any:
        op = _commit_op(self, sql)
        return super().execute(sql, *args) if op is None else _around(self._rk_file, op, super().execute, sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        op = _commit_op(self, sql)
        run = super().executemany
        return run(sql, *args) if op is None else _around(self._rk_file, op, run, sql, *args)

    def executescript(self, script: str) -> Any:
        writes = self._rk_file is not None and (self.in_transaction or bool(_SCRIPT_WRITES.search(script or "")))
        run = super().executescript
        return _around(self._rk_file, "executescript", run, script) if writes else run(script)

    def cursor(self, factory: Any = None) -> Any:
        return super().cursor(_hooked(factory or sqlite3.Cursor, _HookedCursor))


class _HookedCursor:
    def execute(self, sql: str, *args: Any) -> Any:
        op = _commit_op(self.connection, sql)
        run = super().execute
        return run(sql, *args) if op is None else _around(self.connection._rk_file, op, run, sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        op = _commit_op(self.connection, sql)
        run = super().executemany
        return run(sql, *args) if op is None else _around(self.connection._rk_file, op, run, sql, *args)

    def executescript(self, script: str) -> Any:
        conn = self.connection
        writes = getattr(conn, "_rk_file", None) is not None and (
            conn.in_transaction or bool(_SCRIPT_WRITES.search(script or "")))
        run = super().executescript
        return _around(conn._rk_file, "executescript", run, script) if writes else run(script)


@functools.cache
def _hooked(base: type, mixin: type) -> type:
    if issubclass(base, mixin):
        return base
    return type(f"Hooked{base.__name__}", (mixin, base), {"__module__": __name__})


def _main_file(conn: sqlite3.Connection) -> str | None:
    """The file of the connection's main database; None for an in-memory or temporary one (not durable)."""
    for row in sqlite3.Connection.execute(conn, "PRAGMA database_list").fetchall():
        if row[1] == "main":
            return row[2] or None
    return None


def _patch_sqlite() -> None:
    real = sqlite3.connect

    @functools.wraps(real)
    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        if len(args) > 5:  # connect(database, timeout, detect_types, isolation_level, check_same_thread, factory)
            args = (*args[:5], _hooked(args[5], _HookedConnection), *args[6:])
        else:
            kwargs["factory"] = _hooked(kwargs.get("factory") or sqlite3.Connection, _HookedConnection)
        conn = real(*args, **kwargs)
        try:
            conn._rk_file = _main_file(conn)
        except sqlite3.Error:
            conn._rk_file = None
        return conn

    sqlite3.connect = connect
    sqlite3.dbapi2.connect = connect


# --- files -------------------------------------------------------------------------------------------------


def _fd_path(fd: Any) -> str:
    number = fd if isinstance(fd, int) else fd.fileno()
    try:
        return os.readlink(f"/proc/self/fd/{number}")
    except OSError:
        return f"fd {number}"


def _patch_os() -> None:
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name, None)
        if real is not None:
            setattr(os, name, functools.wraps(real)(functools.partial(_sync, real, name)))
    for name in ("replace", "rename"):
        setattr(os, name, functools.wraps(getattr(os, name))(functools.partial(_move, getattr(os, name), name)))


def _sync(real: Callable[..., Any], op: str, fd: Any) -> Any:
    return _around(_fd_path(fd), op, real, fd)


def _move(real: Callable[..., Any], op: str, src: Any, dst: Any, **kwargs: Any) -> Any:
    target = os.fsdecode(dst) if isinstance(dst, str | bytes | os.PathLike) else str(dst)
    return _around(os.path.abspath(target), op, real, src, dst, **kwargs)
