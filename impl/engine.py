"""Executing a claimed work item: provider steps, tool calls, results, completion.

Every write is fenced by the claim's generation. Cross-database steps (usage receipts live in
usage.db) go through the outbox under unique operation keys, so a crash between the two files
converges on restart instead of needing a cross-database transaction. A change of the run intent
(pause, end, stop all) or a graceful stop is noticed at each step boundary; a tool result that
arrives is committed whatever the intent, because real results are never thrown away.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import history, pricing, reservations, resources, spend, tools
from .config import AWAITING_APPROVAL, SAFE_FOR_RECOVERY, Config
from .db import Database
from .failpoints import failpoint
from .provider import ProviderFault, Request, Watermark
from .store import Identity, emit, fenced, now, one, rows, set_status, tx


class Interrupted(Exception):
    """The step cannot go on: the user's intent changed or the process is stopping."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Ctx:
    cfg: Config
    db: Database
    udb: Database
    me: Identity
    stopping: Callable[[], bool]
    # Set while waiting on something outside (a tool child, a provider response): a graceful stop may
    # abandon the wait (never kill the child); recovery later reattaches or records the response lost.
    abandonable: bool = False

    @property
    def data(self) -> Path:
        return self.cfg.path


def check_intent(ctx: Ctx, work_id: str) -> dict:
    item = one(ctx.db, "SELECT * FROM work_items WHERE work_id=?", (work_id,))
    if item is None or item["desired_state"] != "run":
        raise Interrupted(item["reason_code"] if item else "unknown_work_item")
    if ctx.stopping():
        raise Interrupted("shutting_down")
    return item


# --- usage (usage.db) through the outbox ---------------------------------------------------------


def drain_outbox(ctx: Ctx) -> None:
    """Apply every pending cross-database step; each is idempotent under its op_key."""
    for op in rows(ctx.db, "SELECT * FROM outbox WHERE status='pending' ORDER BY created_at"):
        payload = json.loads(op["payload"])
        if op["kind"] == "usage.open":
            quote = payload.get("quote") or {}  # the prices at dispatch (impl/pricing.py), or none set
            ctx.udb.conn.execute(
                "INSERT OR IGNORE INTO receipts (request_id, op_key, work_id, session_id, turn_id, attempt,"
                " objective_revision, state, created_at, job_id, quote_input_usd_per_mtok,"
                " quote_output_usd_per_mtok) VALUES (?,?,?,?,?,?,?,'dispatched',?,?,?,?)",
                (payload["request_id"], op["op_key"], payload["work_id"], payload["session_id"],
                 payload["turn_id"], payload["attempt"], payload.get("objective_revision"), now(),
                 payload.get("job_id"), quote.get("input_usd_per_mtok"), quote.get("output_usd_per_mtok")))
            if payload.get("reservation"):  # under a hard budget: what the attempt holds of it (reservations.py)
                reservations.open_(ctx.udb, payload["request_id"], payload["work_id"], payload["reservation"])
        elif op["kind"] == "usage.lost":
            # Only a receipt still waiting for its response becomes unknown; a settled one stays.
            ctx.udb.conn.execute("UPDATE receipts SET state='unknown', settled_at=? WHERE request_id=?"
                                 " AND state='dispatched'", (now(), payload["request_id"]))
            reservations.lost(ctx.udb, payload["request_id"])  # unstarted: given back; started: kept
        with tx(ctx.db):
            ctx.db.conn.execute("UPDATE outbox SET status='done', done_at=? WHERE op_key=?", (now(), op["op_key"]))


def settle_usage(ctx: Ctx, work_id: str, request_id: str, wm: Watermark, complete: bool) -> None:
    """Write the attempt's receipt from its watermark: known, partial (lower bound) or unknown."""
    state = "known" if complete and wm.seen else ("partial" if wm.seen else "unknown")
    v = wm.values
    failpoint("usage.persist.before", work_id)
    with tx(ctx.udb):  # the receipt, the settlement of its reservation and the Goal's spend, in one transaction
        cur = ctx.udb.conn.execute(
            "UPDATE receipts SET state=?, prompt_tokens=?, completion_tokens=?, total_tokens=?, watermark_chunks=?,"
            " settled_at=? WHERE request_id=? AND state='dispatched'",
            (state, v.get("prompt_tokens"), v.get("completion_tokens"), v.get("total_tokens"), wm.chunks, now(),
             request_id))
        reservations.settle(ctx.udb, request_id, state)
        if cur.rowcount and state in ("known", "partial"):  # the projection follows the durable receipt only
            spend.add(ctx.udb, work_id, (v.get("prompt_tokens") or 0) + (v.get("completion_tokens") or 0))
    failpoint("usage.persist.after", work_id)


# --- one provider step ---------------------------------------------------------------------------


def provider_step(ctx: Ctx, item: dict, turn: dict, gen: int) -> bool:
    """Ask the provider for the next message; True if the request is answered (no tool calls)."""
    work_id, turn_id = item["work_id"], turn["turn_id"]
    # A logical request is one step of the conversation; every try of it is a new attempt (own receipt).
    step = one(ctx.db, "SELECT COUNT(*) AS n FROM messages WHERE work_id=? AND role='assistant' AND origin='real'",
               (work_id,))["n"]
    # an attempt recorded and reserved before a crash, but never sent, is sent now (if its reservation is still
    # live) under its own id: it is the step's latest attempt, so n does not advance
    unsent = reservations.unsent(ctx.db, ctx.udb, turn_id, step)
    n = one(ctx.db, "SELECT COUNT(*) AS n FROM provider_requests WHERE work_id=? AND step=?",
            (work_id, step))["n"] + (0 if unsent else 1)
    request_id = f"{work_id}.s{step}.a{n}"
    scope = work_id if item["kind"] == "job" else None  # a Job or a subtask: its own conversation, not the session's
    job = one(ctx.db, "SELECT job_id FROM jobs WHERE job_id IN (?, ?)", (work_id, item["parent_id"] or "")) \
        if item["kind"] == "job" else None  # the Job whose reservation this attempt is, saved with its receipt
    registry = ctx.cfg.registry()
    offered = [t for t in registry.values() if not turn["restricted"] or t.effect_class in SAFE_FOR_RECOVERY]
    with fenced(ctx.db, work_id, gen, "provider.dispatch"):
        check_intent(ctx, work_id)
        ctx.db.conn.execute("INSERT OR IGNORE INTO provider_requests VALUES (?,?,?,?,?,'dispatched',?)",
                            (request_id, work_id, turn_id, step, n, now()))
        payload = {"request_id": request_id, "work_id": work_id, "session_id": item["session_id"],
                   "turn_id": turn_id, "attempt": n, "objective_revision": item["objective_revision"],
                   "job_id": job["job_id"] if job else None,
                   "quote": pricing.quote(ctx.db, ctx.cfg.model),  # the prices now, kept with the receipt
                   "reservation": reservations.plan(ctx.db, ctx.udb, work_id)}  # under a hard budget only
        ctx.db.conn.execute("INSERT OR IGNORE INTO outbox VALUES (?,?,?,'pending',?,NULL)",
                            (f"usage.open:{request_id}", "usage.open", json.dumps(payload), now()))
        emit(ctx.db, work_id, "provider_request", request_id=request_id, turn_id=turn_id)
    drain_outbox(ctx)
    failpoint("provider.request.before", work_id)
    if not reservations.start(ctx.udb, request_id):  # expired unstarted: never sent; the next attempt re-reserves
        never_sent(ctx, work_id, gen, request_id)
        return False
    api_key = os.environ.get(ctx.cfg.credentials_env) if ctx.cfg.credentials_env else ctx.cfg.api_key
    req = Request(ctx.cfg.provider_base_url, ctx.cfg.model, history.build(ctx.db, item["session_id"], scope),
                  [_tool_schema(t.name) for t in offered], request_id, api_key=api_key)
    try:
        req.send()
        failpoint("provider.request.after", work_id)
        if ctx.stopping():  # a graceful stop: a response already on its way is saved, never paid for twice
            resp = _receive_within_grace(req)
            if resp is None:
                raise Interrupted("shutting_down")
        else:
            ctx.abandonable = True
            try:
                resp = req.receive()  # SIGTERM raises Interrupted here: the response is lost, its usage unknown
            finally:
                ctx.abandonable = False
                req.close()
    except ProviderFault as fault:
        settle_usage(ctx, work_id, request_id, fault.watermark, complete=False)
        schedule_retry(ctx, item, gen, request_id, fault, turn_id)
        raise Interrupted("provider_fault") from fault
    settle_usage(ctx, work_id, request_id, resp.watermark, complete=True)
    ids = [c["id"] for c in resp.tool_calls if c["id"]]
    if len(ids) != len(set(ids)):  # which call a result belongs to would be a guess: refuse, say why
        fault = ProviderFault(f"the response has ambiguous duplicate tool call ids {sorted(ids)}", retryable=False,
                              delivered=True, watermark=resp.watermark)
        schedule_retry(ctx, item, gen, request_id, fault, turn_id)
        raise Interrupted("provider_fault")
    with fenced(ctx.db, work_id, gen, "provider.commit"):
        ctx.db.conn.execute("UPDATE provider_requests SET status='responded' WHERE request_id=?", (request_id,))
        calls = [dict(c, id=c["id"] or f"{request_id}.c{i}") for i, c in enumerate(resp.tool_calls)]
        ctx.db.conn.execute(
            "INSERT INTO messages (work_id, session_id, turn_id, role, content, tool_calls, at) VALUES (?,?,?,?,?,?,?)",
            (work_id, item["session_id"], turn_id, "assistant", resp.content, json.dumps(calls) if calls else None,
             now()))
        for i, c in enumerate(calls):
            _record_call(ctx, item, turn, gen, f"{request_id}.c{i}", c)
        ctx.db.conn.execute("UPDATE work_items SET retry_count=0, last_progress=? WHERE work_id=?",
                            (request_id, work_id))
        emit(ctx.db, work_id, "assistant_message", request_id=request_id, tool_calls=len(calls))
    return not calls


def never_sent(ctx: Ctx, work_id: str, gen: int, request_id: str) -> None:
    """An attempt whose reservation expired before it started: recorded lost, its receipt settled by the outbox."""
    with fenced(ctx.db, work_id, gen, "provider.reservation_expired"):
        ctx.db.conn.execute("UPDATE provider_requests SET status='lost' WHERE request_id=?", (request_id,))
        ctx.db.conn.execute("INSERT OR IGNORE INTO outbox VALUES (?,?,?,'pending',?,NULL)",
                            (f"usage.lost:{request_id}", "usage.lost", json.dumps({"request_id": request_id}), now()))
        emit(ctx.db, work_id, "reservation_expired", request_id=request_id)
    drain_outbox(ctx)


SHUTDOWN_GRACE_S = 1.0  # how long a graceful stop waits for a response already requested


def _receive_within_grace(req: Request):
    """The response of a request already sent, if it arrives within the shutdown grace; else None (the
    attempt then stays dispatched: its outcome and usage are unknown, and recovery says so)."""
    sock = getattr(req.conn, "sock", None)
    if sock is not None:
        sock.settimeout(SHUTDOWN_GRACE_S)
    try:
        return req.receive()
    except ProviderFault:
        return None
    finally:
        req.close()


def _tool_schema(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"probe tool {name}",
                                             "parameters": {"type": "object", "additionalProperties": True}}}


def _record_call(ctx: Ctx, item: dict, turn: dict, gen: int, call_id: str, c: dict) -> None:
    spec = ctx.cfg.registry().get(c["name"])
    effect = spec.effect_class if spec else "unknown"
    identity = json.dumps(spec.identity() if spec else {})
    blocked = None
    if spec is None:
        blocked = f"no tool named {c['name']!r} is registered"
    elif turn["restricted"] and effect not in SAFE_FOR_RECOVERY:
        # an earlier call's outcome is unknown: this call runs only with a one-time approval (impl/approvals.py)
        blocked = AWAITING_APPROVAL
    t = now()
    ctx.db.conn.execute(
        "INSERT INTO tool_calls (call_id, work_id, turn_id, provider_call_id, tool_name, arguments, effect_class,"
        " impl_identity, status, blocked_reason, generation, created_at, updated_at)"
        " VALUES (?,?,?,?,?,?,?,?,'never_started',?,?,?,?)",
        (call_id, item["work_id"], turn["turn_id"], c["id"], c["name"], c["arguments"], effect, identity, blocked,
         gen, t, t))
    if blocked and blocked != AWAITING_APPROVAL:
        ctx.db.conn.execute(
            "INSERT INTO messages (work_id, session_id, turn_id, role, content, tool_call_id, origin, at)"
            " VALUES (?,?,?,'tool',?,?,'refused',?)",
            (item["work_id"], item["session_id"], turn["turn_id"], f"[runtime] not executed: {blocked}", c["id"], t))


# --- tool calls ----------------------------------------------------------------------------------


def run_call(ctx: Ctx, item: dict, gen: int, call: dict) -> None:
    """Dispatch one never-started call, wait for it and commit its result."""
    work_id = item["work_id"]
    spec = ctx.cfg.registry()[call["tool_name"]]
    check_intent(ctx, work_id)
    lacking = resources.missing(ctx.db, ctx.cfg, item, spec)  # rechecked right before the tool starts
    if lacking is not None:
        hold_for_resource(ctx, work_id, gen, *lacking)
        raise Interrupted("resource_held")
    failpoint("tool.dispatch.before", work_id)
    proc = tools.spawn(ctx.data, call["call_id"], spec, call["arguments"], item["working_dir"])
    ctime = tools.create_time(proc.pid)
    try:
        with fenced(ctx.db, work_id, gen, "tool.dispatch"):
            ctx.db.conn.execute("UPDATE tool_calls SET status='dispatched', pid=?, create_time=?, updated_at=?"
                                " WHERE call_id=?", (proc.pid, ctime, now(), call["call_id"]))
            emit(ctx.db, work_id, "tool_dispatched", call_id=call["call_id"], pid=proc.pid)
    except BaseException:
        proc.wait()  # we started it, so we reap it; its outcome stays on disk for whoever owns the item
        raise
    failpoint("tool.dispatch.after", work_id)
    ctx.abandonable = True
    try:
        if ctx.stopping():
            raise Interrupted("shutting_down")
        proc.wait()  # SIGTERM raises Interrupted here: the child lives on and a restart reattaches
    finally:
        ctx.abandonable = False
    commit_result(ctx, item, gen, call)


def commit_result(ctx: Ctx, item: dict, gen: int, call: dict) -> None:
    """Commit the real outcome from disk, or record it unknown if the tool died without one."""
    work_id = item["work_id"]
    outcome = tools.result(ctx.data, call["call_id"])
    failpoint("tool.result.commit.before", work_id)
    with fenced(ctx.db, work_id, gen, "tool.result.commit"):
        if outcome is None:
            ctx.db.conn.execute("UPDATE tool_calls SET status='outcome_unknown', updated_at=? WHERE call_id=?",
                                (now(), call["call_id"]))
            if call["effect_class"] == "unknown":
                ctx.db.conn.execute("UPDATE turns SET restricted=1 WHERE turn_id=?", (call["turn_id"],))
            emit(ctx.db, work_id, "tool_outcome_unknown", call_id=call["call_id"])
        else:
            ctx.db.conn.execute(
                "UPDATE tool_calls SET status='result_committed', exit_code=?, result_text=?, updated_at=?"
                " WHERE call_id=?", (outcome.exit_code, outcome.text, now(), call["call_id"]))
            ctx.db.conn.execute(
                "INSERT INTO messages (work_id, session_id, turn_id, role, content, tool_call_id, at)"
                " VALUES (?,?,?,'tool',?,?,?)",
                (work_id, item["session_id"], call["turn_id"], outcome.text, call["provider_call_id"], now()))
            emit(ctx.db, work_id, "tool_result", call_id=call["call_id"], exit_code=outcome.exit_code)
    failpoint("tool.result.commit.after", work_id)


# --- retries and completion ----------------------------------------------------------------------


def schedule_retry(ctx: Ctx, item: dict, gen: int, request_id: str, fault: ProviderFault, turn_id: str) -> None:
    """A provider fault: a durable retry time with bounded backoff, or pending recovery once persistent."""
    work_id = item["work_id"]
    if fault.status in (401, 403):
        persistent = "resource_missing_credentials"
    elif fault.status == 404:
        persistent = "resource_model_unavailable"
    else:
        persistent = None if fault.retryable else "retry_exhausted"
    with fenced(ctx.db, work_id, gen, "provider.fault"):
        ctx.db.conn.execute("UPDATE provider_requests SET status=? WHERE request_id=?",
                            ("failed" if fault.delivered else "lost", request_id))
        if fault.partial_text:  # kept with a marker for the record; never sent back as a real answer
            ctx.db.conn.execute(
                "INSERT INTO messages (work_id, session_id, turn_id, role, content, origin, at)"
                " VALUES (?,?,?,'assistant',?,'interrupted_partial',?)",
                (work_id, item["session_id"], turn_id, fault.partial_text + " [interrupted]", now()))
        _fault(ctx, work_id, gen, f"provider fault: {fault}", persistent)


def hold_for_resource(ctx: Ctx, work_id: str, gen: int, reason: str, text: str) -> None:
    """A resource is missing: wait with its precise reason and a pending-recovery record; switch nothing."""
    actions = ("Retry", "Pause", "End")
    with fenced(ctx.db, work_id, gen, "resource.hold"):
        ctx.db.conn.execute("INSERT OR REPLACE INTO pending_recovery VALUES (?,?,?,?,?)",
                            (work_id, reason, text, json.dumps(list(actions)), now()))
        set_status(ctx.db, work_id, "waiting", reason, text, actions)
        release(ctx, work_id, gen, "held")


def internal_fault(ctx: Ctx, work_id: str, gen: int, exc: BaseException) -> None:
    """Anything unexpected while running an item: the same bounded, durable retry as a provider fault."""
    with fenced(ctx.db, work_id, gen, "internal.fault"):
        _fault(ctx, work_id, gen, f"internal error: {type(exc).__name__}: {exc}", None)


def _fault(ctx: Ctx, work_id: str, gen: int, text: str, persistent: str | None) -> None:
    count = one(ctx.db, "SELECT retry_count FROM work_items WHERE work_id=?", (work_id,))["retry_count"] + 1
    delays = ctx.cfg.retry_delays_s
    if persistent is None and count > len(delays):
        persistent, text = "retry_exhausted", f"gave up after {count} attempts; last: {text}"
    actions = ("Retry", "Pause", "End")
    if persistent is None:
        delay = delays[count - 1] * (1 + random.uniform(-ctx.cfg.retry_jitter, ctx.cfg.retry_jitter))
        set_status(ctx.db, work_id, "waiting", "retry_scheduled", f"retry {count} of {len(delays)}: {text}",
                   actions, retry_count=count, retry_at=now() + delay)
    else:
        ctx.db.conn.execute("INSERT OR REPLACE INTO pending_recovery VALUES (?,?,?,?,?)",
                            (work_id, persistent, text, json.dumps(list(actions)), now()))
        set_status(ctx.db, work_id, "waiting", persistent, text, actions, retry_count=count, retry_at=None)
    release(ctx, work_id, gen, "fault")


def finish(ctx: Ctx, item: dict, turn: dict, gen: int) -> None:
    work_id = item["work_id"]
    with fenced(ctx.db, work_id, gen, "completion.commit"):
        check_intent(ctx, work_id)
        ctx.db.conn.execute("UPDATE turns SET status='completed', ended_at=?, end_reason='answered'"
                            " WHERE turn_id=?", (now(), turn["turn_id"]))
        ctx.db.conn.execute("UPDATE work_items SET desired_state='done' WHERE work_id=?", (work_id,))
        set_status(ctx.db, work_id, "finished", "finished", "the request was answered")
        release(ctx, work_id, gen, "finished")
        emit(ctx.db, work_id, "completed", session_id=item["session_id"], turn_id=turn["turn_id"])
    failpoint("completion.commit.before_projection", work_id)


def release(ctx: Ctx, work_id: str, gen: int, outcome: str) -> None:
    """Inside a fenced transaction: give the lease up and close the owner attempt."""
    ctx.db.conn.execute("UPDATE leases SET released=1 WHERE work_id=? AND generation=?", (work_id, gen))
    ctx.db.conn.execute("UPDATE owner_attempts SET ended_at=?, outcome=? WHERE work_id=? AND generation=?",
                        (now(), outcome, work_id, gen))
    emit(ctx.db, work_id, "lease_released", generation=gen, outcome=outcome)
