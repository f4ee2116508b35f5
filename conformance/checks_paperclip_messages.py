"""History checks of a Paperclip task's saved messages (seed 001), on the provider's ledger.

The kit saves a message on a task (``task_message``, protocol 1.4) and then reads, in its own provider's ledger,
which requests of the task's script carried it (the ledger keeps each message's first 160 characters, and a saved
message is at most 160). Kept apart from the other Paperclip checks because both clauses here are about input,
not runs or records: a saved message is consumed once, when execution starts (RTY-23), and a rejected, unadmitted
Retry releases the saved input for another deliberate Retry (RTY-17).

A request's run is its ``request_id`` when the runtime sent one (``X-Request-Id``, so a request the runtime sent
again within one execution counts once), else the request itself. A check that finds nothing to judge answers
unknown, never valid.
"""

from __future__ import annotations

from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement, kit_evidence
from recoverykit.conformance.checks_paperclip import (
    _ops,
    _paperclip,
    _rows,
    _task_observations,
    requests_of,
    task_scripts,
)


def saved_messages(ev: Evidence) -> list[tuple[Any, Any]]:
    """Every ``task_message`` the runtime answered ``ok``: (invoke, completion)."""
    return [(i, d) for i, d in _ops(ev, "task_message") if d is not None and d.type == "ok"]


def carries(request: dict[str, Any], text: str) -> bool:
    return any(m.get("head") == text[:160] for m in request.get("messages") or [] if isinstance(m, dict))


def _execution(request: dict[str, Any]) -> str:
    if request.get("request_id_source") == "header" and request.get("request_id"):
        return str(request["request_id"])
    return f"seq {request.get('seq')}"


def _in_flight(ev: Evidence, task_id: str, index: int) -> bool:
    """The last observation before ``index`` shows a run of the task dispatched and still running (an execution
    that started before the message was saved may reach the provider after it), or there is none."""
    before = [o for o in _task_observations(ev) if o.index < index]
    if not before:
        return True
    return any(r.get("work_id") == task_id and r["status"] == "running" and r.get("dispatched")
               for r in _rows(before[-1], "runs"))


@kit_evidence
def check_saved_message_consumed_once(ev: Evidence) -> list[ClauseResult]:
    """RTY-23: a message saved on a task is consumed once, when execution starts: by the provider's ledger, the
    first request of the task's script after the save carries it (when no execution of the task was in flight
    at the save), and the requests that carry it belong to one execution only."""
    if not _paperclip(ev):
        return []
    scripts = task_scripts(ev)
    problems, judged = [], 0
    for inv, done in saved_messages(ev):
        task_id, text = inv.value.get("task_id"), inv.value.get("text") or ""
        script = scripts.get(task_id)
        if script is None:
            continue
        after = sorted(requests_of(ev, script, done.time), key=lambda r: float(r.get("time", 0)))
        if not after:
            continue
        judged += 1
        if not carries(after[0], text) and not _in_flight(ev, task_id, inv.index):
            problems.append(f"the message saved on task {task_id} ({text!r}) was not in the first request of the "
                            f"task after it: not consumed when execution started")
        runs = sorted({_execution(r) for r in requests_of(ev, script, 0.0) if carries(r, text)})
        if len(runs) > 1:
            problems.append(f"the message saved on task {task_id} ({text!r}) reached the provider in {len(runs)} "
                            f"executions ({', '.join(runs)}): consumed more than once")
    return _judgement("RTY-23", problems, judged, "no saved message was followed by an execution of its task",
                      f"{judged} saved message(s), each consumed once when an execution started")


@kit_evidence
def check_refused_retry_releases_input(ev: Evidence) -> list[ClauseResult]:
    """RTY-17: a Retry refused definitely (never admitted) while a saved message of its task was undelivered (no
    request of the task carried it yet) leaves that message for another deliberate Retry: when a later click on
    the task is admitted and its run reaches the provider, a request of the task after the refused click carries
    the message (the provider's ledger)."""
    if not _paperclip(ev):
        return []
    scripts = task_scripts(ev)
    clicks = _ops(ev, "retry")
    problems, judged = [], 0
    for inv, done in saved_messages(ev):
        task_id, text = inv.value.get("task_id"), inv.value.get("text") or ""
        script = scripts.get(task_id)
        if script is None:
            continue
        refused = next(((i, d) for i, d in clicks if i.value.get("work_id") == task_id and i.index > done.index
                        and d is not None and d.type == "fail"), None)
        if refused is None:
            continue
        ri, rd = refused
        if any(carries(r, text) for r in requests_of(ev, script, 0.0) if float(r.get("time", 0)) < ri.time):
            continue  # already delivered before the refused click: nothing of it to release
        admitted = next(((i, d) for i, d in clicks if i.value.get("work_id") == task_id and i.index > rd.index
                         and d is not None and d.type == "ok" and d.value.get("created")), None)
        if admitted is None or not requests_of(ev, script, admitted[0].time):
            continue
        judged += 1
        if not any(carries(r, text) for r in requests_of(ev, script, ri.time)):
            problems.append(f"the message saved on task {task_id} ({text!r}) was undelivered when a Retry was refused "
                            f"({rd.value.get('code')}); the next admitted Retry's run reached the provider without it")
    return _judgement("RTY-17", problems, judged, "no Retry was refused while a saved message waited, then another "
                      "admitted", f"{judged} saved message(s) kept through a refused Retry for the next one")


MESSAGE_CHECKS = (check_saved_message_consumed_once, check_refused_retry_releases_input)
