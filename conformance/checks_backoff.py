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

Only the runtime's own wait is judged, and the kit sees it from outside: the provider's end of a fault to the next
attempt. After an HTTP error answer the runtime's client has the whole answer at once, so that gap is the wait.
After a cut stream it is not: the client may notice the cut late (a read timeout, a keep-alive, an event loop
busy elsewhere: one framework's client noticed 1.6 s after the provider closed the stream), and that latency is
not the retry policy's. So each wait is a range: after an error answer the gap itself; after a cut, from what the
runtime's own word allows (it had noticed by the first observation showing ``retry_scheduled`` for the item) or
0, up to the gap. A shrink is ``invalid`` only when even the most favourable attribution shrinks (this wait's
upper bound below the bound allowed by the last one's lower bound); a comparison is ``valid`` only when the
least favourable does not; anything between is ``unknown``, saying why.

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


def _noticed_by(ev: Evidence, work_ids: set[str], after: float, before: float) -> float | None:
    """When the runtime said, at the latest, that it had seen the fault: the first observation in (after, before)
    showing one of ``work_ids`` with a retry scheduled."""
    for o in ev.snapshots():
        if after < o.time < before and any(w.get("work_id") in work_ids and w.get("reason_code") == "retry_scheduled"
                                           for w in o.snapshot.get("work_items") or []):
            return o.time
    return None


def _wait(ev: Evidence, c: Call, work_ids: set[str], end: float, retried: float) -> tuple[float, float]:
    """The runtime's own wait before retrying ``c``: (lower, upper) bound, in seconds (module docstring)."""
    gap = retried - end
    if int(c.response.get("status") or 0) != 200:  # an error answer: the client had it all at once
        return gap, gap
    noticed = _noticed_by(ev, work_ids, end, retried)
    return (retried - noticed if noticed is not None else 0.0), gap


def check_backoff(ev: Evidence) -> list[ClauseResult]:
    """RES-03: waits that never shrink across consecutive temporary faults, nor by a restart; no idle calls."""
    owners = _work_of_scripts(ev)
    by_script: dict[str, list[Call]] = defaultdict(list)
    for c in calls(ev.ledger):
        if c.request.get("script_id"):
            by_script[c.request["script_id"]].append(c)
    restarts = _restarts(ev)
    problems: list[str] = []
    undecided: list[str] = []
    judged = across = 0
    for script_id, seq in by_script.items():
        prev: tuple[float, float, Call] | None = None  # the last wait's bounds and the fault before it
        for i, c in enumerate(seq):
            if not temporary(c):
                prev = None
                continue
            nxt = seq[i + 1] if i + 1 < len(seq) else None
            if nxt is None:
                break
            step = c.request.get("step")
            if nxt.request.get("step") != step and int(c.response.get("status") or 0) != 200:
                problems.append(f"script {script_id}: after a temporary fault of step {step} (attempt "
                                f"{c.request.get('attempt')}, {_how(c)}) the next model call asked for step "
                                f"{nxt.request.get('step')}, not a retry: an idle model call while waiting")
                prev = None
                continue
            if nxt.request.get("step") != step:  # a cut answer continued from its partial text: not a retry
                prev = None
                continue
            end, retried = float(c.response["time"]), float(nxt.request["time"])
            crossing = [f for f in restarts if end < f.time < retried]
            if crossing and not _scheduled_before(ev, owners.get(script_id, set()), end, crossing[0].time):
                prev = None  # killed before the runtime said it had decided: recovery, not a backoff
                continue
            low, high = _wait(ev, c, owners.get(script_id, set()), end, retried)
            if prev is not None:
                prev_low, prev_high, before = prev
                where = (f"script {script_id} step {step}: the retry after attempt {c.request.get('attempt')} "
                         f"({_how(c)}) came {high:.2f} s after it, the one before ({_how(before)}) {prev_high:.2f} s")
                if high < (1 - JITTER) * prev_low:  # shrank under the most favourable attribution
                    judged += 1
                    across += bool(crossing)
                    why = (f" across a {crossing[0].kind} (event {crossing[0].index}) after the runtime said the "
                           "retry was scheduled: the retry time did not survive" if crossing else "")
                    low_text = "" if prev_low == prev_high else f" (of which at least {prev_low:.2f} s its own)"
                    problems.append(f"{where}{low_text}: the backoff shrank{why}")
                elif low >= (1 - JITTER) * prev_high:  # did not shrink under the least favourable one
                    judged += 1
                    across += bool(crossing)
                else:
                    cut = before if int(before.response.get("status") or 0) == 200 else c
                    undecided.append(f"{where}; the gap after the cut stream (attempt {cut.request.get('attempt')}) "
                                     "includes the time the runtime's HTTP client took to notice the cut, which the "
                                     "kit cannot see, so whether the backoff shrank is not attributable")
            prev = (low, high, c)
    if problems:
        return [_verdict("RES-03", problems, judged, "")]
    if undecided:
        return [_result("RES-03", Verdict.UNKNOWN, undecided[0], undecided)]
    if judged:
        return [_result("RES-03", Verdict.VALID, f"{judged} consecutive waits compared, {across} across a restart")]
    return [_verdict("RES-03", problems, judged, "no request had two consecutive temporary faults")]


def _how(c: Call) -> Any:
    status = c.response.get("status") if c.response else None
    return f"HTTP {status}" if status != 200 else "stream cut"


BACKOFF_CHECKS = (kit_evidence(check_backoff),)
