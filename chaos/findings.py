"""Chaos failures grouped per clause, and which of them are known (accepted) findings.

Every chaos case runs on its own (its own run dir, provider, broker and adapter), so a failing case
never stops the others: a whole run already reports every clause any case broke. What a reader needs
on top is the grouping: per broken clause, how many cases broke it, at which cells (point x restart
kind), and the one case to replay first, the shortest (a single restart before a double one, the
earliest hit of the point, then the fastest case). And which failures are known: a failed case is
``accepted`` when every violation it has is an accepted clause's (``conformance.acceptance``); a
refused pid, a leftover process or a broken unaccepted clause keeps it a failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from recoverykit.model.catalogue import Verdict


def broken(case: Mapping[str, Any]) -> set[str]:
    return {c["clause"] for c in case.get("clauses", []) if c.get("verdict") == Verdict.INVALID.value}


def accepted_case(case: Mapping[str, Any], accepted: Iterable[str]) -> bool:
    """A failed case whose every violation is an accepted clause's: a known finding, not a new failure."""
    if case.get("status") != "failed" or case.get("refused") or case.get("leftovers") or case.get("strays"):
        return False
    clauses = broken(case)
    invalid = sum(1 for c in case.get("clauses", []) if c.get("verdict") == Verdict.INVALID.value)
    return bool(clauses) and clauses <= set(accepted) and len(case.get("violations", [])) == invalid


def _shortness(case: Mapping[str, Any]) -> tuple:
    total = (case.get("timings") or {}).get("total")
    return (case.get("second") is not None, case.get("hit") or 0, total if total is not None else float("inf"),
            len(case["id"]), case["id"])


def findings(cases: Sequence[Mapping[str, Any]], accepted: Mapping[str, str]) -> list[dict[str, Any]]:
    """Per broken clause: its case count, cells, whether it is accepted, and its shortest replay."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    for case in cases:
        if case.get("status") == "failed":
            for clause_id in broken(case):
                by.setdefault(clause_id, []).append(case)
    out = []
    for clause_id, hit in sorted(by.items()):
        best = min(hit, key=_shortness)
        text = next((c.get("text") for c in best.get("clauses", []) if c["clause"] == clause_id), "")
        out.append({"clause": clause_id, "status": "accepted" if clause_id in accepted else "invalid",
                    **({"accepted_by": accepted[clause_id]} if clause_id in accepted else {}),
                    "count": len(hit), "cells": sorted({f"{c.get('point')} x {c.get('kind')}" for c in hit}),
                    "seen_in": [c["id"] for c in hit][:50], "message": text,
                    "shortest": {"case": best["id"], "replay": best.get("replay"), "bundle": best.get("bundle"),
                                 "seconds": (best.get("timings") or {}).get("total")}})
    return out
