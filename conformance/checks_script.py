"""A goal is never met by a request the kit's own script could not answer.

The scripted provider answers a request for a step its script does not have with an error (HTTP 400,
``script_mismatch``). That is the kit's shortfall, not the runtime's: a runtime that answers each queued input in
its own turn asks for one more step than a runtime that folds the input into the recovered turn. But such a
failed request can also end the work (failed, with a reason), and every clause whose goal is "the work ended
well" would then hold on a request that never got an answer. So, for a run whose ledger shows a worker request
beyond its script, every ``valid`` result is ``unknown``, naming the request ("the kit's script had no step for
request N"); ``invalid`` results stand (the runtime broke them with or without that answer).
"""

from __future__ import annotations

from dataclasses import replace

from recoverykit.conformance.checker import ClauseResult, Evidence
from recoverykit.conformance.provider_ledger import calls
from recoverykit.model.catalogue import Verdict


def beyond_script(ev: Evidence) -> list[str]:
    """Each worker request the kit's script had no step for, described."""
    out = []
    for c in calls(ev.ledger or []):
        req = c.request
        steps, step = req.get("script_steps"), req.get("step")
        unanswered = req.get("response_id") is None and (c.response or {}).get("status") == 400  # no step fit it
        if (unanswered and req.get("script_id") and req.get("role", "worker") != "verifier" and isinstance(steps, int)
                and isinstance(step, int) and step >= steps):  # not a ``repeat_last`` script's answered repeat
            out.append(f"request {c.seq} (script {req['script_id']!r} has {steps} steps; it asked for step {step})")
    return out


def unmet_by_failed_requests(ev: Evidence, results: list[ClauseResult]) -> list[ClauseResult]:
    """``results`` with every valid one made unknown when the kit's script ran out in this run."""
    short = beyond_script(ev)
    if not short:
        return results
    why = (f"the kit's script had no step for {short[0]}{f' and {len(short) - 1} more' if len(short) > 1 else ''}: "
           "the failed answer may be what ended the work, so what held is not proof")
    return [replace(r, verdict=Verdict.UNKNOWN, text=f"not judged: {why} [{r.text}]")
            if r.verdict is Verdict.VALID else r for r in results]
