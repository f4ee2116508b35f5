"""Temporary faults: a durable retry time and bounded backoff, never idle model calls (RES-03).

The scripted provider's ledger shows each attempt of a logical request (its script step) and how it ended. A
*temporary fault* is one the provider made: an answer 408 / 409 / 429 / 5xx, or a stream the script cut. The
runtime owns its retry policy, so the kit judges only what any bounded backoff implies, from its own record:

- the wait before a retry (the fault's end to the next attempt) never shrinks from one consecutive temporary
  fault of the same request to the next, beyond a jitter of ``JITTER`` of the wait before: backoff grows until
  its bound and stays there. A restart inside the wait changes nothing: once the runtime said it had scheduled
  the retry (``retry_scheduled`` in the last observation before the kill), the retry time is durable, and a
  restart that brings the retry forward lost it (a burst on restart). A restart before the runtime said so
  is recovery of an undecided attempt: that wait is not judged;
- while a request waits on its retry, the runtime makes no other model call for that conversation: the next
  request of the script after an error answer is the retry of the same step (after a cut stream a runtime may
  instead continue from the partial answer it kept: a new step, not judged).

That a wait has an upper bound cannot be seen in a finite run; it is not judged. Evidence the run did not
produce (no request with two consecutive temporary faults) gives ``unknown``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, kit_evidence
from recoverykit.conformance.checks_crosscheck import _restarts, _verdict, _work_of_scripts
from recoverykit.conformance.provider_ledger import Call, calls
from recoverykit.model.catalogue import Verdict

JITTER = 0.25  # a retry's wait may be this fraction shorter than the one before it (jitter), no more
TEMPORARY = (408, 409, 429)


def temporary(c: Call) -> bool:
    """Did the provider itself fail this attempt in a way worth retrying?"""
    if c.response is None:
        return False
    status = int(c.response.get("status") or 0)
    if status in TEMPORARY or status >= 500:
        return True
    return status == 200 and not c.delivered and str(c.response.get("cut") or "").startswith("scripted cut")


def _scheduled_before(ev: Evidence, work_ids: set[str], after: float, before: float) -> bool:
    """The last observation before ``before`` (and after ``after``) shows one of ``work_ids`` with a retry
    scheduled: the runtime's own word that the retry time is on record."""
    seen = [o for o in ev.snapshots() if after < o.time < before]
    if not seen:
        return False
    items = seen[-1].snapshot.get("work_items") or []
    return any(w.get("work_id") in work_ids and w.get("reason_code") == "retry_scheduled" for w in items)


def check_backoff(ev: Evidence) -> list[ClauseResult]:
    """RES-03: waits that never shrink across consecutive temporary faults, nor by a restart; no idle calls."""
    owners = _work_of_scripts(ev)
    by_script: dict[str, list[Call]] = defaultdict(list)
    for c in calls(ev.ledger):
        if c.request.get("script_id"):
            by_script[c.request["script_id"]].append(c)
    restarts = _restarts(ev)
    problems: list[str] = []
    judged = across = 0
    for script_id, seq in by_script.items():
        prev_wait: float | None = None
        for i, c in enumerate(seq):
            if not temporary(c):
                prev_wait = None
                continue
            nxt = seq[i + 1] if i + 1 < len(seq) else None
            if nxt is None:
                break
            step = c.request.get("step")
            if nxt.request.get("step") != step and int(c.response.get("status") or 0) != 200:
                problems.append(f"script {script_id}: after a temporary fault of step {step} (attempt "
                                f"{c.request.get('attempt')}, {_how(c)}) the next model call asked for step "
                                f"{nxt.request.get('step')}, not a retry: an idle model call while waiting")
                prev_wait = None
                continue
            if nxt.request.get("step") != step:  # a cut answer continued from its partial text: not a retry
                prev_wait = None
                continue
            end, retried = float(c.response["time"]), float(nxt.request["time"])
            wait = retried - end
            crossing = [f for f in restarts if end < f.time < retried]
            if crossing and not _scheduled_before(ev, owners.get(script_id, set()), end, crossing[0].time):
                prev_wait = None  # killed before the runtime said it had decided: recovery, not a backoff
                continue
            if prev_wait is not None:
                judged += 1
                across += bool(crossing)
                if wait < (1 - JITTER) * prev_wait:
                    why = (f" across a {crossing[0].kind} (event {crossing[0].index}) after the runtime said the "
                           "retry was scheduled: the retry time did not survive" if crossing else "")
                    problems.append(f"script {script_id} step {step}: the retry after attempt "
                                    f"{c.request.get('attempt')} ({_how(c)}) came {wait:.2f} s after it, the one "
                                    f"before waited {prev_wait:.2f} s: the backoff shrank{why}")
            prev_wait = wait
    if judged and not problems:
        return [_result("RES-03", Verdict.VALID, f"{judged} consecutive waits compared, {across} across a restart")]
    return [_verdict("RES-03", problems, judged, "no request had two consecutive temporary faults")]


def _how(c: Call) -> Any:
    status = c.response.get("status") if c.response else None
    return f"HTTP {status}" if status != 200 else "stream cut"


BACKOFF_CHECKS = (kit_evidence(check_backoff),)
