"""A Goal's active time from durable start/stop records (seed 000, "Usage, cost and budget").

Active time accumulates only while a worker drives the Goal: a start record when a worker takes it up, a
``seen`` mark at each durable step (the executor's heartbeat), a stop record when it lets go or when a control
pauses or ends the Goal (in the control's own transaction). An executor that disappeared left no stop record:
the next owner closes its interval at its last mark, never at the time the crash was discovered, and recovery
never resets what was accumulated. The records are events (``goal_timer_start`` / ``goal_timer_seen`` /
``goal_timer_stop``), so no migration is needed; ``fold`` turns them into seconds for ``observe``. Every
function but ``fold`` runs inside the caller's transaction.
"""

from __future__ import annotations

import json

from .db import Database
from .store import emit, now, one

START, SEEN, STOP = "goal_timer_start", "goal_timer_seen", "goal_timer_stop"


def _open_since(db: Database, work_id: str) -> dict | None:
    """The start record of the open interval, or None."""
    last = one(db, "SELECT seq, kind, at FROM events WHERE work_id=? AND kind IN (?,?) ORDER BY seq DESC LIMIT 1",
               (work_id, START, STOP))
    return last if last is not None and last["kind"] == START else None


def begin(db: Database, work_id: str) -> None:
    """A worker takes the Goal up: an interval a vanished executor left open ends at its last heartbeat."""
    opened = _open_since(db, work_id)
    if opened is not None:
        mark = one(db, "SELECT MAX(at) AS at FROM events WHERE work_id=? AND kind=? AND seq>?",
                   (work_id, SEEN, opened["seq"]))["at"]
        emit(db, work_id, STOP, at=mark if mark is not None else opened["at"], why="executor_gone")
    emit(db, work_id, START)


def seen(db: Database, work_id: str) -> None:
    """A durable step of the running interval: the executor's heartbeat."""
    if _open_since(db, work_id) is not None:
        emit(db, work_id, SEEN)


def stop(db: Database, work_id: str, why: str) -> None:
    if _open_since(db, work_id) is not None:
        emit(db, work_id, STOP, at=now(), why=why)


def fold(events: list[dict]) -> dict[str, float]:
    """Seconds of active time per work item from its timer records, in order (``events`` rows)."""
    total: dict[str, float] = {}
    open_at: dict[str, tuple[float, float]] = {}
    for e in events:
        w = e["work_id"]
        if e["kind"] == START:
            open_at[w] = (e["at"], e["at"])
        elif e["kind"] == SEEN and w in open_at:
            open_at[w] = (open_at[w][0], max(open_at[w][1], e["at"]))
        elif e["kind"] == STOP and w in open_at:
            started, _ = open_at.pop(w)
            total[w] = total.get(w, 0.0) + max(0.0, json.loads(e["payload"]).get("at", e["at"]) - started)
    for w, (started, last) in open_at.items():
        total[w] = total.get(w, 0.0) + max(0.0, last - started)
    return total


__all__ = ["SEEN", "START", "STOP", "begin", "fold", "seen", "stop"]
