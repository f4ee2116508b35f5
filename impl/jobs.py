"""Background Jobs: authorized subtasks run as child work items under a concurrency quota (seed 000).

A Job is saved whole at the real caller's admission boundary (``start``, the control process): its instruction,
the subtasks it is authorized to run, its quota and the caller's provenance. Nothing about it lives in memory:
a worker that claims the Job delivers the results of finished children to it, each once (the delivery and its
mark are one transaction, keyed by the child), starts authorized subtasks while fewer children than the quota
still run (counted from the store, so a restart holds the quota), and waits (``waiting_child``) until there is
more to do. A subtask is started once: a restart finds its child and recovers it like any work item, and
authorizes no other. Once every result is delivered the Job asks the model once, with them, and finishes.
Children inherit the provenance saved with the Job; a call from another session keeps it without making the
caller the Job's parent.
"""

from __future__ import annotations

import uuid

from . import resources
from .config import Config
from .db import Database
from .engine import Ctx, release
from .failpoints import failpoint
from .store import emit, fenced, now, one, rows, set_status, tx

WAITING_CHILD = "waiting_child"
RUNNING_SQL = ("SELECT COUNT(*) AS n FROM job_subtasks s JOIN work_items c ON c.work_id = s.child_id"
               " WHERE s.job_id=? AND c.desired_state='run'")


class JobError(Exception):
    def __init__(self, code: str, text: str):
        super().__init__(text)
        self.code, self.text = code, text


def start(db: Database, cfg: Config, caller_work_id: str, session_id: str, text: str, subtasks: list[str],
          concurrency: int, client_job_id: str) -> dict:
    """``job_start``: the Job, its authorized subtasks and the caller's provenance in one transaction."""
    with tx(db):
        known = one(db, "SELECT job_id FROM jobs WHERE client_job_id=?", (client_job_id,))
        if known is not None:
            return {"job_id": known["job_id"]}
        caller = one(db, "SELECT work_id, session_id FROM work_items WHERE work_id=?", (caller_work_id,))
        if caller is None:
            raise JobError("unknown_work_item", f"no work item {caller_work_id!r} to start a Job for")
        # the caller's identity is saved here, at its admission boundary; a call from another session keeps it as
        # provenance only: the caller does not become a canonical parent across sessions
        parent = caller_work_id if caller["session_id"] == session_id else None
        t = now()
        job_id = f"j-{uuid.uuid4().hex[:12]}"
        db.conn.execute("INSERT OR IGNORE INTO sessions (session_id, created_at) VALUES (?,?)", (session_id, t))
        db.conn.execute(
            "INSERT INTO work_items (work_id, session_id, kind, desired_state, status, reason_code, host_id,"
            " recovery_policy, parent_id, provenance, created_at, updated_at) VALUES (?,?,'job','run','queued',"
            " 'queued',?,?,?,?,?,?)",
            (job_id, session_id, cfg.host_id, "automatic" if cfg.automatic_recovery else "disabled", parent,
             caller_work_id, t, t))
        db.conn.execute("INSERT INTO jobs VALUES (?,?,?,?,?)", (job_id, client_job_id, caller_work_id, concurrency, t))
        for idx, sub in enumerate(subtasks):
            db.conn.execute("INSERT INTO job_subtasks (job_id, idx, text) VALUES (?,?,?)", (job_id, idx, sub))
        db.conn.execute("INSERT INTO messages (work_id, session_id, role, content, at) VALUES (?,?,'user',?,?)",
                        (job_id, session_id, text, t))
        resources.accept_tools(db, cfg, job_id)
        emit(db, job_id, "job_started", caller=caller_work_id, subtasks=len(subtasks), quota=concurrency)
    return {"job_id": job_id}


def is_job(db: Database, work_id: str) -> bool:
    return one(db, "SELECT 1 AS x FROM jobs WHERE job_id=?", (work_id,)) is not None


def running_children(db: Database, job_id: str) -> int:
    """Children the Job's quota counts: those meant to run, read from the store (never an in-memory count)."""
    return one(db, RUNNING_SQL, (job_id,))["n"]


def authorized(db: Database, job_id: str) -> list[dict]:
    """Subtasks authorized and not started yet, in order."""
    return rows(db, "SELECT * FROM job_subtasks WHERE job_id=? AND child_id IS NULL ORDER BY idx", (job_id,))


def deliverable(db: Database, job_id: str) -> list[dict]:
    """Finished children whose result the Job has not been given yet."""
    return rows(db, "SELECT s.* FROM job_subtasks s JOIN work_items c ON c.work_id = s.child_id WHERE s.job_id=?"
                    " AND c.desired_state='done' AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.work_id = s.job_id"
                    " AND m.repair_key = 'deliver:' || s.child_id) ORDER BY s.idx", (job_id,))


def wake(db: Database) -> bool:
    """Queue every waiting Job with something to do (a result to deliver, a free slot for a subtask); True if any.
    Read first, so an idle worker takes no write lock."""
    due = []
    for j in rows(db, "SELECT w.work_id, j.quota FROM work_items w JOIN jobs j ON j.job_id = w.work_id"
                      " WHERE w.desired_state='run' AND w.status='waiting' AND w.reason_code=?", (WAITING_CHILD,)):
        if deliverable(db, j["work_id"]) or (authorized(db, j["work_id"])
                                             and running_children(db, j["work_id"]) < j["quota"]):
            due.append(j["work_id"])
    if not due:
        return False
    with tx(db):
        for job_id in due:
            db.conn.execute("UPDATE work_items SET status='queued', reason_code='queued', updated_at=? WHERE"
                            " work_id=? AND status='waiting' AND reason_code=?", (now(), job_id, WAITING_CHILD))
    return True


def advance(ctx: Ctx, item: dict, gen: int) -> bool:
    """The claimed Job's step before its own turn: deliver, start, or wait. True while it waits for children."""
    job_id = item["work_id"]
    for sub in deliverable(ctx.db, job_id):
        _deliver(ctx, item, gen, sub)
    with fenced(ctx.db, job_id, gen, "job.subtasks"):
        quota = one(ctx.db, "SELECT quota FROM jobs WHERE job_id=?", (job_id,))["quota"]
        free = quota - running_children(ctx.db, job_id)
        for sub in authorized(ctx.db, job_id)[:max(0, free)]:
            _start_subtask(ctx, item, sub)
        left = one(ctx.db, "SELECT COUNT(*) AS n FROM job_subtasks WHERE job_id=? AND delivered_at IS NULL",
                   (job_id,))["n"]
        if not left:
            return False
        set_status(ctx.db, job_id, "waiting", WAITING_CHILD, f"waiting for {left} subtask result(s)", ("Pause", "End"))
        release(ctx, job_id, gen, WAITING_CHILD)
    return True


def _start_subtask(ctx: Ctx, job: dict, sub: dict) -> None:
    """Inside the Job's fenced transaction: the subtask's child work item, with the provenance saved with the Job."""
    t = now()
    child_id = f"{job['work_id']}.c{sub['idx']}-{uuid.uuid4().hex[:6]}"
    provenance = job["provenance"]  # restored from the Job, as saved at its caller's admission
    ctx.db.conn.execute(
        "INSERT INTO work_items (work_id, session_id, kind, desired_state, status, reason_code, host_id,"
        " recovery_policy, parent_id, provenance, created_at, updated_at) VALUES (?,?,'job','run','queued','queued',"
        " ?,?,?,?,?,?)",
        (child_id, job["session_id"], ctx.cfg.host_id, job["recovery_policy"], job["work_id"], provenance, t, t))
    ctx.db.conn.execute("INSERT INTO messages (work_id, session_id, role, content, at) VALUES (?,?,'user',?,?)",
                        (child_id, job["session_id"], sub["text"], t))
    ctx.db.conn.execute("UPDATE job_subtasks SET child_id=?, started_at=? WHERE job_id=? AND idx=?",
                        (child_id, t, job["work_id"], sub["idx"]))
    resources.accept_tools(ctx.db, ctx.cfg, child_id)
    emit(ctx.db, job["work_id"], "subtask_started", child_id=child_id, idx=sub["idx"])


def _deliver(ctx: Ctx, job: dict, gen: int, sub: dict) -> None:
    """A child's result into the Job's conversation, once: the message and the mark commit together."""
    job_id, child_id = job["work_id"], sub["child_id"]
    answer = one(ctx.db, "SELECT content FROM messages WHERE work_id=? AND role='assistant' AND origin='real'"
                         " ORDER BY msg_seq DESC LIMIT 1", (child_id,))
    failpoint("child.delivery.before", job_id)
    with fenced(ctx.db, job_id, gen, "child.delivery"):
        key = f"deliver:{child_id}"  # the child's result, once, whoever delivers it (``deliverable`` reads it)
        cur = ctx.db.conn.execute(
            "INSERT OR IGNORE INTO messages (work_id, session_id, role, content, origin, repair_key, at)"
            " VALUES (?,?,'user',?,'real',?,?)",
            (job_id, job["session_id"], f"[subtask {sub['idx'] + 1} result] {(answer or {}).get('content') or ''}",
             key, now()))
        if not cur.rowcount:
            return  # delivered already (by an owner before us): a repeated delivery changes nothing
        ctx.db.conn.execute("UPDATE job_subtasks SET delivered_at=? WHERE job_id=? AND idx=?",
                            (now(), job_id, sub["idx"]))
        emit(ctx.db, job_id, "child_delivered", child_id=child_id)
    failpoint("child.delivery.after", job_id)
