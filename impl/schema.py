"""Versioned migrations for the runtime's two databases (runtime.db and usage.db).

Each migration is one SQL script applied inside one transaction and recorded in ``schema_version``.
A failure leaves the database exactly as it was (nothing is cleared) and surfaces as
``MigrationFailed``, which recovery turns into the explicit state ``recovery_failed_migration``.
Usage lives in its own file, as in the seed: no transaction ever spans both files.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from .db import Database

RUNTIME_MIGRATIONS: tuple[str, ...] = (
    # 1: the chat core
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
    CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY, created_at REAL NOT NULL, last_served_at REAL NOT NULL DEFAULT 0);
    CREATE TABLE work_items (
        work_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, kind TEXT NOT NULL,
        desired_state TEXT NOT NULL, status TEXT NOT NULL, reason_code TEXT NOT NULL,
        reason_text TEXT NOT NULL DEFAULT '', actions TEXT NOT NULL DEFAULT '[]',
        control_version INTEGER NOT NULL DEFAULT 1, permission_scope TEXT NOT NULL DEFAULT '["*"]',
        objective_revision INTEGER NOT NULL DEFAULT 1, host_id TEXT NOT NULL, parent_id TEXT,
        last_progress TEXT, recovery_policy TEXT NOT NULL DEFAULT 'automatic',
        working_dir TEXT, resumed_cv INTEGER NOT NULL DEFAULT 0, retry_count INTEGER NOT NULL DEFAULT 0, retry_at REAL,
        created_at REAL NOT NULL, updated_at REAL NOT NULL);
    CREATE TABLE inputs (
        input_id TEXT PRIMARY KEY, client_msg_id TEXT NOT NULL UNIQUE, session_id TEXT NOT NULL,
        work_id TEXT NOT NULL, text TEXT NOT NULL, accepted_at REAL NOT NULL);
    CREATE TABLE controls (
        control_id INTEGER PRIMARY KEY AUTOINCREMENT, op_key TEXT UNIQUE, work_id TEXT, op TEXT NOT NULL,
        control_version INTEGER, at REAL NOT NULL);
    CREATE TABLE turns (
        turn_id TEXT PRIMARY KEY, work_id TEXT NOT NULL, seq_no INTEGER NOT NULL,
        continuation_key TEXT NOT NULL UNIQUE, predecessor TEXT, control_version INTEGER NOT NULL,
        status TEXT NOT NULL, end_reason TEXT, recovery INTEGER NOT NULL DEFAULT 0,
        restricted INTEGER NOT NULL DEFAULT 0, generation INTEGER, started_at REAL NOT NULL, ended_at REAL);
    CREATE TABLE messages (
        msg_seq INTEGER PRIMARY KEY AUTOINCREMENT, work_id TEXT NOT NULL, session_id TEXT NOT NULL,
        turn_id TEXT, role TEXT NOT NULL, content TEXT, tool_calls TEXT, tool_call_id TEXT,
        origin TEXT NOT NULL DEFAULT 'real', repair_key TEXT UNIQUE, at REAL NOT NULL);
    CREATE TABLE tool_calls (
        call_id TEXT PRIMARY KEY, work_id TEXT NOT NULL, turn_id TEXT NOT NULL, provider_call_id TEXT,
        tool_name TEXT NOT NULL, arguments TEXT NOT NULL, effect_class TEXT NOT NULL,
        impl_identity TEXT NOT NULL, status TEXT NOT NULL, blocked_reason TEXT,
        pid INTEGER, create_time REAL, exit_code INTEGER, result_text TEXT,
        repair_key TEXT, generation INTEGER, created_at REAL NOT NULL, updated_at REAL NOT NULL);
    CREATE TABLE provider_requests (
        request_id TEXT PRIMARY KEY, work_id TEXT NOT NULL, turn_id TEXT NOT NULL, step INTEGER NOT NULL,
        attempt INTEGER NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL);
    CREATE TABLE leases (
        work_id TEXT PRIMARY KEY, host_id TEXT NOT NULL, pid INTEGER NOT NULL, create_time REAL NOT NULL,
        generation INTEGER NOT NULL, acquired_at REAL NOT NULL, expires_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL, released INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE owner_attempts (
        attempt_id INTEGER PRIMARY KEY AUTOINCREMENT, work_id TEXT NOT NULL, generation INTEGER NOT NULL,
        host_id TEXT NOT NULL, pid INTEGER NOT NULL, create_time REAL NOT NULL, claimed_at REAL NOT NULL,
        ended_at REAL, outcome TEXT, UNIQUE(work_id, generation));
    CREATE TABLE fenced_writes (
        id INTEGER PRIMARY KEY AUTOINCREMENT, work_id TEXT NOT NULL, stale_generation INTEGER NOT NULL,
        current_generation INTEGER, op TEXT NOT NULL, pid INTEGER, at REAL NOT NULL);
    CREATE TABLE waits (
        wait_id TEXT PRIMARY KEY, work_id TEXT NOT NULL, kind TEXT NOT NULL, handle TEXT,
        observed_version INTEGER, consume_key TEXT UNIQUE, status TEXT NOT NULL, reason TEXT,
        created_at REAL NOT NULL);
    CREATE TABLE pending_recovery (
        work_id TEXT PRIMARY KEY, reason_code TEXT NOT NULL, text TEXT NOT NULL,
        actions TEXT NOT NULL, created_at REAL NOT NULL);
    CREATE TABLE outbox (
        op_key TEXT PRIMARY KEY, kind TEXT NOT NULL, payload TEXT NOT NULL, status TEXT NOT NULL,
        created_at REAL NOT NULL, done_at REAL);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, work_id TEXT, kind TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}');
    CREATE TABLE projection_sessions (
        session_id TEXT PRIMARY KEY, finished_items INTEGER NOT NULL DEFAULT 0,
        interrupted_turns INTEGER NOT NULL DEFAULT 0, last_seq INTEGER NOT NULL DEFAULT 0);
    CREATE INDEX work_items_status ON work_items(status);
    CREATE INDEX messages_session ON messages(session_id, msg_seq);
    CREATE INDEX tool_calls_work ON tool_calls(work_id);
    """,
    # 2: one-time approvals (impl/approvals.py), each bound to a tool call and the unknown-effect set it covers;
    # durable waits on external operations and their saved notifications (impl/waits.py)
    """
    CREATE TABLE approvals (
        approval_id TEXT PRIMARY KEY, work_id TEXT NOT NULL, call_id TEXT NOT NULL, provider_call_id TEXT,
        effect_set TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL, decided_at REAL,
        consumed_at REAL);
    CREATE INDEX approvals_call ON approvals(call_id);
    ALTER TABLE waits ADD COLUMN call_id TEXT;
    ALTER TABLE waits ADD COLUMN control_version INTEGER;
    ALTER TABLE waits ADD COLUMN next_poll_at REAL;
    ALTER TABLE waits ADD COLUMN poll_count INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE waits ADD COLUMN consumed_at REAL;
    CREATE TABLE notifications (
        notification_id TEXT PRIMARY KEY, handle TEXT NOT NULL, version TEXT NOT NULL, outcome TEXT NOT NULL,
        source TEXT NOT NULL, status TEXT NOT NULL, received_at REAL NOT NULL);
    """,
    # 3: Goals (impl/goals.py, impl/acceptance.py): objective, requirements, Todo, acceptance, budget
    """
    CREATE TABLE goals (
        goal_id TEXT PRIMARY KEY, work_id TEXT NOT NULL UNIQUE, session_id TEXT NOT NULL,
        objective TEXT NOT NULL, revision INTEGER NOT NULL, goal_version INTEGER NOT NULL DEFAULT 1,
        state TEXT NOT NULL, phase TEXT, reason_code TEXT, reason_text TEXT NOT NULL DEFAULT '',
        max_tokens INTEGER, max_cost_usd REAL, budget_at REAL NOT NULL DEFAULT 0,
        last_blocker TEXT, blocker_streak INTEGER NOT NULL DEFAULT 0, acceptance_id TEXT,
        terminal_snapshot TEXT, transcript_anchor INTEGER, created_at REAL NOT NULL, updated_at REAL NOT NULL);
    CREATE TABLE goal_requirements (
        goal_id TEXT NOT NULL, req_id TEXT NOT NULL, text TEXT NOT NULL, revision INTEGER NOT NULL,
        waived_reason TEXT, PRIMARY KEY (goal_id, req_id));
    CREATE TABLE goal_todo (
        goal_id TEXT NOT NULL, todo_id TEXT NOT NULL, text TEXT NOT NULL DEFAULT '', required INTEGER NOT NULL,
        done INTEGER NOT NULL DEFAULT 0, removed INTEGER NOT NULL DEFAULT 0, blocked_by TEXT,
        PRIMARY KEY (goal_id, todo_id));
    CREATE TABLE goal_acceptances (
        acceptance_id TEXT PRIMARY KEY, goal_id TEXT NOT NULL, revision INTEGER NOT NULL,
        goal_version INTEGER NOT NULL, control_version INTEGER NOT NULL, result_version INTEGER NOT NULL,
        request_id TEXT, outcome TEXT NOT NULL, verdicts TEXT NOT NULL, valid INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL);
    """,
    # 4: a Goal's hard limit of active time (impl/goal_timer.py keeps the time)
    """
    ALTER TABLE goals ADD COLUMN max_active_s REAL;
    """,
    # 5: background Jobs (impl/jobs.py): the authorized subtasks, the concurrency quota, the caller's provenance
    """
    ALTER TABLE work_items ADD COLUMN provenance TEXT;
    CREATE TABLE jobs (
        job_id TEXT PRIMARY KEY, client_job_id TEXT NOT NULL UNIQUE, caller_work_id TEXT NOT NULL,
        quota INTEGER NOT NULL, created_at REAL NOT NULL);
    CREATE TABLE job_subtasks (
        job_id TEXT NOT NULL, idx INTEGER NOT NULL, text TEXT NOT NULL, child_id TEXT UNIQUE, started_at REAL,
        delivered_at REAL, PRIMARY KEY (job_id, idx));
    """,
    # 6: the operator's pricing table (impl/pricing.py); a request is quoted at the newest row when dispatched
    """
    CREATE TABLE pricing (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, model TEXT, input_usd_per_mtok REAL NOT NULL,
        output_usd_per_mtok REAL NOT NULL, set_at REAL NOT NULL);
    """,
)

USAGE_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE receipts (
        request_id TEXT PRIMARY KEY, op_key TEXT NOT NULL UNIQUE, work_id TEXT NOT NULL,
        session_id TEXT NOT NULL, turn_id TEXT NOT NULL, attempt INTEGER NOT NULL,
        objective_revision INTEGER, state TEXT NOT NULL,
        prompt_tokens INTEGER, completion_tokens INTEGER, total_tokens INTEGER,
        watermark_chunks INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, settled_at REAL);
    """,
    # 2: the Job a receipt's attempt belongs to (impl/jobs.py), saved at dispatch
    """
    ALTER TABLE receipts ADD COLUMN job_id TEXT;
    """,
    # 3: the prices an attempt was quoted at when dispatched (impl/pricing.py), apart from its tokens
    """
    ALTER TABLE receipts ADD COLUMN quote_input_usd_per_mtok REAL;
    ALTER TABLE receipts ADD COLUMN quote_output_usd_per_mtok REAL;
    """,
    # 4: budget reservations (impl/reservations.py), opened with the receipt, settled by its write
    """
    CREATE TABLE reservations (
        reservation_id TEXT PRIMARY KEY, request_id TEXT NOT NULL UNIQUE, work_id TEXT NOT NULL, goal_id TEXT,
        max_tokens INTEGER, state TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL,
        updated_at REAL NOT NULL);
    """,
    # 5: each work item's known spend, raised in its receipts' writes (impl/spend.py); rebuilt from the receipts
    """
    CREATE TABLE goal_spend (work_id TEXT PRIMARY KEY, spent_tokens_known INTEGER NOT NULL);
    INSERT INTO goal_spend SELECT work_id, SUM(COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0))
        FROM receipts WHERE state IN ('known', 'partial') GROUP BY work_id;
    """,
)


class MigrationFailed(Exception):
    """A migration could not be applied; the database is left as it was."""

    def __init__(self, path: Path, version: int, cause: BaseException):
        super().__init__(f"migration {version} of {path} failed: {cause}")
        self.path, self.version, self.cause = path, version, cause


class StorageUnavailable(Exception):
    """The database file cannot be opened or read."""


# The recoverable actions of each storage failure, in the protocol's vocabulary (StorageAction).
STORAGE_ACTIONS = {
    "recovery_failed_storage_unavailable": ("retry", "restore_backup"),
    "recovery_failed_migration": ("retry", "restore_backup", "upgrade_runtime"),
}
SQLITE_MAGIC = b"SQLite format 3\x00"
WAL_MAGICS = (bytes.fromhex("377f0682"), bytes.fromhex("377f0683"))


def check_readable(path: Path) -> None:
    """Refuse a database whose file (or write-ahead log) does not start as SQLite's does, before SQLite opens it.

    Opening is not harmless: SQLite treats a WAL whose header it cannot read as garbage and deletes it when the
    connection closes, and those are committed facts. A store we cannot read is left exactly as it is."""
    for part, magics in ((path, (SQLITE_MAGIC,)), (path.with_name(path.name + "-wal"), WAL_MAGICS)):
        try:
            with part.open("rb") as f:
                head = f.read(len(magics[0]))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StorageUnavailable(f"cannot read {part}: {exc}") from exc
        if head and not any(m.startswith(head) for m in magics):  # empty: a new file; a prefix: SQLite decides
            raise StorageUnavailable(f"{part} is not a readable SQLite file (its header is damaged)")


def connect(path: Path) -> Database:
    """An autocommit connection (we issue BEGIN IMMEDIATE ourselves) in WAL mode, to a file we can read."""
    check_readable(path)
    try:
        conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=30000")
    except sqlite3.Error as exc:
        raise StorageUnavailable(f"cannot open {path}: {exc}") from exc
    return Database(conn)


def current_version(db: Database) -> int:
    """The schema version: the newer of the migrations recorded and ``PRAGMA user_version`` (which every migration
    sets too, so a newer runtime's schema is seen before anything is read or written)."""
    user_version = int(db.execute("PRAGMA user_version").fetchone()[0] or 0)
    if "schema_version" not in db.table_names():
        return user_version
    row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return max(int(row[0] or 0), user_version)


def newer_schema(path: Path, version: int, known: int) -> MigrationFailed:
    return MigrationFailed(path, version, RuntimeError(
        f"database is at schema version {version}, newer than this runtime knows ({known}); nothing was changed"))


def migrate(db: Database, path: Path, migrations: tuple[str, ...]) -> int:
    """Apply every pending migration, each in its own transaction; return the resulting version."""
    try:
        version = current_version(db)
    except sqlite3.Error as exc:  # a damaged page the header check could not see
        raise StorageUnavailable(f"cannot read {path}: {exc}") from exc
    if version > len(migrations):  # before any write: a newer runtime's store is left exactly as it is
        raise newer_schema(path, version, len(migrations))
    if version == len(migrations):
        # A read answered it. CREATE TABLE IF NOT EXISTS would take the write lock even when the table
        # exists, and processes starting together then queue in SQLite's busy handler (tens of ms).
        return version
    db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at REAL)")
    version = current_version(db)
    if version > len(migrations):
        raise newer_schema(path, version, len(migrations))
    for number, script in enumerate(migrations[version:], start=version + 1):
        conn = db.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            if current_version(db) >= number:  # another process migrated meanwhile
                conn.execute("ROLLBACK")
                continue
            for statement in _statements(script):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version VALUES (?, ?)", (number, time.time()))
            conn.execute(f"PRAGMA user_version = {int(number)}")  # transactional: it commits with the migration
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise MigrationFailed(path, number, exc) from exc
    return current_version(db)


def _statements(script: str) -> list[str]:
    # executescript() would commit implicitly; split so the whole migration is one transaction.
    return [s.strip() for s in script.split(";") if s.strip()]


def open_runtime_db(data_dir: Path) -> Database:
    path = data_dir / "runtime.db"
    db = connect(path)
    migrate(db, path, RUNTIME_MIGRATIONS)
    return db


def open_usage_db(data_dir: Path) -> Database:
    path = data_dir / "usage.db"
    db = connect(path)
    migrate(db, path, USAGE_MIGRATIONS)
    return db
