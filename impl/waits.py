"""Durable waits on external operations: saved, woken once, reconciled by polling with backoff.

Seed 000 (Todo and acceptance): waiting uses durable waits that save work_id, handle, observed version and a
unique consumption key; a completion, failure or timeout notification admits its continuation exactly once,
only while intent is run and versions match; missing notifications are found by reconciliation polling with
backoff, not by idle model calls; pause, cancel or revision invalidate old wakeups without discarding results;
a query timeout does not mean the operation stopped. Here:

- ``gate`` (the worker, before the next model step): a committed result of a tool registered as an external
  operation opens a wait (``wait:<call_id>``, handle and version from the result, consumption key
  ``<work_id>|<handle>|v<version>``); with no saved notification for it the work waits
  (``waiting_dependency``), its lease given up; with one it is *admitted*: the wait consumed, the notification
  marked admitted and its message written, in one fenced transaction under a unique key, so a repeat admits
  nothing (``wait.notify.before_admit`` / ``.after``);
- ``save`` (the control process, or the adapter itself while the runtime is down): a notification is stored
  once by its id whatever the intent, and only work still meant to run and waiting on that handle and version
  is made runnable: a paused item's wakeup is dropped, its result kept for the Resume;
- ``poll_due`` (any idle worker): a wait with no notification is queried at growing intervals by running the
  tool with ``{"query": handle}``; a completed or failed answer is saved as a notification; no answer within
  ``QUERY_TIMEOUT_S`` is only a failed query: the query child is killed and the wait goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

from .config import Config
from .db import Database
from .engine import Ctx, Interrupted, check_intent, release
from .failpoints import failpoint
from .store import emit, fenced, now, one, rows, set_status, tx

POLL_DELAYS_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # then the last one, for as long as it takes
QUERY_TIMEOUT_S = 1.0
WAITING = "waiting_dependency"
TEXT = "waiting for external operation {handle} (version {version}) to complete; it is polled with backoff"
# A notification n is for wait x only if it names the wait's handle and the version observed when waiting began.
MATCH = "n.handle = x.handle AND n.version = x.observed_version"


def poll_delay(count: int) -> float:
    return POLL_DELAYS_S[min(count, len(POLL_DELAYS_S) - 1)]


def _open_waits(ctx: Ctx, item: dict) -> None:
    """A wait for every committed external-operation result of the work item that has none yet."""
    registry = ctx.cfg.registry()
    for c in rows(ctx.db, "SELECT * FROM tool_calls WHERE work_id=? AND status='result_committed' AND call_id NOT IN"
                          " (SELECT call_id FROM waits WHERE call_id IS NOT NULL)", (item["work_id"],)):
        spec = registry.get(c["tool_name"])
        if spec is None or not spec.external:
            continue
        try:
            wait = json.loads((c["result_text"] or "").strip().splitlines()[-1])["wait"]
            handle, version = str(wait["handle"]), str(wait["version"])
        except (ValueError, KeyError, IndexError, TypeError):
            continue  # no operation was started (the tool failed): nothing to wait on
        ctx.db.conn.execute(
            "INSERT OR IGNORE INTO waits (wait_id, work_id, kind, handle, observed_version, consume_key, status,"
            " reason, created_at, call_id, control_version, next_poll_at, poll_count)"
            " VALUES (?,?,'external',?,?,?,'waiting',?,?,?,?,?,0)",
            (f"wait:{c['call_id']}", item["work_id"], handle, version, f"{item['work_id']}|{handle}|v{version}",
             WAITING, now(), c["call_id"], item["control_version"], now() + poll_delay(0)))
        emit(ctx.db, item["work_id"], "wait_opened", handle=handle, version=version)


def gate(ctx: Ctx, item: dict, turn: dict, gen: int) -> bool:
    """True if a notification was admitted now; False if nothing is waited on; raises Interrupted to wait."""
    work_id = item["work_id"]
    with fenced(ctx.db, work_id, gen, "wait.open"):
        _open_waits(ctx, item)
    wait = one(ctx.db, "SELECT * FROM waits WHERE work_id=? AND kind='external' AND status='waiting'"
                       " ORDER BY created_at LIMIT 1", (work_id,))
    if wait is None:
        return False
    note = one(ctx.db, f"SELECT n.* FROM notifications n JOIN waits x ON {MATCH} WHERE x.wait_id=? AND"
                       " n.status IN ('saved','admitted') ORDER BY n.received_at LIMIT 1", (wait["wait_id"],))
    if note is None:
        with fenced(ctx.db, work_id, gen, "wait.hold"):
            set_status(ctx.db, work_id, "waiting", WAITING,
                       TEXT.format(handle=wait["handle"], version=wait["observed_version"]), ("Pause", "End"))
            release(ctx, work_id, gen, "waiting")
        raise Interrupted(WAITING)
    admit(ctx, item, turn, gen, wait, note)
    return True


def admit(ctx: Ctx, item: dict, turn: dict, gen: int, wait: dict, note: dict) -> None:
    """Consume the wait once under its key, intent still run: the notification becomes the next message."""
    work_id = item["work_id"]
    failpoint("wait.notify.before_admit", work_id)
    with fenced(ctx.db, work_id, gen, "wait.admit"):
        check_intent(ctx, work_id)
        cur = ctx.db.conn.execute("UPDATE waits SET status='consumed', consumed_at=? WHERE wait_id=? AND"
                                  " status='waiting'", (now(), wait["wait_id"]))
        if cur.rowcount == 1:
            ctx.db.conn.execute("UPDATE notifications SET status='admitted' WHERE notification_id=?",
                                (note["notification_id"],))
            ctx.db.conn.execute(
                "INSERT OR IGNORE INTO messages (work_id, session_id, turn_id, role, content, origin, repair_key, at)"
                " VALUES (?,?,?,'system',?,'notification',?,?)",
                (work_id, item["session_id"], turn["turn_id"],
                 f"[notification] external operation {wait['handle']} (version {note['version']}): {note['outcome']}",
                 f"notify:{wait['consume_key']}", now()))
            emit(ctx.db, work_id, "wait_admitted", handle=wait["handle"], key=wait["consume_key"],
                 notification_id=note["notification_id"])
    failpoint("wait.notify.after", work_id)


def save(db: Database, notification_id: str, handle: str, version: str, outcome: str, source: str) -> list[str]:
    """Store a notification once; make runnable the work still meant to run that waits on it. The woken ids."""
    woken = []
    with tx(db):
        db.conn.execute("INSERT OR IGNORE INTO notifications VALUES (?,?,?,?,?,'saved',?)",
                        (notification_id, handle, str(version), outcome, source, now()))
        waiting = rows(db, f"SELECT w.* FROM notifications n JOIN waits x ON {MATCH} JOIN work_items w"
                           " ON w.work_id = x.work_id WHERE n.notification_id=? AND x.status='waiting'",
                           (notification_id,))
        for w in waiting:
            if w["desired_state"] != "run":
                continue  # paused or ended: this wakeup is void; the result stays saved for a Resume
            if w["status"] != "waiting" or w["reason_code"] != WAITING:
                continue  # already runnable or running: nothing to wake
            set_status(db, w["work_id"], "queued", "queued", f"external operation {handle} {outcome}")
            woken.append(w["work_id"])
        emit(db, None, "notification_saved", notification_id=notification_id, handle=handle, woken=woken)
    return woken


def next_poll_in(db: Database) -> float | None:
    row = one(db, "SELECT MIN(x.next_poll_at) AS t FROM waits x JOIN work_items w USING (work_id) WHERE"
                  " x.kind='external' AND x.status='waiting' AND w.desired_state='run' AND w.reason_code=?",
              (WAITING,))
    if row is None or row["t"] is None:
        return None
    return max(0.0, row["t"] - now()) + 0.01


def poll_due(cfg: Config, db: Database) -> bool:
    """Query one due wait's operation (claimed by moving its next poll time on); True if one was queried."""
    due = rows(db, "SELECT x.* FROM waits x JOIN work_items w USING (work_id) WHERE x.kind='external' AND"
                   " x.status='waiting' AND w.desired_state='run' AND w.reason_code=? AND x.next_poll_at <= ?"
                   " ORDER BY x.next_poll_at", (WAITING, now()))
    for wait in due:
        with tx(db):
            cur = db.conn.execute("UPDATE waits SET poll_count=poll_count+1, next_poll_at=? WHERE wait_id=? AND"
                                  " next_poll_at=?", (now() + poll_delay(wait["poll_count"] + 1), wait["wait_id"],
                                                      wait["next_poll_at"]))
        if cur.rowcount != 1:
            continue  # another worker queries it
        call = one(db, "SELECT tool_name FROM tool_calls WHERE call_id=?", (wait["call_id"],))
        spec = cfg.registry().get(call["tool_name"]) if call else None
        if spec is None:
            return True
        answer = query(spec.argv, wait["handle"])
        if answer is not None and answer.get("state") in ("completed", "failed"):
            save(db, f"poll:{wait['wait_id']}:{answer.get('version')}", wait["handle"], str(answer.get("version")),
                 str(answer["state"]), "poll")
        return True
    return False


def query(argv: list[str], handle: str) -> dict | None:
    """Run one reconciliation query; its answer, or None when it did not answer in time (not a stop)."""
    proc = subprocess.Popen([*argv, json.dumps({"query": handle})], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    try:
        out, _ = proc.communicate(timeout=QUERY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        print(f"query of {handle} timed out after {QUERY_TIMEOUT_S}s; the operation is still waited on",
              file=sys.stderr)
        return None
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
