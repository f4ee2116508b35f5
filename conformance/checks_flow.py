"""Flow checks: what the runtime did next, judged from the scripted provider's ledger (evidence the kit owns).

Every provider attempt names its script and step (the kit's tag in the user's text picks the script; the
provider counts the steps it answered), so the kit sees, without asking the runtime, when a work item
asked for what:

- RI-04: finished work stays finished: once every work item of a script is observed finished, the provider
  never sees that script again (an ordinary request never becomes an indefinite Goal);
- CTL-07: a stop the user got acknowledged wins the race with admission: after the acknowledgement the
  item may finish the one step it had in flight, but no new step of it is requested;
- REC-09: after a forced shutdown, recovery proceeds from the last committed records: a step whose answer
  the runtime had committed before the kill (its tool call was on record) is never requested again;
- CTL-04: graceful shutdown saves checkpoints: a step requested before a graceful restart began and answered
  whole (before it, or while the runtime was shutting down) is never
  requested again after it.

Evidence the run did not produce (nothing finished, no stop, no fault) gives ``unknown``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, kit_evidence
from recoverykit.conformance.checks_crosscheck import _restarts, _verdict, _work_of_scripts
from recoverykit.conformance.provider_ledger import Call, calls
from recoverykit.conformance.provider_script import SCRIPT_TAG_RE

GRACEFUL = {"normal_exit", "graceful_worker_restart"}
_STOPS = ("pause", "end", "stop_all")


def _by_script(ev: Evidence) -> dict[str, list[Call]]:
    out: dict[str, list[Call]] = defaultdict(list)
    for c in calls(ev.ledger):
        if c.request.get("script_id"):
            out[c.request["script_id"]].append(c)
    return out


def _submits_of(ev: Evidence, script_id: str) -> list[float]:
    """When each submit tagged with ``script_id`` was invoked (a later submit may legitimately revive it)."""
    from recoverykit.conformance.provider_script import script_tag
    tag = script_tag(script_id)
    return [op.time for op in ev.history.ops if op.type == "invoke" and op.f == "submit"
            and tag in str(op.value.get("text", ""))]


def check_finished_stays_finished(ev: Evidence) -> list[ClauseResult]:
    """RI-04: a finished request is not continued.

    Two ways the kit sees it: the provider gets an attempt of a script after the script's last step was
    answered (a step the script does not have: the runtime went on asking after the request finished), or
    after every work item of the script was observed finished.
    """
    owners = _work_of_scripts(ev)
    ledger = _by_script(ev)
    problems, judged = [], 0
    for script_id, attempts in ledger.items():
        if len(_submits_of(ev, script_id)) != 1:
            continue  # a second input to it is a new request
        last = [c for c in attempts if c.delivered and c.request.get("script_steps") is not None
                and c.request.get("step") == c.request["script_steps"] - 1 and not c.response.get("probe_tokens")]
        if not last:
            continue
        judged += 1
        beyond = [c for c in attempts if c.request["time"] > last[0].response["time"]
                  and (c.request.get("step") or 0) >= c.request["script_steps"]]
        if beyond:
            problems.append(f"script {script_id}: its final answer (step {last[0].request.get('step')}) was delivered, "
                            f"and the runtime still asked for step {beyond[0].request.get('step')} "
                            f"({beyond[0].request.get('request_id')}): the finished request was continued")
    for script_id, work_ids in owners.items():
        finished_at = None
        for o in ev.snapshots():
            items = {w["work_id"]: w for w in o.snapshot.get("work_items") or []}
            if all(items.get(w, {}).get("status") == "finished" for w in work_ids):
                finished_at = o
                break
        if finished_at is None:
            continue
        if any(t > finished_at.time for t in _submits_of(ev, script_id)):
            continue  # a new input to it later: a new request, not a continuation
        judged += 1
        late = [c for c in ledger.get(script_id, []) if c.request["time"] > finished_at.time]
        if late:
            problems.append(f"{', '.join(sorted(work_ids))} was finished at observation {finished_at.index}, yet "
                            f"the provider then received {len(late)} more attempts of its script "
                            f"(first: step {late[0].request.get('step')}, {late[0].request.get('request_id')})")
    return [_verdict("RI-04", problems, judged, "no work item was observed finished")]


def check_stop_beats_admission(ev: Evidence) -> list[ClauseResult]:
    """CTL-07: after an acknowledged stop, nothing the runtime decides afterwards starts.

    Causal, so no race with the acknowledgement can make it flaky: an attempt of step s whose step s-1 was
    answered only after the stop was acknowledged, or a probe started for a tool call that arrived after it,
    was decided by a runtime that already held the stop durably (the in-flight step itself may finish).
    """
    breaches = stop_breaches(ev)
    problems = [p for _, _, found in breaches for p in found]
    return [_verdict("CTL-07", problems, len(breaches), "no stop was acknowledged for a work item the kit can follow")]


def stop_breaches(ev: Evidence) -> list[tuple[Any, str, list[str]]]:
    """(the stop's completion, work_id, what the runtime still started after it) for every acknowledged stop of
    a work item the kit can follow (the causal rule of CTL-07; FA-14 applies it to stops during recovery)."""
    owners = _work_of_scripts(ev)
    script_of = {w: s for s, ws in owners.items() for w in ws}
    ledger = _by_script(ev)
    resumes = [(i.value.get("work_id"), i.time) for i, d in ev.history.completions() if i.f == "resume"]
    executions = ev.witness.executions if ev.witness is not None else []
    out = []
    for invoke, done in ev.history.completions():
        if invoke.f not in _STOPS or done is None or done.type != "ok":
            continue
        stopped = done.value.get("stopped", []) if invoke.f == "stop_all" else [invoke.value.get("work_id")]
        for work_id in stopped:
            script_id = script_of.get(work_id)
            if script_id is None or len(owners[script_id]) > 1:
                continue  # the kit cannot tell which of the script's items sent an attempt
            until = min([t for w, t in resumes if w == work_id and t > done.time], default=float("inf"))
            attempts = ledger.get(script_id, [])
            answered_after = {c.request.get("step"): c for c in attempts if c.delivered
                              and done.time < c.response.get("time", 0) < until}
            problems = []
            for c in attempts:
                prev = answered_after.get((c.request.get("step") or 0) - 1)
                if prev is not None and c.request["time"] > prev.response["time"] and c.request["time"] < until:
                    problems.append(f"{work_id} was stopped ({invoke.f} acknowledged at op {done.index}); step "
                                    f"{prev.request.get('step')} was answered after that, and step "
                                    f"{c.request.get('step')} was still requested ({c.request.get('request_id')})")
            for e in executions:
                parts = e.probe_token.rsplit(".", 3)
                if len(parts) != 4 or parts[0] != script_id or not parts[1].isdigit():
                    continue
                cause = answered_after.get(int(parts[1]))
                if cause is not None and cause.response["time"] < e.started < until:
                    problems.append(f"{work_id} was stopped ({invoke.f} acknowledged at op {done.index}); its tool "
                                    f"call {e.probe_token} arrived after that and was still started (pid {e.pid})")
            out.append((done, work_id, problems))
    return out


def _stopped(ev: Evidence, work_id: str, at: float) -> bool:
    """May a user stop of ``work_id`` have stood at ``at``: acknowledged before it and not resumed since, or sent
    and answered by an indefinite error (it may have happened)? (An answer that arrives then may be dropped as
    stale: CTL-07; asking for it again after a Resume is no lost checkpoint.)"""
    from recoverykit.conformance.intent import intent_of
    return intent_of(ev.history).maybe_stopped(work_id, at_time=at)


def _repeated_after(ev: Evidence, fault, answered_before) -> list[str]:
    """Steps (per script) answered before ``fault`` and requested again after it."""
    out = []
    # a Paperclip task's runs all ask the task's one request: a later run (a Retry, a scheduled retry) is a new
    # attempt the user or the policy asked for, not a lost checkpoint (checks_paperclip judges those runs)
    tasks = {t for i, _ in ev.history.completions() if i.f == "task_create"
             for t in SCRIPT_TAG_RE.findall(i.value.get("text", ""))}
    for script_id, attempts in _by_script(ev).items():
        if script_id in tasks:
            continue
        done_steps = {c.request.get("step") for c in attempts if answered_before(c)}
        again = [c for c in attempts if c.request["time"] > fault.time and c.request.get("step") in done_steps]
        out += [f"script {script_id} step {c.request.get('step')} was answered before the {fault.kind} "
                f"(event {fault.index}) and requested again after it ({c.request.get('request_id')})" for c in again]
    return out


def check_recovery_from_committed(ev: Evidence) -> list[ClauseResult]:
    """REC-09 (kills) and CTL-04 (graceful restarts): no committed or answered step is asked again."""
    owners = _work_of_scripts(ev)
    script_of = {w: s for s, ws in owners.items() for w in ws}
    forced, graceful = [], []
    judged_forced = judged_graceful = 0
    for fault in _restarts(ev):
        if fault.kind in GRACEFUL:
            # an answer delivered whole (through [DONE]) before the graceful restart began, while the user wanted
            # it to run: a checkpoint the runtime held when shutdown began. One still streaming then may be dropped
            # unread by a runtime that stops reading at shutdown (chaos saw one finish 0.4 ms after the restart
            # began, sessions_together/tool.result.commit.before x normal_exit): no checkpoint of its
            def answered(c: Call, fault=fault) -> bool:
                return (c.delivered and c.response["time"] < fault.time
                        and not any(_stopped(ev, w, c.response["time"]) for w in owners.get(c.request.get("script_id"),
                                                                                            ())))
            attempts = [c for c in calls(ev.ledger) if answered(c)]
            if attempts:
                judged_graceful += 1
                graceful += _repeated_after(ev, fault, answered)
            continue
        before = next((o for o in reversed(ev.snapshots()) if o.index < fault.index), None)
        if before is None:
            continue
        # A tool call on record means the answer that asked for it was committed: that step is a checkpoint.
        on_record: dict[str, int] = defaultdict(int)
        for c in before.snapshot.get("tool_calls") or []:
            script_id = script_of.get(c["work_id"])
            if script_id is not None and len(owners[script_id]) == 1:
                on_record[script_id] += 1
        committed: set[int] = set()  # ledger seqs of the tool steps those calls came from, in step order
        for script_id, n in on_record.items():
            answered = sorted((c for c in _by_script(ev).get(script_id, []) if c.delivered
                               and c.request["time"] < fault.time and c.response.get("probe_tokens")),
                              key=lambda c: c.request.get("step") or 0)
            for c in answered:
                if n <= 0:
                    break
                committed.add(c.seq)
                n -= len(c.response["probe_tokens"])
        if not committed:
            continue
        judged_forced += 1
        forced += _repeated_after(ev, fault, lambda c, committed=committed: c.seq in committed)
    return [_verdict("REC-09", forced, judged_forced, "no kill came after a tool call was on record"),
            _partial(_verdict("CTL-04", graceful, judged_graceful, "no graceful restart came after an answered step"),
                     "judged: checkpoints saved; that admission stopped first needs the process behind each "
                     "request, which the ledger does not name yet")]


def _partial(result: ClauseResult, what: str) -> ClauseResult:
    """Say in a valid verdict which part of the clause the evidence covered."""
    if result.verdict.value != "valid":
        return result
    return ClauseResult(result.clause_id, result.verdict, f"{result.text[:-1]}; {what})", result.evidence)


FLOW_CHECKS = tuple(kit_evidence(fn) for fn in (check_finished_stays_finished, check_stop_beats_admission,
                                               check_recovery_from_committed))
