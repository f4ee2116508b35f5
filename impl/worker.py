"""The worker process: recover on start, then claim and run work; block when there is none.

Idle, a worker sits in ``select`` on its wake socket (a Unix datagram socket the control process
pokes after every accepted control) with a timeout that is either none or the next durable retry
time: no polling, no idle model calls. SIGTERM is a graceful stop: admission stops, the current
step's records are already committed, the lease is released, and the work keeps desired_state run
(a shutdown is never a user Pause).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import sqlite3
import sys
from pathlib import Path

from . import approvals, goals, jobs, recovery, task_runner, waits
from .config import Config
from .engine import Ctx, Interrupted, finish, internal_fault, provider_step, release, run_call
from .failpoints import failpoint
from .projection import ProjectionLost, project
from .schema import STORAGE_ACTIONS, MigrationFailed, StorageUnavailable, open_runtime_db, open_usage_db
from .store import Fenced, Identity, fenced, now, one, rows, set_status

log = logging.getLogger("recoverykit.impl.worker")
STORAGE_RETRY_S = 5.0


class Worker:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.stop = False
        me = Identity.me(cfg.host_id)
        # facts first: a worker that cannot read or migrate them exits before it binds or claims anything
        self.ctx = Ctx(cfg, open_runtime_db(cfg.path), open_usage_db(cfg.path), me, lambda: self.stop)
        task_runner.use_usage_db(cfg, self.ctx.udb)
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        self.wake_path = cfg.run_dir / f"wake-{os.getpid()}.sock"
        self.wake = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.wake.bind(str(self.wake_path))
        self.wake.setblocking(False)
        self.sig_r, self.sig_w = socket.socketpair()
        self.sig_r.setblocking(False)
        self.sig_w.setblocking(False)
        signal.set_wakeup_fd(self.sig_w.fileno())
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)

    def _on_term(self, signum, frame) -> None:
        self.stop = True
        if getattr(self, "ctx", None) is not None and self.ctx.abandonable:
            self.ctx.abandonable = False
            raise Interrupted("shutting_down")

    # --- the loop ----------------------------------------------------------------------------

    def run(self) -> None:
        recovery.load_facts(self.ctx)
        self._project()
        task_runner.start_up(self.cfg)  # (before ready: start's answer means start-up maintenance is done)
        (self.cfg.run_dir / f"ready-{os.getpid()}").write_text(str(os.getpid()))
        failing = False
        while not self.stop:
            try:
                if self.step():
                    continue
                if waits.poll_due(self.cfg, self.ctx.db):  # reconciliation of a wait with no notification yet
                    continue
                due = [t for t in (self._next_retry_in(), waits.next_poll_in(self.ctx.db)) if t is not None]
                timeout = min(due) if due else None
                if failing:
                    (self.cfg.path / "recovery_failed.json").unlink(missing_ok=True)
                    failing = False
            except sqlite3.Error as exc:  # storage went away under us: say so, keep nothing in memory, retry
                log.error("storage unavailable: %s", exc)
                record_recovery_failure(self.cfg.path, "recovery_failed_storage_unavailable", str(exc))
                failing, timeout = True, STORAGE_RETRY_S
            ready, _, _ = select.select([self.wake, self.sig_r], [], [], timeout)
            for sock in ready:
                try:
                    while sock.recv(64):
                        pass
                except (BlockingIOError, InterruptedError):
                    pass
        self.close()

    def close(self) -> None:
        for path in (self.wake_path, self.cfg.run_dir / f"ready-{os.getpid()}"):
            path.unlink(missing_ok=True)

    def _next_retry_in(self) -> float | None:
        row = one(self.ctx.db, "SELECT MIN(retry_at) AS t FROM work_items WHERE desired_state='run' AND"
                               " status='waiting' AND reason_code='retry_scheduled'")
        tasks_due = task_runner.next_due_in(self.cfg)
        if row is None or row["t"] is None:
            return tasks_due
        mine = max(0.0, row["t"] - now()) + 0.01
        return mine if tasks_due is None else min(mine, tasks_due)

    def candidates(self) -> list[dict]:
        """Runnable items, least recently served session first (fair across sessions)."""
        items = rows(self.ctx.db,
                     "SELECT w.* FROM work_items w JOIN sessions s USING (session_id) WHERE w.desired_state='run'"
                     " AND (w.status IN ('queued','running') OR (w.status='waiting' AND"
                     " ((w.reason_code='retry_scheduled' AND w.retry_at <= ?) OR w.reason_code='owner_on_other_host')))"
                     " ORDER BY s.last_served_at, w.created_at", (now(),))
        busy_sessions: set[str] = set()
        out = []
        for item in sorted(items, key=lambda i: i["created_at"]):
            # one request at a time per session, in order; a Job and each of its subtasks run on their own
            lane = item["work_id"] if item["kind"] == "job" else item["session_id"]
            if lane in busy_sessions:
                continue
            busy_sessions.add(lane)
            out.append(item)
        order = {i["work_id"]: n for n, i in enumerate(items)}
        return sorted(out, key=lambda i: order[i["work_id"]])

    def step(self) -> bool:
        """Claim one runnable item and run it; False when there was nothing to claim."""
        if task_runner.step(self.cfg, self.ctx.me):  # Paperclip task runs (profile paperclip_retry)
            return True
        jobs.wake(self.ctx.db)  # a Job with a child's result to take or a free slot for a subtask (profile jobs)
        for item in self.candidates():
            if self.stop:
                return False
            gen = recovery.claim(self.ctx, item["work_id"])
            if gen is None:
                continue
            self.run_item(item["work_id"], gen)
            self._wake_others()
            return True
        return False

    def run_item(self, work_id: str, gen: int) -> None:
        ctx = self.ctx
        try:
            item = one(ctx.db, "SELECT * FROM work_items WHERE work_id=?", (work_id,))
            turn = recovery.active_turn(ctx, work_id)
            recovering = turn is not None
            if recovering:
                failpoint("recovery.claim.after", work_id)
                recovery.settle_turn(ctx, item, gen, turn)
                if not recovery.is_safe_checkpoint(ctx, turn):
                    recovery.repair(ctx, item, gen, turn, "interrupted")
                    turn = None
                elif turn["control_version"] != item["control_version"]:
                    # a control (Pause, stop all) reached the item after this turn was admitted and its owner died
                    # before ending it: the checkpoint is of an old version, which cannot continue; the Resume's
                    # continuation is a new turn under the current version and its own key (REC-15)
                    recovery.repair(ctx, item, gen, turn, "superseded_by_control")
                    turn = None
                failpoint("recovery.repair.after", work_id)
            if recovery.decide(ctx, item, gen, recovering) is not None:
                return
            if recovering:
                failpoint("recovery.decide.after", work_id)
            item = one(ctx.db, "SELECT * FROM work_items WHERE work_id=?", (work_id,))
            if item["kind"] == "goal":  # the same claim and recovery; the Goal's own turns and acceptance
                goals.run(ctx, item, gen, turn, recovering, self._project)
                return
            if turn is None and item["kind"] == "job" and jobs.is_job(ctx.db, work_id) \
                    and jobs.advance(ctx, item, gen):
                return  # waiting for its subtasks; the lease is released
            if turn is None:
                turn = recovery.admit(ctx, item, gen, recovering)
            if turn["status"] != "active":  # never expected; a bounded retry, not a silent stall or a spin
                raise RuntimeError(f"continuation {turn['continuation_key']} was already used by a "
                                   f"{turn['status']} turn")
            self._drive(item, turn, gen)
        except Interrupted as exc:
            self._interrupted(work_id, gen, exc.reason)
        except Fenced as exc:
            log.warning("fenced: %s", exc)
        except Exception as exc:  # a defect or a broken resource: never a silent stall, never a crash loop
            log.exception("work item %s failed", work_id)
            try:
                internal_fault(ctx, work_id, gen, exc)
            except Exception:
                log.exception("could not record the fault of %s; recovery will find it", work_id)

    def _drive(self, item: dict, turn: dict, gen: int) -> None:
        ctx = self.ctx
        while True:
            turn = one(ctx.db, "SELECT * FROM turns WHERE turn_id=?", (turn["turn_id"],))
            pending = rows(ctx.db, "SELECT * FROM tool_calls WHERE turn_id=? AND status='never_started' AND"
                                   " blocked_reason IS NULL ORDER BY created_at", (turn["turn_id"],))
            if pending:
                run_call(ctx, item, gen, pending[0])
                continue
            if approvals.gate(ctx, item, turn, gen):  # a call waiting for its one-time approval, decided
                continue
            if waits.gate(ctx, item, turn, gen):  # an external operation's notification, admitted once
                continue
            if answered(ctx, item["work_id"]) or provider_step(ctx, item, turn, gen):
                finish(ctx, item, turn, gen)
                self._project()
                return

    def _interrupted(self, work_id: str, gen: int, reason: str) -> None:
        ctx = self.ctx
        if reason in ("provider_fault", "resource_held", "awaiting_approval", "waiting_dependency"):
            return  # schedule_retry or hold_for_resource already persisted the decision and released the lease
        try:
            if reason == "shutting_down":
                with fenced(ctx.db, work_id, gen, "graceful_stop"):
                    set_status(ctx.db, work_id, "queued", "shutting_down",
                               "the runtime stopped gracefully; this work continues when it starts again")
                    release(ctx, work_id, gen, "graceful_stop")
                return
            item = one(ctx.db, "SELECT * FROM work_items WHERE work_id=?", (work_id,))
            turn = recovery.active_turn(ctx, work_id)
            if turn is not None:  # paused, ended or stopped by the user: end the turn cleanly
                recovery.settle_turn(ctx, item, gen, turn)
                recovery.repair(ctx, item, gen, turn, item["reason_code"] or "user_control")
            with fenced(ctx.db, work_id, gen, "release"):
                release(ctx, work_id, gen, item["reason_code"] or "user_control")
        except Fenced as exc:
            log.warning("fenced: %s", exc)

    def _project(self) -> None:
        try:
            project(self.ctx.db)
        except ProjectionLost as exc:
            log.error("%s", exc)

    def _wake_others(self) -> None:
        wake_all(self.cfg.run_dir, exclude=self.wake_path)


def answered(ctx: Ctx, work_id: str) -> bool:
    """The request's answer is already committed (e.g. it arrived just after a Pause): finish, ask nothing."""
    last = one(ctx.db, "SELECT role, tool_calls FROM messages WHERE work_id=? AND"
                       " origin IN ('real', 'placeholder', 'refused') ORDER BY msg_seq DESC LIMIT 1", (work_id,))
    return last is not None and last["role"] == "assistant" and not last["tool_calls"]


def wake_all(run_dir: Path, exclude: Path | None = None) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        # Never block: a busy worker's queue may be full of earlier pokes, and one pending poke is enough.
        s.setblocking(False)
        for path in run_dir.glob("wake-*.sock"):
            if path == exclude:
                continue
            with contextlib.suppress(OSError):  # full queue (BlockingIOError) or a dead worker's socket file
                s.sendto(b"w", str(path))


def record_recovery_failure(data_dir: Path, reason_code: str, text: str) -> None:
    """Storage we cannot read or migrate: say so durably beside it, clear nothing."""
    state = {"reason_code": reason_code, "text": text, "actions": list(STORAGE_ACTIONS[reason_code]), "at": now()}
    (data_dir / "recovery_failed.json").write_text(json.dumps(state))


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"worker[{os.getpid()}] %(levelname)s %(message)s")
    cfg = Config.load(os.environ["RK_IMPL_DATA_DIR"])
    try:
        worker = Worker(cfg)
    except MigrationFailed as exc:
        record_recovery_failure(cfg.path, "recovery_failed_migration", str(exc))
        log.error("recovery failed: %s", exc)
        return 3
    except (StorageUnavailable, sqlite3.Error, OSError) as exc:
        record_recovery_failure(cfg.path, "recovery_failed_storage_unavailable", str(exc))
        log.error("recovery failed: %s", exc)
        return 3
    (cfg.path / "recovery_failed.json").unlink(missing_ok=True)
    worker.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
