"""The verdict of stored certify results, recomputed from their cases: ``recoverykit report`` never trusts the
stored one.

A results.json is a file anyone can edit or truncate: one whose top-level verdict says valid while a case
broke a clause, or that is marked incomplete, must not make a CI gate green. The fold is certify's own
(``conformance.certify.judge`` and ``verdict_of``) over the cases' clause results: a break of a clause
that is not accepted is invalid; a required clause no case judged valid, a pseudo-clause judged unknown
(a case that went silent or could not finish) or an incomplete run is unknown at best. The report then
takes the worse of this and the stored verdict, so neither an edit nor a judgement this fold cannot
redo (``--strict-evidence`` downgrades) makes it more lenient than certify was.
"""

from __future__ import annotations

from typing import Any

from recoverykit.conformance.acceptance import derive
from recoverykit.conformance.checker import PSEUDO_CLAUSES
from recoverykit.model.catalogue import Verdict

_WORST = (Verdict.INVALID, Verdict.UNKNOWN, Verdict.VALID)


def _accepted(doc: dict[str, Any]) -> set[str]:
    accepted = {str(c): str(by) for c, by in ((doc.get("acceptance") or {}).get("accepted") or {}).items()}
    breaks = [(r["clause"], r.get("because") or ()) for case in doc["cases"] for r in case.get("results", [])
              if r["verdict"] == Verdict.INVALID.value]
    return set(derive(accepted, breaks))


def recompute(doc: dict[str, Any]) -> tuple[Verdict, list[str]]:
    """The verdict of a (schema-checked) certify results document from its cases, and why it is not valid."""
    accepted = _accepted(doc)
    clauses: dict[str, Verdict] = {}
    broken_cases = []
    for case in doc["cases"]:
        if case["verdict"] == Verdict.NOT_APPLICABLE.value:
            continue
        results = case.get("results", [])
        broken = {r["clause"] for r in results if r["verdict"] == Verdict.INVALID.value}
        if case["verdict"] == Verdict.INVALID.value and not (broken and broken <= accepted):
            broken_cases.append(case["name"])
        for r in results:
            now, v = clauses.get(r["clause"]), Verdict(r["verdict"])
            if Verdict.INVALID in (v, now):
                clauses[r["clause"]] = Verdict.INVALID
            elif Verdict.VALID in (v, now):
                clauses[r["clause"]] = Verdict.VALID
            else:
                clauses[r["clause"]] = Verdict.UNKNOWN
    broke = sorted(c for c, v in clauses.items() if v is Verdict.INVALID and c not in accepted)
    if broke or broken_cases:
        return Verdict.INVALID, ([f"a case broke {', '.join(broke)}"] if broke else []) + [
            f"case {name} is invalid" for name in broken_cases[:10]]
    reasons = [f"required clause {c} was judged valid by no case" for c in doc.get("required", [])
               if clauses.get(c) is not Verdict.VALID and c not in accepted]
    reasons += [f"a case ended {c} unknown (silent, or it could not finish)" for c in PSEUDO_CLAUSES
                if clauses.get(c) is Verdict.UNKNOWN]
    if doc.get("incomplete"):
        reasons.append(f"the run is incomplete (interrupted by {doc.get('interrupted_by') or 'a signal'})")
    return (Verdict.UNKNOWN, reasons) if reasons else (Verdict.VALID, [])


def judged(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its verdict the worse of the stored one and the one its cases give."""
    verdict, reasons = recompute(doc)
    stored = Verdict(doc["verdict"]) if doc["verdict"] != Verdict.NOT_APPLICABLE.value else Verdict.UNKNOWN
    worst = min(verdict, stored, key=_WORST.index)
    if worst is stored and stored is not verdict:
        reasons = [f"the stored verdict is {stored.value}", *reasons]
    return {**doc, "verdict": worst.value, "recomputed": {"verdict": verdict.value, "reasons": reasons[:20]}}
