"""The normalized snapshot for ``observe``, read from the two databases in one pass.

Sections this runtime cannot know are not invented; Goals come from ``goals_view``, Paperclip tasks and runs
from ``tasks``. Leases do not
expire by time (ownership is confirmed by process identity), so ``expires_at`` is null.

Every snapshot carries ``storage``: whether the databases can be read at a schema this runtime knows, and if
not, the recovery failure and the actions that lead out of it. A store that cannot be read is not read at
all (its sections are null), and one at a newer schema is not interpreted: nothing is invented.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from . import goal_timer, tasks
from .goals_view import receipt_attribution, snapshot_goals
from .schema import (
    RUNTIME_MIGRATIONS,
    STORAGE_ACTIONS,
    USAGE_MIGRATIONS,
    StorageUnavailable,
    check_readable,
)
from .store import now, process_alive

# runtime.db is read in one snapshot, usage.db in a second one just after: no read spans both files,
# as no write does, so a receipt can be a moment newer than the turns shown beside it.
OBSERVES = ["work_items", "goals", "turns", "tool_calls", "approvals", "usage_receipts", "leases", "waits",
            "fenced_writes", *tasks.SECTIONS, "reservations"]
STORE = {"runtime.db": len(RUNTIME_MIGRATIONS), "usage.db": len(USAGE_MIGRATIONS)}  # file -> schema version known
STORAGE_DECL = {"files": list(STORE), "schema_version": "sqlite_user_version"}
_USAGE_STATES = {"known": "known", "partial": "partial", "unknown": "unknown", "dispatched": "unknown"}


class Unreadable(Exception):
    """The runtime's storage cannot be read; the text says why and what to do."""


def _quote(receipt: dict) -> dict | None:
    """The prices the attempt was quoted at when dispatched (protocol 1.4), as stored with its receipt."""
    if receipt.get("quote_input_usd_per_mtok") is None:
        return None
    return {"input_usd_per_mtok": receipt["quote_input_usd_per_mtok"],
            "output_usd_per_mtok": receipt["quote_output_usd_per_mtok"]}


def _read(path: Path, sql: str, params: tuple = ()) -> list[dict]:
    return _read_many(path, [(sql, params)])[0]


def _read_many(path: Path, queries: list[tuple[str, tuple]]) -> list[list[dict]]:
    """All queries in one read transaction: in WAL mode that is one consistent snapshot."""
    try:
        check_readable(path)  # before SQLite opens it: opening a damaged store can discard its WAL
    except StorageUnavailable as exc:
        raise sqlite3.DatabaseError(str(exc)) from exc
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("BEGIN")
        out = [[dict(r) for r in conn.execute(sql, params)] for sql, params in queries]
        conn.execute("COMMIT")
        return out
    finally:
        conn.close()


def failure_state(data_dir: Path) -> dict | None:
    try:
        return json.loads((data_dir / "recovery_failed.json").read_text())
    except (OSError, ValueError):
        return None


def _failed(state: str, reason_code: str, text: str) -> dict:
    return {"state": state, "reason_code": reason_code, "actions": list(STORAGE_ACTIONS[reason_code]), "text": text}


def storage_state(data_dir: Path) -> dict:
    """The store as it is now; else the failure the last start recorded, until a start loads the facts again
    (restoring a file does not tell this runtime it is good: Retry does)."""
    for name, known in STORE.items():
        path = data_dir / name
        if not path.exists():
            continue
        try:
            version = _read(path, "PRAGMA user_version")[0]["user_version"]
        except sqlite3.Error as exc:
            return _failed("unreadable", "recovery_failed_storage_unavailable",
                           f"{name} cannot be read ({exc}); nothing was changed. Restore it, then Retry")
        if version > known:
            return _failed("migration_failed", "recovery_failed_migration",
                           f"{name} is at schema version {version}, newer than this runtime knows ({known}); "
                           "nothing was changed. Run the newer runtime, or restore a backup, then Retry")
    failed = failure_state(data_dir)
    if failed:
        state = "migration_failed" if failed["reason_code"] == "recovery_failed_migration" else "unreadable"
        return _failed(state, failed["reason_code"], f"the last start could not load its facts: {failed['text']}")
    return {"state": "ok", "reason_code": None, "actions": [], "text": ""}


def snapshot(data_dir: Path) -> dict:
    db, udb = data_dir / "runtime.db", data_dir / "usage.db"
    storage = storage_state(data_dir)
    if storage["state"] != "ok":
        return {s: None for s in OBSERVES} | {"storage": storage}
    if not db.exists():
        return {s: [] for s in OBSERVES} | {"storage": storage}
    try:
        (items, inputs, turns, calls, leases, fenced, waits, approvals, goal_rows, accepted, req_rows,
         timer_rows) = _read_many(db, [
            ("SELECT * FROM work_items ORDER BY created_at", ()),
            ("SELECT * FROM inputs ORDER BY accepted_at", ()),
            ("SELECT * FROM turns ORDER BY work_id, seq_no", ()),
            ("SELECT * FROM tool_calls ORDER BY created_at", ()),
            ("SELECT * FROM leases WHERE released=0", ()),
            ("SELECT * FROM fenced_writes ORDER BY id", ()),
            ("SELECT * FROM waits", ()),
            ("SELECT * FROM approvals ORDER BY created_at, rowid", ()),
            ("SELECT * FROM goals ORDER BY created_at", ()),
            ("SELECT a.* FROM goal_acceptances a JOIN goals g ON a.acceptance_id = g.acceptance_id", ()),
            ("SELECT * FROM goal_requirements ORDER BY goal_id, req_id", ()),
            ("SELECT work_id, kind, at, payload FROM events WHERE kind IN (?,?,?) ORDER BY seq",
             (goal_timer.START, goal_timer.SEEN, goal_timer.STOP))])
        # the projection and the reservations first: both move only in a receipt's write, so the receipts read
        # after them are at least as new
        spent = {r["work_id"]: r["spent_tokens_known"] for r in _read(udb, "SELECT * FROM goal_spend")} \
            if udb.exists() else {}
        reserved = _read(udb, "SELECT * FROM reservations ORDER BY created_at") if udb.exists() else []
        receipts = _read(udb, "SELECT * FROM receipts ORDER BY created_at") if udb.exists() else []
    except sqlite3.Error as exc:
        raise Unreadable(f"recovery_failed_storage_unavailable: {exc} (actions: retry, restore_backup)") from exc
    by_work: dict[str, list[dict]] = {}
    for i in inputs:
        by_work.setdefault(i["work_id"], []).append(
            {"input_id": i["input_id"], "client_msg_id": i["client_msg_id"], "text": i["text"]})
    work_items = []
    for w in items:
        status, reason = w["status"], w["reason_code"]
        work_items.append({
            "work_id": w["work_id"], "session_id": w["session_id"], "kind": w["kind"],
            "desired_state": w["desired_state"], "control_version": w["control_version"], "status": status,
            "reason_code": reason, "recovery_policy": w["recovery_policy"], "host_id": w["host_id"],
            "parent_id": w["parent_id"], "inputs": by_work.get(w["work_id"], []), "last_progress": w["last_progress"],
            "provenance": w["provenance"]})
    timer_waits = [{"handle": f"timer:{w['retry_at']:.3f}", "work_id": w["work_id"], "observed_version":
                    str(w["control_version"]), "consumption_key": f"{w['work_id']}:retry:{w['retry_count']}",
                    "consumed": w["retry_at"] <= now()}
                   for w in items if w["status"] == "waiting" and w["reason_code"] == "retry_scheduled"
                   and w["retry_at"] is not None]
    goal_by_work = {g["work_id"]: g for g in goal_rows}
    reqs_by_goal: dict[str, list[dict]] = {}
    for r in req_rows:
        reqs_by_goal.setdefault(r["goal_id"], []).append(r)
    active = goal_timer.fold(timer_rows)
    return {
        "work_items": work_items,
        "goals": snapshot_goals(goal_rows, {w["work_id"]: w for w in items},
                                {a["goal_id"]: a for a in accepted}, reqs_by_goal,
                                {g["goal_id"]: active.get(g["work_id"], 0.0) for g in goal_rows}, spent),
        "turns": [{"turn_id": t["turn_id"], "work_id": t["work_id"], "continuation_key": t["continuation_key"],
                   "predecessor": t["predecessor"], "status": t["status"]} for t in turns],
        "tool_calls": [{"call_id": c["call_id"], "work_id": c["work_id"], "turn_id": c["turn_id"],
                        "tool": c["tool_name"], "effect_class": c["effect_class"], "status": c["status"],
                        "pid": c["pid"], "create_time": c["create_time"] if c["pid"] else None,
                        "repair_key": c["repair_key"]} for c in calls],
        # protocol 1.3: the provider's id of the call (tool_call_id) and the unknown-effect set it was asked under
        "approvals": [{"approval_id": a["approval_id"], "work_id": a["work_id"], "call_id": a["call_id"],
                       "status": a["status"], "tool_call_id": a["provider_call_id"],
                       "effect_set": json.loads(a["effect_set"])} for a in approvals],
        "usage_receipts": [{"receipt_id": r["request_id"], "work_id": r["work_id"], "request_id": r["request_id"],
                            "attempt": r["attempt"],
                            **receipt_attribution(r, goal_by_work),
                            "prompt_tokens": r["prompt_tokens"] if r["state"] in ("known", "partial") else None,
                            "completion_tokens": r["completion_tokens"] if r["state"] in ("known", "partial") else None,
                            "usage": _USAGE_STATES[r["state"]], "job_id": r.get("job_id"),
                            "quote": _quote(r)} for r in receipts],
        # protocol 1.4: what each paid attempt under a hard budget holds of it (impl/reservations.py)
        "reservations": [{"reservation_id": v["reservation_id"], "work_id": v["work_id"], "goal_id": v["goal_id"],
                          "request_id": v["request_id"], "max_tokens": v["max_tokens"], "expires_at": v["expires_at"],
                          "state": v["state"]} for v in reserved],
        "leases": [{"work_id": lease["work_id"], "owner": {"host_id": lease["host_id"], "pid": lease["pid"],
                                                          "create_time": lease["create_time"]},
                    "generation": lease["generation"], "expires_at": None} for lease in leases],
        "waits": [{"handle": w["handle"] or w["wait_id"], "work_id": w["work_id"],
                   "observed_version": None if w["observed_version"] is None else str(w["observed_version"]),
                   "consumption_key": w["consume_key"] or w["wait_id"], "consumed": w["status"] == "consumed"}
                  for w in waits] + timer_waits,
        "fenced_writes": [{"work_id": f["work_id"], "generation": f["stale_generation"],
                           "current_generation": f["current_generation"] or 0, "what": f["op"]} for f in fenced],
        **tasks.sections(data_dir),  # runs, tasks, wakeup receipts, workspaces, coordinators, retry schedule
        "storage": storage,
    }


def pending(data_dir: Path, host_id: str | None = None) -> list[dict]:
    """Work items still running or runnable (for quiesce); a scheduled retry will run by itself, so it counts, and
    so does a wait on an external operation (reconciliation goes on polling it until it ends). A blocked Goal also
    waits on a dependency, but on none the runtime polls: only the user's Resume moves it, so it is quiet."""
    db = data_dir / "runtime.db"
    if not db.exists() or storage_state(data_dir)["state"] != "ok":
        return []  # nothing runs on a store it cannot read until the user acts (Retry): nothing is pending
    items, owned = _read_many(db, [
        ("SELECT work_id, status FROM work_items WHERE desired_state='run' AND"
         " (status IN ('queued','running') OR (status='waiting' AND (reason_code='retry_scheduled' OR"
         " (reason_code='waiting_dependency' AND EXISTS (SELECT 1 FROM waits x WHERE x.work_id=work_items.work_id"
         " AND x.status='waiting')))) OR (status='waiting' AND reason_code='waiting_child' AND EXISTS ("
         # a Job goes on by itself while a subtask is unstarted, running, or finished and not delivered yet
         "SELECT 1 FROM job_subtasks s LEFT JOIN work_items c ON c.work_id = s.child_id WHERE"
         " s.job_id = work_items.work_id AND s.delivered_at IS NULL AND (s.child_id IS NULL OR"
         " c.desired_state IN ('run', 'done')))))"
         " ORDER BY created_at", ()),
        ("SELECT w.work_id, w.status, w.reason_code, l.host_id, l.pid, l.create_time FROM leases l"
         " JOIN work_items w USING (work_id) WHERE l.released=0", ())])
    items = items + tasks.pending(data_dir)
    seen = {i["work_id"] for i in items}
    # also a live owner still finishing an item, and an item waiting for its owner's host when that is us now
    busy = [{"work_id": o["work_id"], "status": o["status"]} for o in owned if o["work_id"] not in seen and (
        process_alive(o["pid"], o["create_time"])
        or (o["reason_code"] == "owner_on_other_host" and o["host_id"] == host_id))]
    return items + busy
