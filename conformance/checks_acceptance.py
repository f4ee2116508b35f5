"""FA-01 in one run: every safety clause the run's checks judged held after the restarts it went through.

Seed 000, Restart failure acceptance: "Cover frontend reload, normal App exit, graceful worker restart, forced
worker termination, downtime beyond the old two-hour window, and another crash during recovery." FA-01 asks that
every safety clause hold after each of those restart kinds. One run shows it for the restart kinds it applied:
this check gathers the verdicts the other history checks give for safety clauses in that run and is

- invalid when the run restarted the runtime (any kind) and a safety clause broke, naming the kinds;
- valid when it restarted and every safety clause judged held (at least one judged);
- unknown when the run never restarted, or judged no safety clause.

Pseudo-clauses (``protocol``, ``completion``) are not in the catalogue and have no kind: they are judged on
their own (a protocol break stays invalid under ``protocol``) and FA-01 passes over them.

So a verdict is per restart kind the run applied (listed in its text), never for kinds it did not: the whole
matrix, every kind at every point, is the failure-acceptance report's (chaos), whose FA-01 cells are valid only
where this check held in a case of that cell. Drive functions' own results are not seen here (a history check
reads the evidence, not other cases), so certify's FA-01 covers the history-checked safety clauses.
"""

from __future__ import annotations

from dataclasses import replace

from recoverykit.conformance.checker import PSEUDO_CLAUSES, ClauseResult, Evidence, _result, all_checks
from recoverykit.conformance.history import restarts
from recoverykit.model.catalogue import Verdict
from recoverykit.model.contract import Kind, clause


def check_safety_after_restarts(ev: Evidence) -> list[ClauseResult]:
    """FA-01: every safety clause judged in a run that restarted the runtime held."""
    kinds = sorted({f.kind for f in restarts(ev.history)})
    if not kinds:
        return [_result("FA-01", Verdict.UNKNOWN, "the run never restarted the runtime")]
    safety = [r for fn in all_checks() if fn is not check_safety_after_restarts for r in fn(ev)
              if r.clause_id != "FA-01" and r.clause_id not in PSEUDO_CLAUSES  # e.g. a protocol break: its own result
              and clause(r.clause_id).kind is Kind.SAFETY]
    broken = [r for r in safety if r.verdict is Verdict.INVALID]
    held = sorted({r.clause_id for r in safety if r.verdict is Verdict.VALID})
    after = f"after {', '.join(kinds)}"
    if broken:
        ids = sorted({r.clause_id for r in broken})
        return [replace(_result("FA-01", Verdict.INVALID, f"{after}: {', '.join(ids)} broke",
                                [r.text for r in broken][:10]), because=tuple(ids))]
    if not held:
        return [_result("FA-01", Verdict.UNKNOWN, f"{after}: no safety clause was judged")]
    return [_result("FA-01", Verdict.VALID, f"{after}: {len(held)} safety clauses held ({', '.join(held)})")]


ACCEPTANCE_CHECKS = (check_safety_after_restarts,)
