"""Recovery decisions as a client sees them: one mode per decision, continuation keys, and original records.

Seed 000 (Interruption recovery, step 3; Automatic recovery contract, steps 4-6): a recovery either continues
the interrupted turn from a safe checkpoint or repairs it (placeholders under a stable repair key, the old turn
ended interrupted) and admits a new turn, never both; the continuation binds to one control version and one
continuation key, stable across restarts; derived views never overwrite original records. The observe snapshot
shows each turn (its predecessor, continuation key and status), each tool call (its repair key) and each work
item (its control version); what a turn's key is derived from is the runtime's business (it is opaque), but
whether it stays the same and whether a turn outlives its control version is visible:

- REC-11: a turn is continued by at most one new turn, and once the runtime settled a turn is never still active
  beside the new turn continuing it, nor completed its work item while that new turn sat active (a checkpoint
  resumed while a new turn was started). A turn completed and then continued is no violation (a Goal's next
  turn continues a completed one);
- REC-14: a turn ended interrupted has a repair key on every call it left with an unknown outcome, and if its
  work item went on to finish, a new turn continued it;
- REC-05: a turn's continuation key never changes once shown, across every observation and restart;
- REC-15: a turn runs under one control version only: a turn last seen active under one version of its work
  item never completes under another (after a Pause and Resume, the continuation is a new turn, a new key);
- UI-02 / UI-03: an original record once shown is never overwritten afterwards by a cleanup or a derived view:
  an accepted input's text, a turn's terminal status (completed or interrupted), a committed tool result.

- UI-01: the versions a client rebuilds from move forward only: a work item's control version never goes back,
  across every observation and restart, a user's control that changed its run intent (to or from paused or
  cancelled) came with a new version, and the versions the runtime replied to the kit's own Pause, Resume and
  End never go back, nor does a control of another kind reuse the version of the one before it;
- FA-09: a work item whose completion was committed before a restart (shown finished) is not run again after it,
  and the runtime converges to that completion: the provider gets no new request of its script and no probe of
  its script runs again (the kit's ledger and witness log); no new turn is admitted for it and, once settled, it
  is shown finished (observe).

All but FA-09's ledger and witness part is what the runtime reports about itself (observe); a clause whose
records the run never showed (no restart, no interrupted turn, no control change while a turn ran, no completion
committed before a restart) is unknown.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, kit_evidence
from recoverykit.conformance.history import Fault, Observation, restarts
from recoverykit.conformance.provider_ledger import calls
from recoverykit.model.catalogue import Verdict

_TERMINAL = ("completed", "interrupted")


def _turns(o: Observation) -> list[dict[str, Any]]:
    return o.snapshot.get("turns") or []


def _verdict(clause_id: str, problems: list[str], judged: int, nothing: str) -> ClauseResult:
    if problems:
        return _result(clause_id, Verdict.INVALID, problems[0], problems)
    if not judged:
        return _result(clause_id, Verdict.UNKNOWN, nothing)
    return _result(clause_id, Verdict.VALID, f"{judged} judged")


def check_recovery_modes(ev: Evidence) -> list[ClauseResult]:
    """REC-11 exactly one recovery mode per decision; REC-14 repair-and-new-turn fills, ends and admits."""
    final = ev.history.final_observation()
    turns = None if final is None else final.snapshot.get("turns")
    if turns is None or not restarts(ev.history):
        why = "turns not observed" if turns is None else "the run never restarted, so nothing was recovered"
        return [_result(i, Verdict.UNKNOWN, why) for i in ("REC-11", "REC-14")]
    modes, repairs = [], []
    continued = 0
    reported: set[str] = set()
    for o in ev.snapshots():
        successors: dict[str, list[str]] = defaultdict(list)
        by_id = {t["turn_id"]: t for t in _turns(o)}
        finished = {w["work_id"] for w in o.snapshot.get("work_items") or [] if w.get("status") == "finished"}
        for t in _turns(o):
            if t.get("predecessor") is not None:
                successors[t["predecessor"]].append(t["turn_id"])
        for old, new in successors.items():
            continued += 1
            status = (by_id.get(old) or {}).get("status")
            live = [n for n in new if by_id[n].get("status") == "active"]
            problem = None
            if len(new) > 1:
                problem = f"turn {old} is continued by {len(new)} turns {sorted(new)}"
            elif o.quiescent and status == "active" and live:
                problem = f"turn {old} and the new turn {live[0]} continuing it are both active once settled"
            elif o.quiescent and status == "completed" and live and by_id[old]["work_id"] in finished:
                problem = (f"turn {old} completed its work item while the new turn {live[0]} continuing it was "
                           "admitted and never ran")
            if problem and old not in reported:
                reported.add(old)
                modes.append(f"observation {o.index}: {problem}: a checkpoint resumed and a new turn started "
                             "together")
    calls = final.snapshot.get("tool_calls")
    items = {w["work_id"]: w for w in final.snapshot.get("work_items") or []}
    interrupted = [t for t in turns if t.get("status") == "interrupted"]
    # the protocol's predecessor links a new turn to the one it continues; a runtime that leaves it null still
    # admitted a new turn if another turn of the item completed (the seed asks for the new turn, not the link)
    followed = {t.get("predecessor") for t in turns}
    completed = {t["work_id"] for t in turns if t.get("status") == "completed"}
    if calls is not None:
        for t in interrupted:
            for c in calls:
                # only an unknown outcome is certainly a missing output: a call shown never_started may carry a
                # refusal of its own (a tool the turn may not run), which observe cannot tell apart
                if c.get("turn_id") == t["turn_id"] and c.get("status") == "outcome_unknown" \
                        and not c.get("repair_key"):
                    repairs.append(f"call {c['call_id']} of interrupted turn {t['turn_id']} is {c['status']} with "
                                   "no repair key: its missing output was not filled under a stable key")
            it = items.get(t["work_id"])
            if it is not None and it.get("status") == "finished" and t["turn_id"] not in followed \
                    and t["work_id"] not in completed:
                repairs.append(f"turn {t['turn_id']} ended interrupted and {t['work_id']} finished, yet no new turn "
                               "continued it")
    return [_verdict("REC-11", modes, continued, "no turn was continued by another"),
            _verdict("REC-14", repairs, len(interrupted) if calls is not None else 0,
                     "no turn ended interrupted (or tool_calls not observed)")]


def check_continuation_keys(ev: Evidence) -> list[ClauseResult]:
    """REC-05 a turn's continuation key is stable across observations and restarts; REC-15 a turn lives under
    one control version: a control that moved its work item's version ends its continuation."""
    observed = [o for o in ev.snapshots() if o.snapshot.get("turns") is not None]
    if not observed:
        return [_result(i, Verdict.UNKNOWN, "turns not observed") for i in ("REC-05", "REC-15")]
    keys: dict[str, tuple[str, int]] = {}
    changed: list[str] = []
    stable = 0
    active_at: dict[str, tuple[int, int]] = {}  # turn -> (control version, observation) last seen active
    first_cv: dict[str, int] = {}  # turn -> the control version it was first seen active under
    outlived: list[str] = []
    bound = 0
    reported: set[str] = set()
    for o in observed:
        versions = {w["work_id"]: w.get("control_version") for w in o.snapshot.get("work_items") or []}
        for t in _turns(o):
            tid, key = t["turn_id"], t.get("continuation_key")
            if key is not None:
                if tid in keys and keys[tid][0] != key and tid not in reported:
                    reported.add(tid)
                    changed.append(f"turn {tid} had continuation key {keys[tid][0]!r} at observation {keys[tid][1]} "
                                   f"and {key!r} at observation {o.index}")
                elif tid in keys:
                    stable += 1
                keys.setdefault(tid, (key, o.index))
            cv = versions.get(t["work_id"])
            if cv is None:
                continue
            seen = active_at.get(tid)
            status = t.get("status")
            # a turn may stay active after a control is acknowledged (its owner learns of it at its next durable
            # check, or died before it did: a stale record of a dead owner continues nothing); completing under
            # the new version is the old continuation going on under a version it was not admitted for
            if seen is not None and status != "active" and (seen[0] != cv or first_cv.get(tid, cv) != cv):
                bound += 1  # a turn that ran while a control changed its item's version, seen ending
                if status == "completed" and seen[0] != cv and tid not in reported:
                    reported.add(tid)
                    outlived.append(f"turn {tid} was active under control version {seen[0]} (observation {seen[1]})"
                                    f" and is {status} under version {cv} (observation {o.index}): it "
                                    "outlived the control that changed its version")
            if status == "active":
                active_at[tid] = (cv, o.index)
                first_cv.setdefault(tid, cv)
            else:
                active_at.pop(tid, None)
    moved = [o for o in observed if o is not observed[0]]
    return [_verdict("REC-05", changed, stable if restarts(ev.history) and moved else 0,
                     "no keyed turn observed twice across a restart"),
            _verdict("REC-15", outlived, bound, "no control changed a work item's version while a turn of it ran")]


def check_originals(ev: Evidence) -> list[ClauseResult]:
    """UI-02 / UI-03: once shown, an original record is never overwritten: an accepted input, a turn's terminal status,
    a committed tool result."""
    first: dict[tuple[str, str], tuple[Any, int]] = {}
    problems: list[str] = []
    judged = 0
    for o in ev.snapshots():
        facts: list[tuple[tuple[str, str], Any]] = []
        for w in o.snapshot.get("work_items") or []:
            facts += [(("input", i["input_id"]), (i.get("client_msg_id"), i.get("text")))
                      for i in w.get("inputs") or []]
        facts += [(("turn", t["turn_id"]), t["status"]) for t in _turns(o) if t.get("status") in _TERMINAL]
        facts += [(("result", c["call_id"]), c["status"]) for c in o.snapshot.get("tool_calls") or []
                  if c.get("status") == "result_committed"]
        now = dict(facts)
        for k, (value, at) in first.items():
            if k[0] == "input" and o.snapshot.get("work_items") is None:
                continue
            if k[0] == "turn" and o.snapshot.get("turns") is None:
                continue
            if k[0] == "result" and o.snapshot.get("tool_calls") is None:
                continue
            judged += 1
            if k[0] == "turn":
                status = next((t["status"] for t in _turns(o) if t["turn_id"] == k[1]), None)
                if status != value:
                    problems.append(f"turn {k[1]} was {value} at observation {at} and is {status or 'gone'} at "
                                    f"observation {o.index}: an original record was overwritten")
            elif k[0] == "result":
                status = next((c["status"] for c in o.snapshot.get("tool_calls") or [] if c["call_id"] == k[1]),
                              None)
                if status != value:
                    problems.append(f"tool call {k[1]} had its result committed at observation {at} and is "
                                    f"{status or 'gone'} at observation {o.index}")
            elif now.get(k) != value:
                problems.append(f"input {k[1]} was {value} at observation {at} and is {now.get(k) or 'gone'} at "
                                f"observation {o.index}")
        for k, value in facts:
            first.setdefault(k, (value, o.index))
    # UI-02 (an orphan cleanup repairs only derived projections) and UI-03 (derived views never overwrite originals)
    # forbid the same thing a client can see: an original record changed after it was shown. Which derived code
    # path wrote it is the runtime's inside; both are broken by it.
    nothing = "no original record was observed twice"
    return [_verdict("UI-02", problems[:20], judged, nothing), _verdict("UI-03", problems[:20], judged, nothing)]


def _committed_before(ev: Evidence, fault: Fault) -> dict[str, set[str]] | None:
    """work_id -> the turn ids shown at the last observation before ``fault``, for every work item whose
    completion that observation shows committed (a completed turn, or the item finished); None if there was none."""
    before = next((o for o in reversed(ev.snapshots()) if o.index < fault.index), None)
    if before is None or before.snapshot.get("work_items") is None:
        return None
    turns = before.snapshot.get("turns") or []
    # the work item's own status, not a turn's: a runtime may complete several turns within one request
    done = {w["work_id"] for w in before.snapshot["work_items"] if w.get("status") == "finished"}
    return {w: {t["turn_id"] for t in turns if t["work_id"] == w} for w in done}


def _sole_script(ev: Evidence) -> dict[str, str]:
    """work_id -> its script, for scripts whose acknowledged submits all went to that one work item (a second work
    item on the same script could own a later request)."""
    from recoverykit.conformance.provider_script import SCRIPT_TAG_RE
    owners: dict[str, set[str]] = defaultdict(set)
    for invoke, done in ev.history.completions():
        if invoke.f == "submit" and done is not None and done.type == "ok":
            for script in SCRIPT_TAG_RE.findall(invoke.value.get("text", "")):
                owners[script].add(done.value["work_id"])
    return {next(iter(ws)): s for s, ws in owners.items() if len(ws) == 1}


@kit_evidence
def check_completion_not_rerun(ev: Evidence) -> list[ClauseResult]:
    """FA-09, from the kit's own records: no provider request and no probe run of a work item whose completion was
    committed before a restart, after that restart."""
    script_of = _sole_script(ev)
    problems: list[str] = []
    judged = 0
    for fault in restarts(ev.history):
        committed = _committed_before(ev, fault) or {}
        for work_id in committed:
            script = script_of.get(work_id)
            if script is None:
                continue
            judged += 1
            asked = [c.request.get("request_id") for c in calls(ev.ledger)
                     if c.request.get("script_id") == script and c.request.get("time", 0) > fault.time]
            if asked:
                problems.append(f"{work_id} was completed before the {fault.kind} (event {fault.index}) and asked the "
                                f"provider again after it: {asked[:3]}")
            ran = [e.probe_token for e in (ev.witness.executions if ev.witness else [])
                   if e.probe_token.startswith(f"{script}.") and e.started > fault.time]
            if ran:
                problems.append(f"{work_id} was completed before the {fault.kind} and ran its tools again: {ran[:3]}")
    return [_verdict("FA-09", problems, judged, "no work item of a known script was completed before a restart")]


def check_completion_converges(ev: Evidence) -> list[ClauseResult]:
    """FA-09, from observe: a completion committed before a restart stands after it: no new turn, finished."""
    final = ev.history.final_observation()
    if final is None or not final.quiescent or final.snapshot.get("work_items") is None:
        return [_result("FA-09", Verdict.UNKNOWN, "the run never settled with work items observed")]
    items = {w["work_id"]: w for w in final.snapshot["work_items"]}
    final_turns = final.snapshot.get("turns")
    problems: list[str] = []
    judged = 0
    for fault in restarts(ev.history):
        for work_id, known in (_committed_before(ev, fault) or {}).items():
            judged += 1
            it = items.get(work_id)
            if it is None or it.get("status") != "finished":
                problems.append(f"{work_id} was completed before the {fault.kind} (event {fault.index}) and is "
                                f"{(it or {}).get('status', 'gone')} once the runtime settled: it did not converge "
                                "to its committed completion")
            new = sorted(t["turn_id"] for t in final_turns or []
                         if t["work_id"] == work_id and t["turn_id"] not in known)
            if new:
                problems.append(f"{work_id} was completed before the {fault.kind} and new turns {new} were admitted "
                                "for it after: the work ran again")
    return [_verdict("FA-09", problems, judged, "no work item was completed before a restart")]


_CONTROLLED = {"paused", "cancelled"}


def check_monotonic_versions(ev: Evidence) -> list[ClauseResult]:
    """UI-01: control versions only move forward, and every change of run intent by a control has its own."""
    last: dict[str, tuple[int, str, int]] = {}  # work_id -> (control version, desired_state, observation)
    problems: list[str] = []
    judged = 0
    for o in ev.snapshots():
        for w in o.snapshot.get("work_items") or []:
            cv, desired = w.get("control_version"), w.get("desired_state")
            if not isinstance(cv, int):
                continue
            before = last.get(w["work_id"])
            last[w["work_id"]] = (cv, desired, o.index)
            if before is None:
                continue
            judged += 1
            if cv < before[0]:
                problems.append(f"{w['work_id']}: control version {before[0]} at observation {before[2]}, {cv} at "
                                f"observation {o.index}: it went back")
            elif cv == before[0] and desired != before[1] and (_CONTROLLED & {desired, before[1]}):
                problems.append(f"{w['work_id']}: desired_state went from {before[1]} to {desired} between "
                                f"observations {before[2]} and {o.index} under the same control version {cv}")
    # the versions the runtime replied to the kit's own controls, in the order it acknowledged them: a control
    # of another kind (a Resume after a Pause) under the same or an older version cannot be ordered after it
    replied: dict[str, tuple[str, int, int]] = {}
    for invoke, done in ev.history.completions():
        if invoke.f not in ("pause", "resume", "end") or done is None or done.type != "ok":
            continue
        work_id, cv = invoke.value.get("work_id"), done.value.get("control_version")
        if not isinstance(cv, int):
            continue
        before = replied.get(work_id)
        replied[work_id] = (invoke.f, cv, done.index)
        if before is None:
            continue
        judged += 1
        if cv < before[1] or (cv == before[1] and invoke.f != before[0]):
            problems.append(f"{work_id}: {before[0]} was acknowledged with control version {before[1]} (op "
                            f"{before[2]}) and the later {invoke.f} with {cv} (op {done.index})")
    return [_verdict("UI-01", problems, judged, "no work item was observed twice")]


DECISION_CHECKS = (check_monotonic_versions, check_recovery_modes, check_continuation_keys, check_originals,
                   check_completion_not_rerun, check_completion_converges)
