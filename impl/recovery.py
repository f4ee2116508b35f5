"""Claiming work and recovering it: ownership, context repair, the decision, admission.

Every worker runs this on every work item it picks up, so recovery after a crash, a graceful stop
or a long downtime is the same code path as ordinary admission (seed 000: one idempotent entry
point, no independent recovery decisions). The steps, in the seed's order:

1. facts are loaded from the two databases (a failure is handled by the worker: recovery_failed);
2. ``claim``: the lease's owner is checked by host id + pid + process start time; a live owner is
   left alone, an owner on another host makes the item wait (never a silent takeover), a dead
   owner is replaced under generation + 1;
3. ``repair``: live tool children are waited for, real results committed; whatever has no result
   gets a placeholder under the stable repair key ``repair:<call_id>``; the old turn ends
   interrupted with a notice of which calls never started and which outcomes are unknown;
4. ``decide``: user stop, automatic-recovery policy, resources (directory, credentials, tool
   version), unknown effects (they restrict the next turn to read_only / state_probe tools);
5. ``admit``: a turn under continuation_key = work_id + control version + predecessor commit,
   UNIQUE in the database, so a repeated recovery admits once.
"""

from __future__ import annotations

import json

from . import reservations, resources, tools
from .approvals import close_turn
from .engine import Ctx, commit_result, drain_outbox, release
from .history import placeholder_text
from .store import emit, fenced, now, one, process_alive, rows, set_status, tx

HOLD_STATUSES = ("paused", "finished", "cancelled", "failed")
KNOWN_PAUSE_REASONS = ("user_paused", "user_stopped_all", "automatic_recovery_disabled", "paused_unknown_reason")


def load_facts(ctx: Ctx) -> None:
    """Step 1 on every worker start: converge the outbox, explain paused records we cannot explain.

    An old paused record whose reason this runtime does not know (e.g. a legacy paused_recoverable)
    stays paused: guessing that it was running could resume work the user stopped.
    """
    drain_outbox(ctx)
    paused = "SELECT work_id, reason_code FROM work_items WHERE desired_state='paused'"
    if all(item["reason_code"] in KNOWN_PAUSE_REASONS for item in rows(ctx.db, paused)):
        return  # a read answered it: no write lock, so a start never queues behind another worker's work
    with tx(ctx.db):
        for item in rows(ctx.db, paused):
            if item["reason_code"] not in KNOWN_PAUSE_REASONS:
                set_status(ctx.db, item["work_id"], "paused", "paused_unknown_reason",
                           f"paused for a reason this runtime does not know ({item['reason_code']!r}); it stays "
                           "paused rather than being guessed to have been running", ("Resume", "End"))


def claim(ctx: Ctx, work_id: str) -> int | None:
    """Take ownership under a new generation, or return None (someone else owns it, or it must wait)."""
    db = ctx.db
    if _owned_elsewhere(ctx, work_id):
        return None
    with tx(db):
        item = one(db, "SELECT * FROM work_items WHERE work_id=?", (work_id,))
        if item is None or item["desired_state"] != "run" or item["status"] in HOLD_STATUSES:
            return None
        due = item["reason_code"] == "retry_scheduled" and (item["retry_at"] or 0) <= now()
        if item["status"] == "waiting" and not due and item["reason_code"] != "owner_on_other_host":
            return None
        lease = one(db, "SELECT * FROM leases WHERE work_id=?", (work_id,))
        if lease and not lease["released"]:
            if lease["host_id"] != ctx.me.host_id:
                if item["reason_code"] != "owner_on_other_host":
                    set_status(db, work_id, "waiting", "owner_on_other_host",
                               f"work item is owned by host {lease['host_id']!r} (pid {lease['pid']}); this host "
                               f"is {ctx.me.host_id!r}. It will not be taken over silently.", ("End",))
                return None
            if process_alive(lease["pid"], lease["create_time"]):
                return None  # a live owner keeps it: reattached, not recovered
        running = [r for r in rows(db, "SELECT pid, create_time FROM leases WHERE released=0 AND work_id<>?",
                                   (work_id,)) if process_alive(r["pid"], r["create_time"])]
        if len(running) >= ctx.cfg.concurrency:
            return None
        gen = (lease["generation"] if lease else 0) + 1
        t = now()
        db.conn.execute(
            "INSERT INTO leases VALUES (?,?,?,?,?,?,?,?,0) ON CONFLICT(work_id) DO UPDATE SET host_id=excluded.host_id,"
            " pid=excluded.pid, create_time=excluded.create_time, generation=excluded.generation,"
            " acquired_at=excluded.acquired_at, expires_at=excluded.expires_at, heartbeat_at=excluded.heartbeat_at,"
            " released=0", (work_id, ctx.me.host_id, ctx.me.pid, ctx.me.create_time, gen, t, t + 3600, t))
        if lease and not lease["released"]:
            db.conn.execute("UPDATE owner_attempts SET ended_at=?, outcome='owner_dead' WHERE work_id=? AND"
                            " generation=? AND ended_at IS NULL", (t, work_id, lease["generation"]))
        db.conn.execute("INSERT INTO owner_attempts (work_id, generation, host_id, pid, create_time, claimed_at)"
                        " VALUES (?,?,?,?,?,?)", (work_id, gen, ctx.me.host_id, ctx.me.pid, ctx.me.create_time, t))
        db.conn.execute("UPDATE sessions SET last_served_at=? WHERE session_id=?", (t, item["session_id"]))
        emit(db, work_id, "claimed", generation=gen, pid=ctx.me.pid, previous=lease["generation"] if lease else None)
        set_status(db, work_id, "running", "running", retry_at=None)
    return gen


def _owned_elsewhere(ctx: Ctx, work_id: str) -> bool:
    """A live process on this host holds the lease: a read says so without the write lock.

    Every worker is woken by every submit and tries to claim the same item; the losers used to queue for
    the write lock only to find the item taken, and the winner's next commit could meet their lock and
    sleep in SQLite's busy handler. ``claim`` re-checks everything under the lock; this only skips it."""
    lease = one(ctx.db, "SELECT host_id, pid, create_time, released FROM leases WHERE work_id=?", (work_id,))
    return (lease is not None and not lease["released"] and lease["host_id"] == ctx.me.host_id
            and process_alive(lease["pid"], lease["create_time"]))


def active_turn(ctx: Ctx, work_id: str) -> dict | None:
    return one(ctx.db, "SELECT * FROM turns WHERE work_id=? AND status='active' ORDER BY seq_no DESC LIMIT 1",
               (work_id,))


def settle_turn(ctx: Ctx, item: dict, gen: int, turn: dict) -> None:
    """Bring every call and request of an interrupted turn to a known state, real results first."""
    work_id = item["work_id"]
    lost = [r for r in rows(ctx.db, "SELECT request_id FROM provider_requests WHERE turn_id=? AND status='dispatched'",
                            (turn["turn_id"],))
            if not reservations.is_unsent(ctx.udb, r["request_id"])]  # never sent: provider_step sends it or not
    if lost:
        with fenced(ctx.db, work_id, gen, "recovery.requests_lost"):
            for r in lost:
                ctx.db.conn.execute("UPDATE provider_requests SET status='lost' WHERE request_id=?", (r["request_id"],))
                ctx.db.conn.execute("INSERT OR IGNORE INTO outbox VALUES (?,?,?,'pending',?,NULL)",
                                    (f"usage.lost:{r['request_id']}", "usage.lost",
                                     json.dumps({"request_id": r["request_id"]}), now()))
                emit(ctx.db, work_id, "provider_response_lost", request_id=r["request_id"])
    drain_outbox(ctx)
    for call in rows(ctx.db, "SELECT * FROM tool_calls WHERE turn_id=? AND status IN ('never_started','dispatched')"
                     " AND blocked_reason IS NULL ORDER BY created_at", (turn["turn_id"],)):
        if tools.result(ctx.data, call["call_id"]) is None:
            proc = tools.live_shim(ctx.data, call["call_id"], call["pid"], call["create_time"])
            if proc is not None:
                _reattached(ctx, work_id, gen, call, proc.pid)
                tools.wait_live(ctx.data, call["call_id"], proc)  # reconnect and wait; never start it again
            elif call["status"] == "never_started" and not tools.started(ctx.data, call["call_id"]):
                continue  # certainly never started: the repair says so
        commit_result(ctx, item, gen, call)  # the real result if on disk, else outcome unknown


def _reattached(ctx: Ctx, work_id: str, gen: int, call: dict, pid: int) -> None:
    with fenced(ctx.db, work_id, gen, "recovery.reattach"):
        ctime = tools.create_time(pid)
        ctx.db.conn.execute("UPDATE tool_calls SET status='dispatched', pid=?, create_time=?, updated_at=?"
                            " WHERE call_id=?", (pid, ctime, now(), call["call_id"]))
        emit(ctx.db, work_id, "tool_reattached", call_id=call["call_id"], pid=pid)


def is_safe_checkpoint(ctx: Ctx, turn: dict) -> bool:
    """A turn can simply continue when every call it made has a real result (or was refused)."""
    bad = one(ctx.db, "SELECT COUNT(*) AS n FROM tool_calls WHERE turn_id=? AND blocked_reason IS NULL AND"
                      " status <> 'result_committed'", (turn["turn_id"],))
    return bad["n"] == 0


def repair(ctx: Ctx, item: dict, gen: int, turn: dict, reason: str) -> None:
    """Placeholders for missing results, a notice for the next turn, the old turn ends interrupted.

    Idempotent: every inserted message carries a UNIQUE repair key, so repeating it changes nothing.
    """
    work_id, turn_id = item["work_id"], turn["turn_id"]
    calls = rows(ctx.db, "SELECT * FROM tool_calls WHERE turn_id=? AND blocked_reason IS NULL AND"
                         " status IN ('never_started','outcome_unknown') ORDER BY created_at", (turn_id,))
    with fenced(ctx.db, work_id, gen, "recovery.repair"):
        t = now()
        for c in calls:
            key = f"repair:{c['call_id']}"
            ctx.db.conn.execute(
                "INSERT OR IGNORE INTO messages (work_id, session_id, turn_id, role, content, tool_call_id, origin,"
                " repair_key, at) VALUES (?,?,?,'tool',?,?,'placeholder',?,?)",
                (work_id, item["session_id"], turn_id, placeholder_text(c["status"], c["tool_name"]),
                 c["provider_call_id"], key, t))
            ctx.db.conn.execute("UPDATE tool_calls SET repair_key=? WHERE call_id=?", (key, c["call_id"]))
        never = [c["tool_name"] + " (" + c["provider_call_id"] + ")" for c in calls if c["status"] == "never_started"]
        unknown = [c["tool_name"] + " (" + c["provider_call_id"] + ")" for c in calls if c["status"] != "never_started"]
        if never or unknown:
            notice = ("[recovery] The previous turn was interrupted. "
                      f"Calls that never started: {', '.join(never) or 'none'}. "
                      f"Calls whose outcome is unknown: {', '.join(unknown) or 'none'}. "
                      "Do not repeat a call whose outcome is unknown; investigate with read-only tools.")
            ctx.db.conn.execute(
                "INSERT OR IGNORE INTO messages (work_id, session_id, turn_id, role, content, origin, repair_key, at)"
                " VALUES (?,?,?,'system',?,'recovery_notice',?,?)",
                (work_id, item["session_id"], turn_id, notice, f"notice:{turn_id}", t))
        close_turn(ctx.db, item, turn_id)  # calls still waiting for approval: answered, approvals invalidated
        ctx.db.conn.execute("UPDATE turns SET status='interrupted', ended_at=?, end_reason=? WHERE turn_id=?"
                            " AND status='active'", (t, reason, turn_id))
        emit(ctx.db, work_id, "turn_interrupted", turn_id=turn_id, reason=reason, session_id=item["session_id"],
             never_started=len(never), outcome_unknown=len(unknown))


def unresolved_unknown(ctx: Ctx, work_id: str) -> bool:
    row = one(ctx.db, "SELECT COUNT(*) AS n FROM tool_calls WHERE work_id=? AND status='outcome_unknown' AND"
                      " effect_class='unknown'", (work_id,))
    return row["n"] > 0


def decide(ctx: Ctx, item: dict, gen: int, recovering: bool) -> str | None:
    """Persist the decision; return None when the work may run, else the reason it waits."""
    work_id = item["work_id"]
    hold: tuple[str, str, str, tuple[str, ...]] | None = None
    disabled = item["recovery_policy"] == "disabled" or not ctx.cfg.automatic_recovery
    if recovering and disabled and item["resumed_cv"] != item["control_version"]:
        hold = ("paused", "automatic_recovery_disabled",
                "automatic recovery is disabled for this work; it was interrupted and waits for Resume or End",
                ("Resume", "End"))
    elif (lacking := resources.missing(ctx.db, ctx.cfg, item)) is not None:
        hold = ("waiting", *lacking, ("Retry", "Pause", "End"))
    else:
        registry = ctx.cfg.registry()
        for c in rows(ctx.db, "SELECT DISTINCT tool_name, impl_identity FROM tool_calls WHERE work_id=? AND"
                              " status IN ('dispatched','outcome_unknown')", (work_id,)):
            spec = registry.get(c["tool_name"])
            # the user's Resume accepted the tool as it is now (resources.accept_tools): the old call keeps the
            # class and identity it ran under, and the new turn its restrictions, but the work may go on
            if spec is None or (json.loads(c["impl_identity"]) != spec.identity()
                                and resources.accepted_identity(ctx.db, work_id, c["tool_name"]) != spec.identity()):
                hold = ("waiting", "resource_tool_version_changed",
                        f"tool {c['tool_name']} changed since its unreconciled call was made "
                        f"(was {c['impl_identity']})", ("Retry", "Pause", "End"))
                break
    with fenced(ctx.db, work_id, gen, "recovery.decide"):
        current = one(ctx.db, "SELECT desired_state FROM work_items WHERE work_id=?", (work_id,))
        if current["desired_state"] != "run":
            hold = ("keep", "", "", ())  # a control arrived meanwhile; its status stands
        elif hold is not None:
            status, reason, text, actions = hold
            if reason != "automatic_recovery_disabled":
                ctx.db.conn.execute("INSERT OR REPLACE INTO pending_recovery VALUES (?,?,?,?,?)",
                                    (work_id, reason, text, json.dumps(list(actions)), now()))
            set_status(ctx.db, work_id, status, reason, text, actions)
        emit(ctx.db, work_id, "recovery_decision", recovering=recovering,
             decision="run" if hold is None else hold[1] or "control")
        if hold is not None:
            release(ctx, work_id, gen, "held")
    return None if hold is None else (hold[1] or "control")


def admit(ctx: Ctx, item: dict, gen: int, recovery: bool) -> dict:
    """Admit the next turn once: continuation_key is UNIQUE, so a repeat finds the same turn."""
    work_id = item["work_id"]
    last = one(ctx.db, "SELECT MAX(msg_seq) AS m FROM messages WHERE work_id=?", (work_id,))["m"]
    prev = one(ctx.db, "SELECT turn_id, seq_no FROM turns WHERE work_id=? ORDER BY seq_no DESC LIMIT 1", (work_id,))
    key = f"{work_id}|v{item['control_version']}|{f'm{last}' if last else 'start'}"
    restricted = 1 if unresolved_unknown(ctx, work_id) else 0
    with fenced(ctx.db, work_id, gen, "admit"):
        seq = (prev["seq_no"] if prev else 0) + 1
        cur = ctx.db.conn.execute(
            "INSERT OR IGNORE INTO turns (turn_id, work_id, seq_no, continuation_key, predecessor, control_version,"
            " status, recovery, restricted, generation, started_at) VALUES (?,?,?,?,?,?,'active',?,?,?,?)",
            (f"{work_id}.t{seq}", work_id, seq, key, prev["turn_id"] if prev else None, item["control_version"],
             int(recovery), restricted, gen, now()))
        if cur.rowcount:
            emit(ctx.db, work_id, "turn_admitted", turn_id=f"{work_id}.t{seq}", continuation_key=key,
                 restricted=restricted)
    return one(ctx.db, "SELECT * FROM turns WHERE continuation_key=?", (key,))
