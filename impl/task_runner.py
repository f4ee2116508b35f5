"""Executing Paperclip task runs on the workers, and recovering them after a restart.

A worker calls ``step`` in its loop. One step fires a due scheduled retry, finishes the settlement of a
coordinator whose settler died, or claims one run and takes it through preparation (``workspaces``), bootstrap
and one provider dispatch. A run is claimed by compare-and-set on its recorded runner (pid + start time), so
two workers never run it twice. A run whose runner is gone is a restart claim on its native coordinator:

- ``bootstrap_incomplete``: the runner died before provider dispatch; the run is prepared again in the directory
  it already bound and goes on. If that re-preparation fails, the run fails and the claimed coordinator settles
  as ``terminal_failure`` (``settle_failed_preparation``, #19759), so a later Retry is admitted and deferred
  clicks wake;
- ``resume_dead_runner``: the runner died after dispatch. A result the run had already accepted (recorded on its
  coordinator before finalization, ``run.finalize.before``) goes to the run's finalizer, with no second provider
  request (seed 001: recovery does not create a second agent to reproduce that result); without one, the native
  session cannot be resumed, so the run fails with ``native_session_interrupted`` and its coordinator ends
  ``terminal_failure``.

A failure then either schedules the generation's next maintenance retry (``retry_policy``) or offers the
ordinary Retry action.
"""

from __future__ import annotations

import logging

from . import retry_policy, tasks
from .config import Config
from .db import Database
from .failpoints import failpoint
from .provider import ProviderFault, Request, Watermark
from .schema import open_usage_db
from .store import Identity, now, one, process_alive, rows, tx
from .workspaces import PrepareFailed, prepare

log = logging.getLogger("recoverykit.impl.task_runner")
SCHEDULED_CODES = ("provider_unavailable", "provider_rate_limited")  # infrastructure the maintenance policy retries
_DBS: dict[str, Database] = {}
_RESCANNED: set[str] = set()


def _db(cfg: Config) -> Database:
    key = str(cfg.path)
    if key not in _DBS:
        _DBS[key] = tasks.open_tasks_db(cfg.path)
    return _DBS[key]


def use_usage_db(cfg: Config, udb: Database) -> None:
    """Write receipts through the worker's own usage.db connection (one connection per file per process)."""
    _DBS[f"{cfg.path}#usage"] = udb


def _udb(cfg: Config) -> Database:
    key = f"{cfg.path}#usage"
    if key not in _DBS:
        _DBS[key] = open_usage_db(cfg.path)
    return _DBS[key]


def open_receipt(cfg: Config, run: dict, request_id: str) -> None:
    """The attempt's usage receipt, attributed before dispatch (usage.db, as the chat engine's receipts)."""
    _udb(cfg).conn.execute(
        "INSERT OR IGNORE INTO receipts (request_id, op_key, work_id, session_id, turn_id, attempt, state, created_at)"
        " VALUES (?,?,?,?,?,1,'dispatched',?)", (request_id, f"usage.open:{request_id}", run["task_id"],
                                                  run["task_id"], run["run_id"], now()))


def settle_receipt(cfg: Config, request_id: str, wm: Watermark | None, complete: bool) -> None:
    """Known, partial (a lower bound) or unknown, from what the client saw; a settled receipt stays."""
    seen = wm is not None and wm.seen
    state = "known" if complete and seen else ("partial" if seen else "unknown")
    v = wm.values if wm is not None else {}
    _udb(cfg).conn.execute(
        "UPDATE receipts SET state=?, prompt_tokens=?, completion_tokens=?, total_tokens=?, watermark_chunks=?,"
        " settled_at=? WHERE request_id=? AND state='dispatched'",
        (state, v.get("prompt_tokens"), v.get("completion_tokens"), v.get("total_tokens"),
         wm.chunks if wm else 0, now(), request_id))


def _owner(me: Identity) -> str:
    return f"{me.host_id}:{me.pid}:{me.create_time:.3f}"


def _runner_alive(run: dict) -> bool:
    return process_alive(run["runner_pid"], run["runner_ct"])


def next_due_in(cfg: Config) -> float | None:
    """Seconds to the next scheduled retry (for the worker's idle timeout), or None."""
    if not (cfg.path / "tasks.db").exists():
        return None
    row = one(_db(cfg), "SELECT MIN(due_at) AS t FROM retry_schedule WHERE state='scheduled'")
    return None if row is None or row["t"] is None else max(0.0, row["t"] - now()) + 0.01


def start_up(cfg: Config) -> None:
    """The start-up rescan, before the worker says it is ready: a runtime that answers ``start`` (and then
    ``quiesce``) while its start-up maintenance is still to run lets a reader see the state before that
    maintenance. A failure here is left to ``step``, which rescans until it succeeds."""
    if str(cfg.path) in _RESCANNED or not (cfg.path / "tasks.db").exists():
        return
    try:
        rescan(_db(cfg))
    except Exception:  # (storage faults: the worker's loop retries and reports them)
        log.exception("start-up rescan failed; the worker's loop retries it")
        return
    _RESCANNED.add(str(cfg.path))


def step(cfg: Config, me: Identity) -> bool:
    """One unit of task work; False when there was none."""
    if not (cfg.path / "tasks.db").exists():
        return False
    db = _db(cfg)
    if str(cfg.path) not in _RESCANNED:
        rescan(db)
        _RESCANNED.add(str(cfg.path))
    if fire_due(db) or resettle_orphans(db, me):
        return True
    claimed = claim(db, me)
    if claimed is None:
        return False
    run, kind = claimed
    try:
        execute(db, cfg, run, kind, me)
    except Exception:  # a defect must not stall the worker; the run stays claimed by a live process
        log.exception("task run %s failed unexpectedly", run["run_id"])
        fail_run(db, run["run_id"], "internal_error")
    return True


def fire_due(db: Database) -> bool:
    """A scheduled retry whose time has come becomes a run of the same generation."""
    with tx(db):
        due = one(db, "SELECT * FROM retry_schedule WHERE state='scheduled' AND due_at<=? ORDER BY due_at LIMIT 1",
                  (now(),))
        if due is None:
            return False
        db.execute("UPDATE retry_schedule SET state='fired' WHERE task_id=? AND generation=? AND attempt=?",
                   (due["task_id"], due["generation"], due["attempt"]))
        task = one(db, "SELECT * FROM tasks WHERE task_id=?", (due["task_id"],))
        tasks.new_run(db, task, generation=due["generation"], attempt=due["attempt"] + 1,
                      retry_of=task["current_run"], key=None)
    return True


def claim(db: Database, me: Identity) -> tuple[dict, str | None] | None:
    """A queued run, or an active one whose runner is gone (a restart claim); set its runner to us."""
    for run in rows(db, "SELECT * FROM runs WHERE state IN ('queued','preparing','bootstrapping','dispatched')"
                        " ORDER BY created_at"):
        if run["state"] != "queued" and _runner_alive(run):
            continue  # a live runner: its own work, never reclaimed
        kind = None
        if run["state"] != "queued":
            kind = "resume_dead_runner" if run["dispatched"] else "bootstrap_incomplete"
        with tx(db):
            moved = db.execute("UPDATE runs SET runner_pid=?, runner_ct=?, state=CASE state WHEN 'queued' THEN"
                               " 'preparing' ELSE state END WHERE run_id=? AND state=? AND runner_pid IS ?",
                               (me.pid, me.create_time, run["run_id"], run["state"], run["runner_pid"])).rowcount
            if not moved:
                continue
            if kind is not None:
                db.execute("UPDATE coordinators SET state='observed', claim_kind=?, lease_owner=? WHERE run_id=?"
                           " AND state IN ('running','observed')", (kind, _owner(me), run["run_id"]))
        return one(db, "SELECT * FROM runs WHERE run_id=?", (run["run_id"],)), kind
    return None


def execute(db: Database, cfg: Config, run: dict, kind: str | None, me: Identity) -> None:
    run_id = run["run_id"]
    task = one(db, "SELECT * FROM tasks WHERE task_id=?", (run["task_id"],))
    if kind == "resume_dead_runner" and accepted_result(db, run_id):
        finalize(db, run_id, task["task_id"])  # its accepted result goes to its existing finalizer
        return
    if kind == "resume_dead_runner":
        settle_receipt(cfg, f"{run_id}.1", None, False)  # sent or not, its usage is unknown: never zero
        fail_run(db, run_id, "native_session_interrupted", coordinator="terminal_failure")
        return
    try:
        failpoint("workspace.prepare.before", task["task_id"])
        with tx(db):  # its own transaction: the fault is consumed even though the preparation then fails
            armed = tasks.take_fault(db, task["task_id"], "prepare_fails")
        if armed is not None:
            raise PrepareFailed(armed["error_code"], "the kit's environment fault: preparation failed validation")
        with tx(db):
            prepare(db, cfg.path, task, run, tasks.COMPANY)
            db.execute("UPDATE runs SET state='bootstrapping' WHERE run_id=?", (run_id,))
        failpoint("workspace.prepare.after", task["task_id"])
    except PrepareFailed as exc:
        log.warning("run %s: preparation failed: %s", run_id, exc)
        if kind in ("bootstrap_incomplete", "resume_dead_runner"):
            fail_run(db, run_id, exc.code)
            settle_failed_preparation(db, run_id, _owner(me), exc.code)
        else:
            fail_run(db, run_id, exc.code, coordinator="terminal_failure")
        return
    failpoint("bootstrap.before_dispatch", task["task_id"])
    request_id = f"{run_id}.1"
    with tx(db):
        armed = tasks.take_fault(db, task["task_id"], "run_fails")
        saved: list[str] = []
        if armed is None:
            open_receipt(cfg, run, request_id)  # attribution is durable before the run counts as dispatched
            db.execute("UPDATE runs SET state='dispatched', dispatched=1 WHERE run_id=?", (run_id,))
            saved = tasks.consume_messages(db, task["task_id"], run_id)  # execution starts: consumed, once
    if armed is not None:
        cooldown = now() + armed["cooldown_s"] if armed["cooldown_s"] else None
        fail_run(db, run_id, armed["error_code"], coordinator="terminal_failure", cooldown_until=cooldown)
        return
    messages = [{"role": "user", "content": text} for text in (task["text"], *saved)]
    request = Request(cfg.provider_base_url, cfg.model, messages, [], request_id, api_key=cfg.api_key)
    try:
        request.send()
        answer = request.receive()
        settle_receipt(cfg, request_id, answer.watermark, True)
    except ProviderFault as exc:
        settle_receipt(cfg, request_id, exc.watermark, False)
        code = "provider_rate_limited" if exc.status == 429 else "provider_unavailable"
        fail_run(db, run_id, code, coordinator="terminal_failure")
        return
    with tx(db):  # the result is accepted (durable) before its finalization
        db.execute("UPDATE coordinators SET result='accepted' WHERE run_id=? AND result IS NULL", (run_id,))
    failpoint("run.finalize.before", task["task_id"])
    finalize(db, run_id, task["task_id"])


def accepted_result(db: Database, run_id: str) -> bool:
    """The run's provider result was accepted (durable on its coordinator) and is waiting for its finalizer."""
    return (one(db, "SELECT result FROM coordinators WHERE run_id=?", (run_id,)) or {}).get("result") == "accepted"


def finalize(db: Database, run_id: str, task_id: str) -> None:
    """The run's finalizer: its accepted result completes the run, its coordinator, its receipts and the task."""
    with tx(db):
        db.execute("UPDATE runs SET state='succeeded', runner_pid=NULL WHERE run_id=?", (run_id,))
        db.execute("UPDATE coordinators SET state='completed', lease_owner=NULL, result='succeeded' WHERE run_id=?",
                   (run_id,))
        db.execute("UPDATE wakeup_receipts SET status='completed' WHERE run_id=? AND status='pending'", (run_id,))
        db.execute("UPDATE tasks SET status='succeeded', reason=NULL WHERE task_id=? AND current_run=?",
                   (task_id, run_id))


def fail_run(db: Database, run_id: str, code: str, coordinator: str | None = None,
             cooldown_until: float | None = None) -> None:
    """The run fails with ``code``; its receipts fail; and, in the same transaction, the task shows its next step
    (a scheduled retry or the Retry action: never a working state with nothing running). ``coordinator``:
    finalize the run's own coordinator (the normal path); None leaves a claimed coordinator to
    ``settle_failed_preparation``."""
    with tx(db):
        db.execute("UPDATE runs SET state='failed', error_code=?, runner_pid=NULL WHERE run_id=? AND state<>'failed'",
                   (code, run_id))
        db.execute("UPDATE wakeup_receipts SET status='failed' WHERE run_id=? AND status='pending'", (run_id,))
        if coordinator is not None:
            db.execute("UPDATE coordinators SET state=?, error_code=?, lease_owner=NULL, result='failed' WHERE"
                       " run_id=? AND state IN ('running','observed')", (coordinator, code, run_id))
        task_id = one(db, "SELECT task_id FROM runs WHERE run_id=?", (run_id,))["task_id"]
        _next_step(db, task_id, code, cooldown_until)


def settle_failed_preparation(db: Database, run_id: str, owner: str, code: str) -> bool:
    """#19759's settleFailedNativeRecoveryPreparation: only a coordinator still observed, owned by this claim,
    of a bootstrap_incomplete or resume_dead_runner kind, without a result, for a failed run that never
    dispatched, settles as terminal_failure; then deferred work wakes. Idempotent; reattach claims untouched."""
    failpoint("coordinator.settle.before", run_id)
    with tx(db):
        settled = db.execute(
            "UPDATE coordinators SET state='terminal_failure', error_code=?, lease_owner=NULL WHERE run_id=? AND"
            " state='observed' AND lease_owner=? AND result IS NULL AND claim_kind IN"
            " ('bootstrap_incomplete','resume_dead_runner') AND (SELECT state='failed' AND dispatched=0 FROM runs"
            " WHERE run_id=?)", (code, run_id, owner, run_id)).rowcount
        if settled:
            task_id = one(db, "SELECT task_id FROM runs WHERE run_id=?", (run_id,))["task_id"]
            tasks.wake_deferred(db, task_id)
    failpoint("coordinator.settle.after", run_id)
    return bool(settled)


def _owner_alive(owner: str | None) -> bool:
    if not owner:
        return False
    _, pid, create_time = owner.rsplit(":", 2)
    return process_alive(int(pid), float(create_time))


def resettle_orphans(db: Database, me: Identity) -> bool:
    """A settler that died between failing its run and settling: take its claim over and settle it."""
    for c in rows(db, "SELECT c.*, r.error_code AS run_error, r.task_id FROM coordinators c JOIN runs r USING"
                      " (run_id) WHERE c.state='observed' AND r.state='failed' AND r.dispatched=0 AND c.result IS NULL"
                      " AND c.claim_kind IN ('bootstrap_incomplete','resume_dead_runner')"):
        if _owner_alive(c["lease_owner"]):
            continue
        with tx(db):
            took = db.execute("UPDATE coordinators SET lease_owner=? WHERE run_id=? AND state='observed' AND"
                              " lease_owner IS ?", (_owner(me), c["run_id"], c["lease_owner"])).rowcount
        code = c["run_error"] or "preparation_failed"
        if took and settle_failed_preparation(db, c["run_id"], _owner(me), code):
            after_failure(db, c["task_id"], code, None)
            return True
    return False


def rescan(db: Database) -> None:
    """At a worker's start: a task whose current run failed but whose next step (a scheduled retry or the Retry
    action) was not recorded before a crash gets it now. The budget and the persisted schedule stay as stored."""
    for task in rows(db, "SELECT t.task_id, r.error_code FROM tasks t JOIN runs r ON r.run_id=t.current_run WHERE"
                         " t.status='working' AND r.state='failed'"):
        after_failure(db, task["task_id"], task["error_code"] or "internal_error", None)


def after_failure(db: Database, task_id: str, code: str, cooldown_until: float | None) -> None:
    """``_next_step`` in a transaction of its own (the start-up rescan, a settlement taken over)."""
    with tx(db):
        _next_step(db, task_id, code, cooldown_until)


def _next_step(db: Database, task_id: str, code: str, cooldown_until: float | None) -> None:
    """Schedule the generation's next maintenance retry, or offer the ordinary Retry action (inside a tx)."""
    task = one(db, "SELECT * FROM tasks WHERE task_id=?", (task_id,))
    current = one(db, "SELECT * FROM runs WHERE run_id=?", (task["current_run"],))
    if current is None or current["state"] != "failed" or task["status"] not in ("working", "held"):
        return  # a deferred click already started the next run, or the step is already recorded
    t = now()
    first = task["gen_first_failure"] if task["gen_first_failure"] is not None else t
    planned = None
    stricter = task["retry_limit"] is not None and task["gen_retries"] >= task["retry_limit"]
    if (code in SCHEDULED_CODES or cooldown_until is not None) and not stricter:  # a stricter limit stays apart
        planned = retry_policy.plan(task["gen_retries"], first, t, cooldown_until, code if cooldown_until else None)
    if planned is None:
        db.execute("UPDATE tasks SET status='retry_offered', reason=?, gen_first_failure=? WHERE task_id=?",
                   (code, first, task_id))
        return
    db.execute("INSERT OR REPLACE INTO retry_schedule (task_id, generation, attempt, due_at, jitter,"
               " first_failure_at, window_end, cooldown_until, cooldown_source, state) VALUES (?,?,?,?,?,?,?,?,?,"
               "'scheduled')", (task_id, task["generation"], planned.attempt, planned.due_at, planned.jitter,
                                first, planned.window_end, planned.cooldown_until, planned.cooldown_source))
    db.execute("UPDATE tasks SET status='retry_scheduled', reason=?, gen_retries=?, gen_first_failure=? WHERE"
               " task_id=?", (code, planned.attempt, first, task_id))
