"""Background-Job checks (profile ``jobs``): subtasks, their quota and their results, from the kit's own evidence
where it has any.

A Job is what the kit asked for (``job_start`` in its history): the caller, the session, the subtasks it
authorized (each names a provider script of the kit's) and the concurrency quota. The provider's ledger then
shows every request each subtask's model got, and every request of the Job's own script, with the texts they
carried:

- JOB-01 (kit): a subtask whose script is asked for its first step again after its conversation had gone on was
  started anew: an additional subtask no one authorized (a recovered child goes on from where it was); and at no
  moment run more of a Job's subtasks than its quota (a subtask runs from its first request until its last step's
  answer was delivered);
- FA-07 (kit): no request of the Job carries a subtask's answer twice (the kit knows the text: it sent it), and
  the Job's last request carries the answer of each subtask finished by then;
- JOB-02 (the runtime's word): in every observation, the Job and its subtasks keep the provenance of the caller
  the kit named at ``job_start``, also after a restart (a later request of the caller's session is not it);
- JOB-04 (the runtime's word, matched to the kit's ledger): every receipt of a request of a Job's scripts, also
  one made after a restart, carries that Job (``usage_receipts[].job_id``, protocol 1.3);
- JOB-03 (the runtime's word): a Job started from another session than its caller's has no canonical parent
  (``parent_id`` null); that it keeps the caller's provenance is JOB-02's (one bug, one clause: D21).

A run without an acknowledged ``job_start`` says nothing: unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement, _result, kit_evidence
from recoverykit.conformance.provider_ledger import Call, calls
from recoverykit.conformance.provider_script import SCRIPT_TAG_RE
from recoverykit.model.catalogue import Verdict

INF = float("inf")


@dataclass
class Job:
    """One Job the kit started, as it asked for it."""

    job_id: str
    caller: str
    session: str
    quota: int
    script: str | None
    subtasks: list[str]  # the subtasks' script ids, in order
    caller_session: str | None = None
    requests: dict[str, list[Call]] = field(default_factory=dict)  # script id -> its calls, in order


def _tag(text: Any) -> str | None:
    found = SCRIPT_TAG_RE.search(text) if isinstance(text, str) else None
    return found.group(1) if found else None


def jobs(ev: Evidence) -> list[Job]:
    sessions = {done.value.get("work_id"): invoke.value.get("session_id") for invoke, done in ev.history.completions()
                if invoke.f == "submit" and done is not None and done.type == "ok"}
    by_script: dict[str, list[Call]] = {}
    for c in calls(ev.ledger):
        by_script.setdefault(c.request.get("script_id") or "", []).append(c)
    out = []
    for invoke, done in ev.history.completions():
        if invoke.f != "job_start" or done is None or done.type != "ok":
            continue
        v = invoke.value
        subtasks = [t for t in (_tag(s) for s in v.get("subtasks") or []) if t]
        job = Job(done.value.get("job_id"), v.get("caller_work_id"), v.get("session_id"),
                  int(v.get("concurrency") or 1), _tag(v.get("text")), subtasks, sessions.get(v.get("caller_work_id")))
        job.requests = {s: by_script.get(s, []) for s in [*subtasks, job.script or ""]}
        out.append(job)
    return out


def _answer(cs: list[Call]) -> tuple[float, str | None]:
    """When a subtask's last step was answered whole, and the text it was given (INF, None: never)."""
    for c in cs:
        steps = c.request.get("script_steps")
        if c.delivered and steps is not None and c.request.get("step") == steps - 1:
            return c.response.get("time", INF), c.response.get("text_sent")
    return INF, None


@kit_evidence
def check_subtasks(ev: Evidence) -> list[ClauseResult]:
    """JOB-01 from the provider's ledger: subtasks started once each, never more of them at once than the quota."""
    found = jobs(ev)
    if not found:
        return [_result("JOB-01", Verdict.UNKNOWN, "no Job was started")]
    problems, judged = [], 0
    for job in found:
        spans = []
        for sid in job.subtasks:
            cs = job.requests.get(sid) or []
            if not cs:
                continue
            judged += 1
            went_on = False
            for c in cs:
                step = c.request.get("step") or 0
                if step == 0 and went_on:
                    problems.append(f"Job {job.job_id}: subtask {sid} was started again from its first step (request "
                                    f"{c.seq}) after its conversation had gone on: a subtask no one authorized")
                    went_on = False
                went_on = went_on or step > 0
            spans.append((cs[0].request.get("time", INF), _answer(cs)[0], sid))
        for begin, _, sid in spans:
            running = [s for b, e, s in spans if b <= begin < e]
            if len(running) > job.quota:
                problems.append(f"Job {job.job_id}: {len(running)} subtasks ran at once ({', '.join(running)}) when "
                                f"{sid} started, over its quota of {job.quota}")
    return _judgement("JOB-01", problems, judged, "no subtask of a Job reached the provider",
                      f"{judged} subtask(s) started once each, within their Job's quota")


@kit_evidence
def check_delivery(ev: Evidence) -> list[ClauseResult]:
    """FA-07 from the provider's ledger: each subtask's answer reaches its Job's model once."""
    found = jobs(ev)
    if not found:
        return [_result("FA-07", Verdict.UNKNOWN, "no Job was started")]
    problems, judged = [], 0
    for job in found:
        own = job.requests.get(job.script or "") or []
        answers = {sid: _answer(job.requests.get(sid) or []) for sid in job.subtasks}
        for c in own:
            heads = [m.get("head") or "" for m in c.request.get("messages") or []]
            for sid, (_, text) in answers.items():
                if not text:
                    continue
                n = sum(text in h for h in heads)
                if n > 1:
                    problems.append(f"Job {job.job_id}: request {c.seq} of its model carries subtask {sid}'s "
                                    f"answer {n} times: a child's result delivered twice")
        if own:
            last = own[-1]
            shapes = last.request.get("messages") or []
            heads = [m.get("head") or "" for m in shapes]
            # a message longer than the ledger's head may carry a result beyond it: absence is then not seen
            hidden = any((m.get("len") or 0) > len(m.get("head") or "") for m in shapes)
            for sid, (at, text) in answers.items():
                if text and at < last.request.get("time", 0) and (not hidden or any(text in h for h in heads)):
                    judged += 1
                    if not any(text in h for h in heads):
                        problems.append(f"Job {job.job_id}: its last request {last.seq} does not carry subtask {sid}'s "
                                        "answer, though the subtask had finished: a child's result not delivered")
    return _judgement("FA-07", problems, judged, "no Job asked its model after a subtask finished",
                      f"{judged} subtask result(s) delivered to their Job once")


def check_provenance(ev: Evidence) -> list[ClauseResult]:
    """JOB-02 and JOB-03 on the runtime's own account of its Jobs (``work_items``)."""
    found = jobs(ev)
    if not found:
        return [_result(c, Verdict.UNKNOWN, "no Job was started") for c in ("JOB-02", "JOB-03")]
    kept, kept_judged, parents, parents_judged = [], 0, [], 0
    for job in found:
        cross = job.caller_session is not None and job.caller_session != job.session
        for o in ev.snapshots():
            items = o.snapshot.get("work_items")
            if not items:
                continue
            mine = [w for w in items if w.get("work_id") == job.job_id or w.get("parent_id") == job.job_id]
            if not mine or any("provenance" not in w for w in mine):
                continue  # not reported: the runtime's word is missing, not given
            kept_judged += 1
            for w in mine:
                if w.get("provenance") != job.caller:
                    what = "the Job" if w["work_id"] == job.job_id else f"a subtask of {job.job_id}"
                    kept.append(f"observation {o.index}: {w['work_id']} ({what}) has provenance "
                                f"{w.get('provenance')!r}, but its caller was {job.caller}")
            top = next((w for w in mine if w.get("work_id") == job.job_id), None)
            if cross and top is not None:
                parents_judged += 1
                if top.get("parent_id") is not None:
                    parents.append(f"observation {o.index}: Job {job.job_id} in session {job.session} has the "
                                   f"canonical parent {top['parent_id']!r} in session {job.caller_session}")
    return [*_judgement("JOB-02", kept, kept_judged, "no observation reported a Job's provenance",
                        f"{kept_judged} observation(s): every Job and subtask kept its caller's provenance"),
            *_judgement("JOB-03", parents, parents_judged, "no cross-session Job was observed",
                        f"{parents_judged} observation(s) of a cross-session Job: no canonical parent")]


def check_receipts(ev: Evidence) -> list[ClauseResult]:
    """JOB-04: every attempt of a Job's scripts on the provider's wire (the kit's ledger) has, in the last
    observation, its receipt carrying that Job (the runtime's word, since 1.3), also those of attempts made after
    a restart: metering rebuilt from receipts, not from a governor's memory."""
    found = jobs(ev)
    last = next((o for o in reversed(ev.snapshots()) if o.snapshot.get("usage_receipts") is not None), None)
    if not found or last is None:
        return [_result("JOB-04", Verdict.UNKNOWN, "no Job was started" if not found else "no receipt observed")]
    receipts = last.snapshot["usage_receipts"]
    if not any("job_id" in r for r in receipts):
        return [_result("JOB-04", Verdict.UNKNOWN, "receipts carry no job_id (protocol 1.3, optional)")]
    by_request = {str(r.get("request_id")): r for r in receipts}
    problems, judged = [], 0
    for job in found:
        for sid, cs in job.requests.items():
            for c in cs:
                r = by_request.get(str(c.request.get("request_id"))) \
                    or by_request.get(str(c.request.get("response_id")))
                if r is None:
                    continue  # a missing receipt is USG-01's
                judged += 1
                if r.get("job_id") != job.job_id:
                    problems.append(f"receipt {r.get('receipt_id')} of {sid}'s request {c.seq} carries Job "
                                    f"{r.get('job_id')!r}, not {job.job_id}: the Job's metering cannot be rebuilt")
    return _judgement("JOB-04", problems, judged, "no receipt of a Job's request was observed",
                      f"{judged} receipt(s) of Job requests carry their Job")


JOB_CHECKS = (check_subtasks, check_delivery, check_provenance, check_receipts)
