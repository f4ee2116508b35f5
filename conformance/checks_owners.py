"""One owner per work item, judged from who really called the kit's provider (OWN-02).

The runtime's lease table is keyed by work item, so an ``observe`` of it can never show two owners; the
check that counted lease rows could not fail. The provider records the sending process of every request
(``sender_pid`` / ``sender_create_time``, conformance/peer.py). Two different live processes with requests of
one script open at the same moment are two owners of that work item at once:

- request B of a script starts while request A of the same script, from another process, is still open
  (no response yet, or a response more than ``TOLERANCE_S`` after B started: the provider notices a dead
  client within a poll, so A's sender was alive and connected when B began);
- and no fault of the kit's (a kill, a restart) happened between A's start and B's: a process the kit
  killed or restarted may leave an open request behind without being an owner.

No sender recorded (an older ledger, a peer the socket table could not name): unknown, never valid.
"""

from __future__ import annotations

from collections.abc import Callable

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, kit_evidence
from recoverykit.conformance.history import restarts
from recoverykit.conformance.provider_ledger import calls
from recoverykit.model.catalogue import Verdict

TOLERANCE_S = 0.25


def check_one_sender(ev: Evidence) -> list[ClauseResult]:
    attempts = [c for c in calls(ev.ledger) if c.request.get("script_id") and c.request.get("sender_pid")]
    if not attempts:
        return [_result("OWN-02", Verdict.UNKNOWN, "no provider request with a known sender")]
    fault_times = sorted(f.time for f in restarts(ev.history))  # a paused process is alive: no excuse
    problems = []
    by_script: dict[str, list] = {}
    for c in attempts:
        by_script.setdefault(c.request["script_id"], []).append(c)
    for script_id, mine in by_script.items():
        mine.sort(key=lambda c: c.request["time"])
        for i, b in enumerate(mine):
            for a in mine[:i]:
                who_a = (a.request["sender_pid"], a.request.get("sender_create_time"))
                who_b = (b.request["sender_pid"], b.request.get("sender_create_time"))
                if who_a == who_b:
                    continue
                end = a.response["time"] if a.response else float("inf")
                started_a, started_b = a.request["time"], b.request["time"]
                if end - started_b <= TOLERANCE_S:
                    continue
                if any(started_a <= t <= started_b for t in fault_times):
                    continue
                problems.append(f"script {script_id}: request {b.request.get('request_id')} from pid {who_b[0]} "
                                f"started while request {a.request.get('request_id')} from pid {who_a[0]} was still "
                                f"open, with no fault between: two owners at once")
    if problems:
        return [_result("OWN-02", Verdict.INVALID, problems[0], problems)]
    senders = {(c.request["sender_pid"], c.request.get("sender_create_time")) for c in attempts}
    return [_result("OWN-02", Verdict.VALID, f"{len(attempts)} provider request(s) from {len(senders)} process(es), "
                    "never two at once for one work item (the provider's record of who called it)")]


def check_paused_owner_kept(ev: Evidence) -> list[ClauseResult]:
    """REC-12: a live owner is only reconnected, never replaced. The kit paused (SIGSTOP) a process with a
    request of some script open; until the kit let it go on (SIGCONT), no other process may send a request of
    that script: the paused owner is alive, however long it does not answer."""
    pauses = [f for f in ev.history.faults if f.kind == "process_pause"]
    if not pauses:
        return [_result("REC-12", Verdict.UNKNOWN, "the kit paused no process")]
    conts = sorted(f.time for f in ev.history.faults if f.kind == "process_continue")
    attempts = [c for c in calls(ev.ledger) if c.request.get("script_id") and c.request.get("sender_pid")]
    judged, problems = 0, []
    for p in pauses:
        until = next((t for t in conts if t > p.time), float("inf"))
        paused = set(p.detail.get("pids") or [])
        owned = {c.request["script_id"] for c in attempts if c.request["sender_pid"] in paused
                 and c.request["time"] < p.time and (c.response is None or c.response["time"] > p.time)}
        judged += len(owned)
        for c in attempts:
            if (c.request.get("script_id") in owned and p.time < c.request["time"] < until
                    and c.request["sender_pid"] not in paused):
                problems.append(f"script {c.request['script_id']}: request {c.request.get('request_id')} from pid "
                                f"{c.request['sender_pid']} while its owner (pid {sorted(paused)}) was paused, alive")
    if problems:
        return [_result("REC-12", Verdict.INVALID, problems[0], problems)]
    if not judged:
        return [_result("REC-12", Verdict.UNKNOWN, "the paused process had no provider request open")]
    return [_result("REC-12", Verdict.VALID, f"{judged} work item(s) kept by their paused owner, none replaced")]


OWNER_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (kit_evidence(check_one_sender),
                                                                       kit_evidence(check_paused_owner_kept))
