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

The same record judges the other ownership moments the kit creates: a repeated start (FA-13), a paused owner
(REC-12) and, if someone took its work, the old owner's silence once let go on (OWN-06), a client disconnect
(OWN-05), and a host identity change and back (OWN-03, FA-02).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement, _result, kit_evidence
from recoverykit.conformance.history import restarts
from recoverykit.conformance.provider_ledger import calls
from recoverykit.model.catalogue import Verdict

TOLERANCE_S = 0.25


def _overlaps(attempts: list, fault_times: list[float]) -> list[str]:
    """Two senders of one script with requests open at once and no fault between (see the module doc)."""
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
    return problems


def check_one_sender(ev: Evidence) -> list[ClauseResult]:
    attempts = [c for c in calls(ev.ledger) if c.request.get("script_id") and c.request.get("sender_pid")]
    if not attempts:
        return [_result("OWN-02", Verdict.UNKNOWN, "no provider request with a known sender")]
    fault_times = sorted(f.time for f in restarts(ev.history))  # a paused process is alive: no excuse
    problems = _overlaps(attempts, fault_times)
    if problems:
        return [_result("OWN-02", Verdict.INVALID, problems[0], problems)]
    senders = {(c.request["sender_pid"], c.request.get("sender_create_time")) for c in attempts}
    return [_result("OWN-02", Verdict.VALID, f"{len(attempts)} provider request(s) from {len(senders)} process(es), "
                    "never two at once for one work item (the provider's record of who called it)")]


def check_repeated_start(ev: Evidence) -> list[ClauseResult]:
    """FA-13: recovering several sessions together keeps one owner per work item and executes nothing twice
    because a notification was repeated. The kit repeats the notification itself (a second ``start`` with no
    fault between); from then on (counting requests still open when it came) no model step is delivered twice,
    no probe call runs twice and no two processes have one script's requests open at once."""
    from recoverykit.conformance.checker import _logical_call
    starts = [op for op in ev.history.ops if op.type == "invoke" and op.f == "start"]
    faults = restarts(ev.history)
    repeated = next((b for a, b in pairwise(starts)
                     if not any(a.index < f.index < b.index for f in faults)), None)
    if repeated is None:
        return [_result("FA-13", Verdict.UNKNOWN, "no start was repeated")]
    # what was asked after it, and what was still open when it came (a held request it may have led to duplicate);
    # not a request whose sender a fault had already killed: its late answer went to no owner the start could double
    dead = {pid for f in faults if f.time <= repeated.time
            for pid in f.detail.get("killed") or f.detail.get("pids") or []}
    after = [c for c in calls(ev.ledger) if c.request.get("script_id") and (
        c.request["time"] > repeated.time or c.response is None or c.response["time"] > repeated.time)
        and not (c.request["time"] <= repeated.time and c.request.get("sender_pid") in dead)]
    problems = []
    delivered: dict[tuple, int] = {}
    for c in after:
        if c.delivered:
            key = (c.request["script_id"], c.request.get("step"))
            delivered[key] = delivered.get(key, 0) + 1
    problems += [f"script {s} step {st} delivered {n} times after the repeated start" for (s, st), n in
                 delivered.items() if n > 1]
    if ev.witness is not None:
        runs: dict[tuple, list] = {}
        for e in ev.witness.executions:
            if e.started > repeated.time:
                runs.setdefault(_logical_call(e.probe_token), []).append(e)
        problems += [_ran_twice(k, mine, repeated, ev.history) for k, mine in runs.items() if len(mine) > 1]
    sent = [c for c in after if c.request.get("sender_pid")]
    problems += _overlaps(sent, [f.time for f in faults])  # a request left open by a killed process is no owner
    if problems:
        return [_result("FA-13", Verdict.INVALID, problems[0], problems)]
    if not after:
        return [_result("FA-13", Verdict.UNKNOWN, "no provider request followed the repeated start")]
    return [_result("FA-13", Verdict.VALID, f"{len(after)} request(s) after the repeated start: no step delivered "
                    "twice, no probe call run twice, one sender per work item at a time")]


def _ran_twice(key: tuple, runs: list, repeated, history) -> str:
    """Which processes ran one probe call more than once after the repeated start (the witness log's pids: the
    probe's own and the runtime process that spawned it), and whether the runs straddle a start, with what the
    kit did between them (a fault, a cancel, ...): a double run by one worker after a cancel is not the repeated
    start's doing, and the message must not point there."""
    runs = sorted(runs, key=lambda e: e.started)
    first, last = runs[0].started, runs[-1].started
    who = ", ".join(f"pid {e.pid}" + (f" (spawned by pid {e.ppid})" if e.ppid else "") for e in runs)
    between = [f"the {f.kind} at event {f.index}" for f in history.faults if first < f.time < last]
    between += [f"the {op.f} at event {op.index}" for op in history.ops
                if op.type == "invoke" and op.f != "observe" and first < op.time < last]
    straddle = any(op.type == "invoke" and op.f == "start" and first < op.time < last for op in history.ops)
    owners = {e.ppid for e in runs if e.ppid}
    same = f"one process (pid {owners.pop()}) ran it each time" if len(owners) == 1 else (
        f"{len(owners)} processes ran it" if owners else "")
    where = ("the runs straddle a start" if straddle else "the runs straddle no start") + (
        f" ({', '.join(between)} came between them)" if between else " (nothing the kit did came between them)")
    name = f"script {key[0]} step {key[1]} call {key[2]}" if isinstance(key, tuple) else str(key)
    return (f"probe call {name} ran {len(runs)} times after the repeated start (event {repeated.index}): {who}; "
            f"{where}" + (f"; {same}" if same else ""))


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


def check_superseded_owner_silent(ev: Evidence) -> list[ClauseResult]:
    """OWN-06: writes from an old generation are rejected once a newer generation owns the work item.

    Jepsen's pause nemesis gives the only moment an old generation is still alive: the kit paused (SIGSTOP) a
    process with a request of some script open. If another process then sent a request of that script while
    it was paused, a newer generation owns the work item; when the kit lets the old owner go on (SIGCONT) and
    its held answer arrives, it must be refused: the old owner never again sends a request of that script
    (its answer committed would be followed by the next step's request, or by a tool's run and then it). A
    runtime that never replaces a paused owner (REC-12) gives no newer generation here: unknown, not valid."""
    pauses = [f for f in ev.history.faults if f.kind == "process_pause"]
    if not pauses:
        return [_result("OWN-06", Verdict.UNKNOWN, "the kit paused no process")]
    conts = sorted(f.time for f in ev.history.faults if f.kind == "process_continue")
    attempts = [c for c in calls(ev.ledger) if c.request.get("script_id") and c.request.get("sender_pid")]
    judged, problems = [], []
    for p in pauses:
        until = next((t for t in conts if t > p.time), None)
        if until is None:
            continue  # never let go on: it could not write, so it proves nothing
        paused = set(p.detail.get("pids") or [])
        owned = {c.request["script_id"] for c in attempts if c.request["sender_pid"] in paused
                 and c.request["time"] < p.time and (c.response is None or c.response["time"] > p.time)}
        for script_id in sorted(owned):
            newer = [c for c in attempts if c.request["script_id"] == script_id
                     and p.time < c.request["time"] and c.request["sender_pid"] not in paused]
            if not newer:
                continue
            judged.append(script_id)
            took = min(c.request["time"] for c in newer)
            problems += [f"script {script_id}: pid {c.request['sender_pid']} (paused, then superseded by pid "
                         f"{newer[0].request['sender_pid']}) sent request {c.request.get('request_id')} after the "
                         "newer owner took the work: the old generation's writes were not rejected"
                         for c in attempts if c.request["script_id"] == script_id and c.request["sender_pid"] in paused
                         and c.request["time"] > max(took, until)]
    return _judgement("OWN-06", problems, len(judged), "no newer owner took a paused owner's work, so no old "
                      "generation was left to write", f"{len(judged)} work item(s) taken from a paused owner: the "
                      "old owner, let go on, sent nothing more for them")


def check_disconnect_not_death(ev: Evidence) -> list[ClauseResult]:
    """OWN-05: a disconnected connection alone is never taken as proof that a process died. The kit
    disconnects the one connection of the runtime's it holds without killing anything: its client's (a
    frontend reload, as an operation or as the restart kind ``frontend_reload``). Any process with a request
    open then is alive (the kit killed nothing); until a real kill, no other process may send a request of the
    same script while that request is still open (for longer than ``TOLERANCE_S``, the time a client that died
    by itself may go unnoticed): that would be the disconnect read as the owner's death."""
    disconnects = sorted([o.time for o in ev.history.ops if o.type == "invoke" and o.f == "reload"]
                         + [f.time for f in ev.history.faults if f.kind == "frontend_reload"])
    if not disconnects:
        return [_result("OWN-05", Verdict.UNKNOWN, "the kit disconnected no client")]
    kills = sorted(f.time for f in restarts(ev.history) if f.kind != "frontend_reload")
    attempts = [c for c in calls(ev.ledger) if c.request.get("script_id") and c.request.get("sender_pid")]
    judged, problems = 0, []
    for t in disconnects:
        until = next((k for k in kills if k > t), float("inf"))
        open_then = [c for c in attempts if c.request["time"] < t and (c.response is None or c.response["time"] > t)]
        judged += len(open_then)
        for a in open_then:
            end = min(a.response["time"] if a.response else float("inf"), until)
            problems += [f"script {a.request['script_id']}: pid {b.request['sender_pid']} sent request "
                         f"{b.request.get('request_id')} after the client disconnected, while pid "
                         f"{a.request['sender_pid']} (alive: the kit killed nothing) still had request "
                         f"{a.request.get('request_id')} open: the disconnect was taken for its death"
                         for b in attempts if b.request["script_id"] == a.request["script_id"]
                         and b.request["sender_pid"] != a.request["sender_pid"]
                         and t < b.request["time"] < end - TOLERANCE_S]
    return _judgement("OWN-05", problems, judged, "no request was open when the client disconnected",
                      f"{judged} request(s) open when the client disconnected: none replaced by another process "
                      "while its owner lived")


_USER_CONTROLS = {"pause", "resume", "end", "stop_all"}


def _host_starts(ev: Evidence) -> list[tuple[float, str]]:
    """(time, host id) of every start or restart the kit sent with a host id, in order."""
    return [(o.time, o.value["host_id"]) for o in ev.history.ops
            if o.type == "invoke" and o.f in ("start", "restart") and o.value.get("host_id")]


def _unfinished(attempts: list, before: float) -> set[str]:
    """Scripts with a request sent before ``before`` whose final answer was not delivered before it."""
    asked = {c.request["script_id"] for c in attempts if c.request["time"] < before}
    done = {c.request["script_id"] for c in attempts if c.delivered and c.response["time"] < before
            and c.request.get("script_steps") is not None and c.request.get("step") == c.request["script_steps"] - 1}
    return asked - done


def _death_times(ev: Evidence) -> dict[int, float]:
    """When the kit killed (or saw die at an armed crash) each pid: a process sends nothing after that."""
    out: dict[int, float] = {}
    for f in ev.history.faults:
        if f.kind not in ("process_pause", "process_continue"):
            for pid in f.detail.get("killed") or f.detail.get("pids") or []:
                out.setdefault(pid, f.time)
    return out


def check_host_change(ev: Evidence) -> list[ClauseResult]:
    """OWN-03 single-host recovery never silently becomes a cross-host takeover; FA-02 host-restart semantics
    through process-identity changes: work meant to run is recovered, never read as a Pause, never taken over.

    A script's owner host is the host identity the runtime was started under when its last request was sent.
    The kit started the runtime under another host identity while such work was unfinished (its owner died
    with every process): until the next start, no request of that work may reach the provider (the kit took
    no user action meanwhile, so any is silent). When the owner host's identity starts again (new processes,
    as after a reboot), the work is recovered: its final answer is delivered after that start, to a process
    that did not exist before; and no observation after the change shows it paused or cancelled."""
    starts = _host_starts(ev)

    def host_at(x: float) -> str | None:
        return next((h for t, h in reversed(starts) if t < x), None)

    changes = [(i, t, h) for i, ((_, prev), (t, h)) in enumerate(pairwise(starts), 1) if h != prev]
    if not changes:
        return [_result(c, Verdict.UNKNOWN, "the kit never started the runtime under another host identity")
                for c in ("OWN-03", "FA-02")]
    attempts = [c for c in calls(ev.ledger) if c.request.get("script_id") and c.request.get("sender_pid")]
    died = _death_times(ev)

    def sent(c) -> float:
        """The request's time, or its sender's death if the kit logged it later (under load it can): a killed
        process sent it before it died, under the host identity it was started with."""
        return min(c.request["time"], died.get(c.request["sender_pid"], float("inf")))

    takeovers, judged, recovered, lost, paused = [], [], [], [], []
    for i, t, host in changes:
        until = starts[i + 1][0] if i + 1 < len(starts) else float("inf")
        # a user's action may explain what follows it: judge only what the restarts alone did
        user = min((o.time for o in ev.history.ops if o.type == "invoke" and o.f in _USER_CONTROLS and o.time > t),
                   default=float("inf"))
        if user < until:
            continue
        owner = {}
        for c in sorted((c for c in attempts if sent(c) < t), key=sent):
            owner[c.request["script_id"]] = host_at(sent(c))
        away = {sc for sc in _unfinished(attempts, t) if owner.get(sc) not in (None, host)}
        judged += sorted(away)
        takeovers += [f"script {c.request['script_id']}: request {c.request.get('request_id')} from pid "
                      f"{c.request['sender_pid']} under host {host!r}, though its owner was on host "
                      f"{owner[c.request['script_id']]!r}: a silent cross-host takeover" for c in attempts
                      if c.request["script_id"] in away and t < sent(c) < until]
        for script_id in sorted(away):
            back = next((tb for tb, hb in starts[i + 1:] if hb == owner[script_id]), None)
            if back is None:
                continue
            old_senders = {c.request["sender_pid"] for c in attempts if c.request["time"] < back}
            final = [c for c in attempts if c.request["script_id"] == script_id and c.delivered
                     and c.request["time"] > back and c.request["sender_pid"] not in old_senders
                     and c.request.get("step") == (c.request.get("script_steps") or 0) - 1]
            if final:
                recovered.append(script_id)
            elif user == float("inf") and any(o.time > back for o in ev.snapshots()):  # waited for, in vain
                lost.append(script_id)
        work = {w for sc, w in ev.work_of_script().items() if sc in away}
        for o in ev.snapshots():
            if t < o.time < user:
                paused += [f"observation {o.index}: {w['work_id']} is {w['desired_state']} after the host identity "
                           "change, with no user stop" for w in o.snapshot.get("work_items") or []
                           if w["work_id"] in work and w.get("desired_state") in ("paused", "cancelled")
                           and not _stopped_by_user(ev, w["work_id"], o.time)]
    own = (_result("OWN-03", Verdict.INVALID, takeovers[0], takeovers) if takeovers else
           _result("OWN-03", Verdict.VALID, f"{len(judged)} unfinished work item(s) of another host: none asked "
                   "for under the new host identity") if judged else
           _result("OWN-03", Verdict.UNKNOWN, "no work of another host was unfinished when the host identity "
                                              "changed"))
    problems = takeovers + paused + [f"script {s} was not recovered after its host came back with new processes "
                                     "(its final answer not delivered by the kit's last observation)" for s in lost]
    if problems:
        return [own, _result("FA-02", Verdict.INVALID, problems[0], problems)]
    if not recovered:
        return [own, _result("FA-02", Verdict.UNKNOWN, "no unfinished work was seen recovered after its host "
                                                       "came back")]
    return [own, _result("FA-02", Verdict.VALID, f"{len(recovered)} work item(s) recovered by new processes after "
                         "their host came back; none taken over by the other host, none read as a Pause")]


def _stopped_by_user(ev: Evidence, work_id: str, before: float) -> bool:
    """Did the user ask to stop ``work_id`` (Pause, End, stop all) before ``before``, with no Resume since?"""
    last = None
    for o in ev.history.ops:
        if o.type == "invoke" and o.time < before and (o.f == "stop_all" or o.value.get("work_id") == work_id):
            last = o.f if o.f in ("pause", "end", "stop_all", "resume") else last
    return last in ("pause", "end", "stop_all")


OWNER_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (kit_evidence(check_one_sender),
                                                                       kit_evidence(check_paused_owner_kept),
                                                                       kit_evidence(check_repeated_start),
                                                                       kit_evidence(check_superseded_owner_silent),
                                                                       kit_evidence(check_host_change),
                                                                       kit_evidence(check_disconnect_not_death))
