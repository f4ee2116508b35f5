"""Goals on the chat execution layer: the objective, its requirements and Todo, states, phases and budgets.

A Goal is a work item of kind ``goal`` run by the same workers, claims, recovery and turns as a chat
request; this module adds only what a Goal adds (seed 000, "Todo and acceptance", "Usage, cost and budget"):

- ``create`` / ``update`` / ``budget_set`` are short state operations of the control process: they read and
  write the objective, its revision and its budget, nothing else. A revision invalidates earlier acceptance
  (its rows are marked invalid) and the continuation key of the next turn (it binds goal_id + revision).
- ``run`` drives a claimed Goal: a work turn ends with settlement (the turn, the Todo it changed and the
  decision in one transaction), then continue, pause (budget) or verify; blocked only when the same blocker
  recurs in consecutive turns and no independent Todo work is left. There is no round cap.
- Budgets are unlimited unless set. Under a hard budget every paid request is admitted only through
  ``budget_gate``: an unknown-usage receipt since the last budget change, or any cost limit (the runtime has
  no price list, so a cost is never known), pauses paid admission with ``budget_unknown_cost``; spent tokens at
  or over the limit make the Goal ``budget_exhausted``, which only ``budget_set`` leaves. Each paid attempt
  under a hard token budget holds a reservation (``reservations``); one that ended unstarted proves its attempt
  was never sent, so its receipt is no unknown spend.

The worker's Goal actions arrive as directives in its answer text (the reference runtime's Goal tools):
``[[goal:todo ID]]`` (required; ``[[goal:todo ID optional]]``), ``[[goal:done ID]]``, ``[[goal:drop ID]]``,
``[[goal:candidate]]``, ``[[goal:blocker KEY]]`` (optionally ``on=ID``: that Todo item waits on it).
Requirements are extracted from the objective's ``[[req:ID]]`` markers (none: the objective is one requirement).
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Callable

from . import acceptance, goal_timer, waits
from .db import Database
from .engine import Ctx, Interrupted, check_intent, provider_step, release, run_call
from .failpoints import failpoint
from .store import emit, fenced, now, one, rows, set_status, tx

REQ_RE = re.compile(r"\[\[req:([A-Za-z0-9_.\-]+)\]\]([^\[]*)")
DIRECTIVE_RE = re.compile(r"\[\[goal:([a-z_]+)(?:\s+([^\]]*))?\]\]")
CONTINUE_TEXT = "[goal] continue working on the objective (revision {revision}, prompt {n})"
TERMINAL = ("achieved", "cancelled")


class GoalError(Exception):
    def __init__(self, code: str, text: str):
        super().__init__(text)
        self.code, self.text = code, text


def requirements_of(objective: str) -> list[tuple[str, str]]:
    found = [(m.group(1), m.group(2).strip()) for m in REQ_RE.finditer(objective)]
    return found or [("objective", objective.strip())]


# --- the control process's operations -------------------------------------------------------------


def create(db: Database, cfg, session_id: str, objective: str, budget: dict | None) -> dict:
    t = now()
    goal_id, work_id = f"g-{uuid.uuid4().hex[:12]}", f"w-{uuid.uuid4().hex[:12]}"
    budget = budget or {}
    with tx(db):
        db.conn.execute("INSERT OR IGNORE INTO sessions (session_id, created_at) VALUES (?,?)", (session_id, t))
        db.conn.execute(
            "INSERT INTO work_items (work_id, session_id, kind, desired_state, status, reason_code, host_id,"
            " recovery_policy, created_at, updated_at) VALUES (?,?,'goal','run','queued','queued',?,?,?,?)",
            (work_id, session_id, cfg.host_id, "automatic" if cfg.automatic_recovery else "disabled", t, t))
        db.conn.execute(
            "INSERT INTO goals (goal_id, work_id, session_id, objective, revision, state, phase, max_tokens,"
            " max_cost_usd, budget_at, created_at, updated_at) VALUES (?,?,?,?,1,'active','working',?,?,?,?,?)",
            (goal_id, work_id, session_id, objective, budget.get("max_tokens"), budget.get("max_cost_usd"), t, t, t))
        db.conn.execute("UPDATE goals SET max_active_s=? WHERE goal_id=?", (budget.get("max_active_s"), goal_id))
        for req_id, text in requirements_of(objective):
            db.conn.execute("INSERT INTO goal_requirements VALUES (?,?,?,1,NULL)", (goal_id, req_id, text))
        db.conn.execute("INSERT INTO messages (work_id, session_id, role, content, at) VALUES (?,?,'user',?,?)",
                        (work_id, session_id, objective, t))
        emit(db, work_id, "goal_created", goal_id=goal_id, session_id=session_id)
    return {"goal_id": goal_id, "work_id": work_id, "revision": 1}


def update(db: Database, goal_id: str, revision: int, objective: str, reason: str | None) -> dict:
    """A new revision: old acceptance is invalid, verifying goes back to work, no requirement is dropped
    unless the revision says why (a human waiver)."""
    with tx(db):
        g = one(db, "SELECT * FROM goals WHERE goal_id=?", (goal_id,))
        if g is None:
            raise GoalError("unknown_work_item", f"no Goal {goal_id!r}")
        if g["revision"] != revision:
            raise GoalError("precondition_failed", f"Goal {goal_id} is at revision {g['revision']}, not {revision}")
        if g["state"] in TERMINAL:
            raise GoalError("precondition_failed", f"Goal {goal_id} is {g['state']}")
        new = revision + 1
        kept = {r["req_id"] for r in rows(db, "SELECT req_id FROM goal_requirements WHERE goal_id=?", (goal_id,))}
        for req_id, text in requirements_of(objective):
            if req_id not in kept:
                db.conn.execute("INSERT INTO goal_requirements VALUES (?,?,?,?,NULL)", (goal_id, req_id, text, new))
        if reason:  # an explicit waiver: requirements the revision leaves out are waived with its reason
            named = {r for r, _ in requirements_of(objective)}
            db.conn.execute(f"UPDATE goal_requirements SET waived_reason=? WHERE goal_id=? AND req_id NOT IN "
                            f"({','.join('?' * len(named))})", (reason, goal_id, *named))
        db.conn.execute("UPDATE goal_acceptances SET valid=0 WHERE goal_id=?", (goal_id,))
        phase = "working" if g["phase"] == "verifying" else g["phase"]
        db.conn.execute("UPDATE goals SET objective=?, revision=?, goal_version=goal_version+1, phase=?,"
                        " acceptance_id=NULL, blocker_streak=0, last_blocker=NULL, updated_at=? WHERE goal_id=?",
                        (objective, new, phase, now(), goal_id))
        db.conn.execute("UPDATE work_items SET objective_revision=? WHERE work_id=?", (new, g["work_id"]))
        db.conn.execute("INSERT INTO messages (work_id, session_id, role, content, at) VALUES (?,?,'user',?,?)",
                        (g["work_id"], g["session_id"], f"[goal revision {new}] {objective}", now()))
        emit(db, g["work_id"], "goal_revised", goal_id=goal_id, revision=new, reason=reason)
    return {"goal_id": goal_id, "revision": new}


def budget_set(db: Database, work_id: str, limit: dict) -> dict:
    """The only way out of budget_exhausted and of a pause for unknown cost: the worker's gate rechecks."""
    with tx(db):
        g = one(db, "SELECT * FROM goals WHERE work_id=?", (work_id,))
        if g is None:
            raise GoalError("unknown_work_item", f"no Goal with work item {work_id!r}")
        db.conn.execute("UPDATE goals SET max_tokens=?, max_cost_usd=?, budget_at=?, goal_version=goal_version+1,"
                        " updated_at=? WHERE goal_id=?",
                        (limit.get("max_tokens"), limit.get("max_cost_usd"), now(), now(), g["goal_id"]))
        db.conn.execute("UPDATE goals SET max_active_s=? WHERE goal_id=?", (limit.get("max_active_s"), g["goal_id"]))
        if g["state"] in ("budget_exhausted", "paused") and g["reason_code"] in ("budget_exhausted",
                                                                               "budget_unknown_cost"):
            db.conn.execute("UPDATE goals SET state='active', reason_code=NULL, reason_text='' WHERE goal_id=?",
                            (g["goal_id"],))
            item = one(db, "SELECT desired_state FROM work_items WHERE work_id=?", (work_id,))
            if item["desired_state"] == "run":
                set_status(db, work_id, "queued", "queued", "the budget changed")
        emit(db, work_id, "goal_budget_set", goal_id=g["goal_id"], limit=limit)
    return {"work_id": work_id}


def check_control(db: Database, item: dict, op: str) -> None:
    """Inside the control's transaction: a Goal's own rules for Pause / Resume / End."""
    g = one(db, "SELECT * FROM goals WHERE work_id=?", (item["work_id"],))
    if g is None:
        return
    if op == "resume" and g["state"] == "budget_exhausted":
        raise GoalError("precondition_failed", "a Goal whose budget is exhausted continues only after a budget change")
    if op == "resume" and g["state"] == "achieved":
        raise GoalError("precondition_failed", "an achieved Goal is not reopened; create a new Goal")
    if op == "resume" and g["state"] == "blocked":
        db.conn.execute("UPDATE goals SET state='active', blocker_streak=0, last_blocker=NULL, reason_code=NULL,"
                        " reason_text='' WHERE goal_id=?", (g["goal_id"],))
    if op in ("pause", "end"):  # active time excludes the pause from the moment it is accepted
        goal_timer.stop(db, item["work_id"], op)
    db.conn.execute("UPDATE goals SET goal_version=goal_version+1, updated_at=? WHERE goal_id=?", (now(), g["goal_id"]))


# --- the worker's side ----------------------------------------------------------------------------


def goal_of(ctx: Ctx, work_id: str) -> dict:
    return one(ctx.db, "SELECT * FROM goals WHERE work_id=?", (work_id,))


def admit(ctx: Ctx, item: dict, gen: int, recovery: bool) -> dict:
    """The next turn once: its continuation key binds goal_id, revision, control version and the last commit."""
    g, work_id = goal_of(ctx, item["work_id"]), item["work_id"]
    last = one(ctx.db, "SELECT MAX(msg_seq) AS m FROM messages WHERE work_id=?", (work_id,))["m"]
    prev = one(ctx.db, "SELECT turn_id, seq_no FROM turns WHERE work_id=? ORDER BY seq_no DESC LIMIT 1", (work_id,))
    # a turn the budget gate interrupted before its answer left no message behind: the continuation after the
    # budget change is a new turn, so the key also counts the Goal's interrupted turns
    cut = one(ctx.db, "SELECT COUNT(*) AS n FROM turns WHERE work_id=? AND status='interrupted'", (work_id,))["n"]
    key = f"{work_id}|{g['goal_id']}|r{g['revision']}|v{item['control_version']}|m{last}|i{cut}"
    with fenced(ctx.db, work_id, gen, "goal.admit"):
        seq = (prev["seq_no"] if prev else 0) + 1
        cur = ctx.db.conn.execute(
            "INSERT OR IGNORE INTO turns (turn_id, work_id, seq_no, continuation_key, predecessor, control_version,"
            " status, recovery, restricted, generation, started_at) VALUES (?,?,?,?,?,?,'active',?,0,?,?)",
            (f"{work_id}.t{seq}", work_id, seq, key, prev["turn_id"] if prev else None, item["control_version"],
             int(recovery), gen, now()))
        if cur.rowcount:
            emit(ctx.db, work_id, "turn_admitted", turn_id=f"{work_id}.t{seq}", continuation_key=key)
    return one(ctx.db, "SELECT * FROM turns WHERE continuation_key=?", (key,))


def budget_gate(ctx: Ctx, item: dict, gen: int, turn: dict | None) -> bool:
    """True if a paid request may be admitted now; else the Goal is paused or exhausted, durably, with a reason."""
    g = goal_of(ctx, item["work_id"])
    if g["max_tokens"] is None and g["max_cost_usd"] is None and g["max_active_s"] is None:
        return True  # unlimited by default
    # an attempt whose reservation is or ended unstarted was never sent (impl/reservations.py): no unknown spend
    receipts = rows(ctx.udb, "SELECT state, total_tokens, created_at FROM receipts WHERE work_id=? AND request_id"
                             " NOT IN (SELECT request_id FROM reservations WHERE state IN ('reserved','expired',"
                             "'released'))", (item["work_id"],))
    spent = sum(r["total_tokens"] or 0 for r in receipts if r["state"] in ("known", "partial"))
    unknown = [r for r in receipts if r["state"] in ("unknown", "dispatched", "partial")
               and r["created_at"] >= g["budget_at"]]
    active = active_time(ctx, item["work_id"]) if g["max_active_s"] is not None else None
    if g["max_cost_usd"] is not None or (unknown and g["max_tokens"] is not None):
        state, reason = "paused", "budget_unknown_cost"
        text = ("the cost of a request is unknown under a hard budget; it is not counted as available balance: "
                "change the budget to go on")
    elif g["max_tokens"] is not None and spent >= g["max_tokens"]:
        state, reason, text = "budget_exhausted", "budget_exhausted", f"{spent} of {g['max_tokens']} tokens spent"
    elif active is not None and active >= g["max_active_s"]:  # the time limit, verified on the durable records
        state, reason = "budget_exhausted", "budget_exhausted"
        text = f"{active:.3f} s of its {g['max_active_s']} s of active time spent"
    else:
        return True
    with fenced(ctx.db, item["work_id"], gen, "goal.budget"):
        ctx.db.conn.execute("UPDATE goals SET state=?, reason_code=?, reason_text=?, updated_at=? WHERE goal_id=?",
                            (state, reason, text, now(), g["goal_id"]))
        goal_timer.stop(ctx.db, item["work_id"], reason)
        if turn is not None:
            ctx.db.conn.execute("UPDATE turns SET status='interrupted', ended_at=?, end_reason=? WHERE turn_id=?"
                                " AND status='active'", (now(), reason, turn["turn_id"]))
        set_status(ctx.db, item["work_id"], "waiting", reason, text, ("End",))
        release(ctx, item["work_id"], gen, reason)
    return False


def active_time(ctx: Ctx, work_id: str) -> float:
    """The Goal's active time so far, from its durable timer records (``goal_timer``)."""
    return goal_timer.fold(rows(ctx.db, "SELECT work_id, kind, at, payload FROM events WHERE work_id=? AND kind IN"
                                        " (?,?,?) ORDER BY seq",
                                (work_id, goal_timer.START, goal_timer.SEEN, goal_timer.STOP))).get(work_id, 0.0)


def _turn_answered(ctx: Ctx, turn: dict) -> dict | None:
    last = one(ctx.db, "SELECT * FROM messages WHERE turn_id=? AND origin IN ('real','placeholder','refused')"
                       " ORDER BY msg_seq DESC LIMIT 1", (turn["turn_id"],))
    return last if last is not None and last["role"] == "assistant" and not last["tool_calls"] else None


def run(ctx: Ctx, item: dict, gen: int, turn: dict | None, recovering: bool, project: Callable[[], None]) -> None:
    """Drive a claimed Goal until it must stop: achieved, blocked, paused for its budget, or a control; its active
    time runs from here to the stop (``goal_timer``)."""
    work_id = item["work_id"]
    with fenced(ctx.db, work_id, gen, "goal.timer"):
        goal_timer.begin(ctx.db, work_id)
    try:
        _drive(ctx, item, gen, turn, recovering, project)
    finally:
        with contextlib.suppress(Exception), tx(ctx.db):  # a vanished executor's interval ends at its last mark
            goal_timer.stop(ctx.db, work_id, "released")


def _heartbeat(ctx: Ctx, work_id: str) -> None:
    with tx(ctx.db):
        goal_timer.seen(ctx.db, work_id)


def _drive(ctx: Ctx, item: dict, gen: int, turn: dict | None, recovering: bool, project: Callable[[], None]) -> None:
    work_id = item["work_id"]
    while True:
        item = check_intent(ctx, work_id)
        g = goal_of(ctx, work_id)
        if g["state"] != "active":  # nothing to run: give the claim back
            with fenced(ctx.db, work_id, gen, "goal.inactive"):
                set_status(ctx.db, work_id, "waiting", g["reason_code"] or "waiting_dependency",
                           f"the Goal is {g['state']}", ("End",))
                goal_timer.stop(ctx.db, work_id, g["state"])
                release(ctx, work_id, gen, g["state"])
            return
        if g["phase"] == "verifying":
            if turn is not None:  # the work turn admitted before it was known that acceptance comes first
                with fenced(ctx.db, work_id, gen, "goal.turn_skip"):
                    ctx.db.conn.execute("UPDATE turns SET status='completed', ended_at=?, end_reason='verifying'"
                                        " WHERE turn_id=? AND status='active'", (now(), turn["turn_id"]))
                turn = None
            if not budget_gate(ctx, item, gen, None):  # budgets are rechecked before acceptance
                return
            if acceptance.run(ctx, item, gen, g) == "achieved":
                project()
                return
            _heartbeat(ctx, work_id)
            continue
        if turn is None:
            if not budget_gate(ctx, item, gen, None):
                return
            turn = admit(ctx, item, gen, recovering)
        while _turn_answered(ctx, turn) is None:
            pending = rows(ctx.db, "SELECT * FROM tool_calls WHERE turn_id=? AND status='never_started' AND"
                                   " blocked_reason IS NULL ORDER BY created_at", (turn["turn_id"],))
            if pending:
                run_call(ctx, item, gen, pending[0])
                continue
            if waits.gate(ctx, item, turn, gen):  # a live wait: no model turn until its notification is admitted
                continue
            if not budget_gate(ctx, item, gen, turn):
                return
            provider_step(ctx, item, turn, gen)
            _heartbeat(ctx, work_id)
        decision = settle(ctx, item, gen, turn)
        _heartbeat(ctx, work_id)
        turn = None
        if decision == "verify_todo":
            failpoint("todo.complete.before_acceptance", work_id)
        elif decision == "blocked":
            return


def settle(ctx: Ctx, item: dict, gen: int, turn: dict) -> str:
    """The turn's settlement, its Todo changes and the decision, in one transaction."""
    work_id = item["work_id"]
    g = goal_of(ctx, work_id)
    text = " ".join(m["content"] or "" for m in rows(
        ctx.db, "SELECT content FROM messages WHERE turn_id=? AND role='assistant' AND origin='real'",
        (turn["turn_id"],)))
    directives = [(m.group(1), (m.group(2) or "").split()) for m in DIRECTIVE_RE.finditer(text)]
    with fenced(ctx.db, work_id, gen, "goal.settle"):
        check_intent(ctx, work_id)
        gid = g["goal_id"]
        blocker, blocked_todo, candidate = None, None, False
        for name, args in directives:
            if name == "todo" and args:
                ctx.db.conn.execute("INSERT OR IGNORE INTO goal_todo (goal_id, todo_id, required) VALUES (?,?,?)",
                                    (gid, args[0], 0 if "optional" in args[1:] else 1))
            elif name == "done" and args:
                ctx.db.conn.execute("UPDATE goal_todo SET done=1, blocked_by=NULL WHERE goal_id=? AND todo_id=?",
                                    (gid, args[0]))
            elif name == "drop" and args:  # removes the Todo item only: requirements stay
                ctx.db.conn.execute("UPDATE goal_todo SET removed=1 WHERE goal_id=? AND todo_id=?", (gid, args[0]))
            elif name == "candidate":
                candidate = True
            elif name == "blocker" and args:
                blocker = args[0]
                blocked_todo = next((a[3:] for a in args[1:] if a.startswith("on=")), None)
        if blocked_todo:
            ctx.db.conn.execute("UPDATE goal_todo SET blocked_by=? WHERE goal_id=? AND todo_id=?",
                                (blocker, gid, blocked_todo))
        todo = rows(ctx.db, "SELECT * FROM goal_todo WHERE goal_id=? AND removed=0", (gid,))
        required = [t for t in todo if t["required"]]
        streak = (g["blocker_streak"] + 1 if blocker == g["last_blocker"] else 1) if blocker else 0
        independent = [t for t in todo if not t["done"] and not t["blocked_by"]]
        ctx.db.conn.execute("UPDATE turns SET status='completed', ended_at=?, end_reason='settled' WHERE turn_id=?",
                            (now(), turn["turn_id"]))
        if blocker and streak >= 2 and not independent:
            decision = "blocked"
            ctx.db.conn.execute(
                "UPDATE goals SET state='blocked', reason_code='waiting_dependency', reason_text=?, blocker_streak=?,"
                " last_blocker=?, updated_at=? WHERE goal_id=?",
                (f"blocked on {blocker}, which recurred in {streak} consecutive turns, with no independent work left",
                 streak, blocker, now(), gid))
            set_status(ctx.db, work_id, "waiting", "waiting_dependency", f"the Goal is blocked on {blocker}",
                       ("Resume", "End"))
            goal_timer.stop(ctx.db, work_id, "blocked")
            release(ctx, work_id, gen, "blocked")
        else:
            todo_done = bool(required) and all(t["done"] for t in required)
            decision = "verify_todo" if todo_done and not candidate else ("verify" if candidate else "continue")
            ctx.db.conn.execute("UPDATE goals SET phase=?, blocker_streak=?, last_blocker=?, updated_at=?"
                                " WHERE goal_id=?",
                                ("verifying" if decision != "continue" else "working", streak, blocker, now(), gid))
            if decision == "continue":
                continue_message(ctx, item, g["revision"])
        emit(ctx.db, work_id, "goal_turn_settled", goal_id=gid, turn_id=turn["turn_id"], decision=decision,
             directives=[n for n, _ in directives])
    return decision


def continue_message(ctx: Ctx, item: dict, revision: int) -> None:
    """Inside a transaction: the runtime's own prompt for the next work turn (no assessment text in it); numbered,
    so no two prompts of a Goal read the same."""
    n = one(ctx.db, "SELECT COUNT(*) AS n FROM messages WHERE work_id=? AND role='user'", (item["work_id"],))["n"]
    ctx.db.conn.execute("INSERT INTO messages (work_id, session_id, role, content, origin, at) VALUES"
                        " (?,?,'user',?,'real',?)",
                        (item["work_id"], item["session_id"], CONTINUE_TEXT.format(revision=revision, n=n), now()))


__all__ = ["GoalError", "Interrupted", "admit", "budget_gate", "budget_set", "check_control", "create", "run",
           "settle", "update"]
