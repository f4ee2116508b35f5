"""One-time approvals: the gate a non-safe tool call passes in the scope of an uncertain effect.

Seed 000's safety boundary: once a work item has an unknown-effect write, every operation other than a
trusted read needs a one-time approval that no bypass mode, allow rule or automatic classification can
waive. Here that is a durable row per tool call, bound to the call and to the unknown-effect set it was
asked under (the ids of the work item's calls whose outcome is unknown):

- ``request``: the call was recorded blocked ``awaiting_approval`` (``engine._record_call``); an approval
  row is written ``pending`` and the work item waits with reason ``awaiting_approval``, its lease given
  up; nothing runs, and a restart keeps it so (no worker claims a waiting item);
- ``decide`` (the control process, for the user's approve / deny): pending becomes approved or denied,
  once; the item becomes runnable again;
- ``gate`` (the worker, before the call may run): denied refuses the call (a tool message says so);
  approved is *consumed* in the same transaction that unblocks the call, so a crash after it leaves a
  call that either never started (recovery says so) or ran once, never a second run under the same
  approval; an approved row whose effect set is no longer the current one is invalidated and a fresh
  approval asked (the old effects stay recorded);
- ``close_turn``: a turn that ends before its calls were decided (interrupted, paused) answers them
  "not executed" and invalidates their approvals: an approval binds to the call, not to the work item.

When the recovery state cannot be read nothing here runs: the control process refuses the decision
before writing, and a worker does not run on a store it cannot read.
"""

from __future__ import annotations

import json
import uuid

from .config import AWAITING_APPROVAL
from .db import Database
from .engine import Ctx, Interrupted, release, run_call
from .failpoints import failpoint
from .store import emit, fenced, now, one, rows, set_status, tx

DENIED = "approval_denied"  # blocked_reason of a call the user denied
CLOSED = "approval_closed"  # blocked_reason of a call whose turn ended before it was decided
ACTIONS = ("Approve", "Deny", "Pause", "End")


class DecisionError(Exception):
    def __init__(self, code: str, text: str):
        super().__init__(text)
        self.code, self.text = code, text


def effect_set(db: Database, work_id: str) -> list[str]:
    """The work item's unknown-effect set now: its unknown-class calls whose outcome is unknown."""
    return [r["call_id"] for r in rows(db, "SELECT call_id FROM tool_calls WHERE work_id=? AND"
                                           " status='outcome_unknown' AND effect_class='unknown' ORDER BY call_id",
                                       (work_id,))]


def latest(db: Database, call_id: str) -> dict | None:
    return one(db, "SELECT * FROM approvals WHERE call_id=? ORDER BY created_at DESC, rowid DESC LIMIT 1",
               (call_id,))


def gate(ctx: Ctx, item: dict, turn: dict, gen: int) -> bool:
    """Decide the turn's first call awaiting approval; True if one was decided (run or refused), False if none
    awaits. Raises ``Interrupted("awaiting_approval")`` once the work waits for the user."""
    call = one(ctx.db, "SELECT * FROM tool_calls WHERE turn_id=? AND blocked_reason=? ORDER BY created_at",
               (turn["turn_id"], AWAITING_APPROVAL))
    if call is None:
        return False
    work_id = item["work_id"]
    approval = latest(ctx.db, call["call_id"])
    current = effect_set(ctx.db, work_id)
    if approval is not None and approval["status"] == "denied":
        _refuse(ctx, item, gen, call, DENIED, "the user denied the one-time approval this call needed")
        return True
    if approval is not None and approval["status"] == "approved" and json.loads(approval["effect_set"]) == current:
        consume(ctx, item, gen, call, approval)
        return True
    _hold(ctx, item, turn, gen, current)
    raise Interrupted(AWAITING_APPROVAL)


def consume(ctx: Ctx, item: dict, gen: int, call: dict, approval: dict) -> None:
    """Use the approval once: consumed and the call unblocked in one transaction, then the call runs."""
    work_id = item["work_id"]
    failpoint("approval.consume.before", work_id)
    with fenced(ctx.db, work_id, gen, "approval.consume"):
        cur = ctx.db.conn.execute("UPDATE approvals SET status='consumed', consumed_at=? WHERE approval_id=?"
                                  " AND status='approved'", (now(), approval["approval_id"]))
        if cur.rowcount != 1:
            raise RuntimeError(f"approval {approval['approval_id']} was not approved when consumed")
        ctx.db.conn.execute("UPDATE tool_calls SET blocked_reason=NULL, updated_at=? WHERE call_id=?",
                            (now(), call["call_id"]))
        emit(ctx.db, work_id, "approval_consumed", approval_id=approval["approval_id"], call_id=call["call_id"])
    failpoint("approval.consume.after", work_id)
    run_call(ctx, item, gen, dict(call, blocked_reason=None))


def _hold(ctx: Ctx, item: dict, turn: dict, gen: int, current: list[str]) -> None:
    """Ask (once per call and effect set) for every undecided call of the turn, then wait with the reason."""
    work_id = item["work_id"]
    with fenced(ctx.db, work_id, gen, "approval.request"):
        asked = []
        for call in rows(ctx.db, "SELECT * FROM tool_calls WHERE turn_id=? AND blocked_reason=? ORDER BY created_at",
                         (turn["turn_id"], AWAITING_APPROVAL)):
            approval = latest(ctx.db, call["call_id"])
            same_set = approval is not None and json.loads(approval["effect_set"]) == current
            if approval is not None and approval["status"] == "pending" and same_set:
                asked.append(approval["approval_id"])
                continue
            if approval is not None and approval["status"] in ("pending", "approved"):
                # bound to another unknown-effect set: that approval no longer covers the call (APR-03)
                ctx.db.conn.execute("UPDATE approvals SET status='invalidated', decided_at=? WHERE approval_id=?",
                                    (now(), approval["approval_id"]))
                emit(ctx.db, work_id, "approval_invalidated", approval_id=approval["approval_id"],
                     why="unknown-effect set changed")
            approval_id = f"ap-{uuid.uuid4().hex[:12]}"
            ctx.db.conn.execute(
                "INSERT INTO approvals (approval_id, work_id, call_id, provider_call_id, effect_set, status,"
                " created_at) VALUES (?,?,?,?,?,'pending',?)",
                (approval_id, work_id, call["call_id"], call["provider_call_id"], json.dumps(current), now()))
            emit(ctx.db, work_id, "approval_requested", approval_id=approval_id, call_id=call["call_id"],
                 effect_set=current)
            asked.append(approval_id)
        set_status(ctx.db, work_id, "waiting", AWAITING_APPROVAL,
                   f"waiting for the user to approve or deny {', '.join(asked)}: an earlier call's outcome is "
                   "unknown, so each further write needs a one-time approval", ACTIONS)
        release(ctx, work_id, gen, "held")


def _refuse(ctx: Ctx, item: dict, gen: int, call: dict, reason: str, why: str) -> None:
    with fenced(ctx.db, item["work_id"], gen, "approval.refuse"):
        _answer(ctx.db, item, call, reason, why)


def _answer(db: Database, item: dict, call: dict, reason: str, why: str) -> None:
    """Inside a transaction: the call is answered "not executed" once (its key is unique) and stays blocked."""
    db.conn.execute(
        "INSERT OR IGNORE INTO messages (work_id, session_id, turn_id, role, content, tool_call_id, origin,"
        " repair_key, at) VALUES (?,?,?,'tool',?,?,'refused',?,?)",
        (item["work_id"], item["session_id"], call["turn_id"], f"[runtime] not executed: {why}",
         call["provider_call_id"], f"approval:{call['call_id']}", now()))
    db.conn.execute("UPDATE tool_calls SET blocked_reason=?, updated_at=? WHERE call_id=?",
                    (reason, now(), call["call_id"]))


def close_turn(db: Database, item: dict, turn_id: str) -> None:
    """Inside the repair's transaction: calls still awaiting a decision are answered and their approvals
    invalidated (an approval binds to its call; the next turn's calls ask again)."""
    for call in rows(db, "SELECT * FROM tool_calls WHERE turn_id=? AND blocked_reason=?", (turn_id, AWAITING_APPROVAL)):
        db.conn.execute("UPDATE approvals SET status='invalidated', decided_at=? WHERE call_id=? AND"
                        " status IN ('pending','approved')", (now(), call["call_id"]))
        _answer(db, item, call, CLOSED, "the turn ended while this call was waiting for approval")


def decide(db: Database, approval_id: str, decision: str) -> dict:
    """The user's approve or deny (``decision``: approved / denied), durably, once; the work may go on."""
    with tx(db):
        approval = one(db, "SELECT * FROM approvals WHERE approval_id=?", (approval_id,))
        if approval is None:
            raise DecisionError("unknown_work_item", f"no approval {approval_id!r}")
        if approval["status"] == decision or (decision == "approved" and approval["status"] == "consumed"):
            return {"approval_id": approval_id}  # the same decision again: no change
        if approval["status"] != "pending":
            raise DecisionError("precondition_failed", f"approval {approval_id} is {approval['status']}; it cannot "
                                f"be {decision} now")
        db.conn.execute("UPDATE approvals SET status=?, decided_at=? WHERE approval_id=?",
                        (decision, now(), approval_id))
        emit(db, approval["work_id"], f"approval_{decision}", approval_id=approval_id)
        item = one(db, "SELECT * FROM work_items WHERE work_id=?", (approval["work_id"],))
        still = one(db, "SELECT COUNT(*) AS n FROM approvals WHERE work_id=? AND status='pending'", (item["work_id"],))
        if item["desired_state"] == "run" and item["reason_code"] == AWAITING_APPROVAL and not still["n"]:
            set_status(db, item["work_id"], "queued", "queued", f"approval {approval_id} {decision}")
    return {"approval_id": approval_id}

