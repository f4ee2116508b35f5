"""The failure-acceptance report: contract clause x interruption point x restart kind, with evidence.

Built from a chaos results document (``recoverykit chaos --out DIR`` writes ``results.json``). A cell
is judged by the cases that stopped the runtime at that point and restarted it that way:

- a clause the history checker or the model prediction judged in a case counts for that case's cell;
- a failure-acceptance clause (FA-xx) covers the points and restart kinds it names in the contract
  (model/contract.py), through the cases of the scenarios aimed at it (``Scenario.clauses``) when any
  scenario names it; its cell is invalid when any case there broke any clause, valid only when a check
  of that FA clause itself held in a case there, unknown otherwise (a case that passed the other
  checks is no evidence for a clause nothing measured: missing evidence is never a pass). An FA clause
  naming no point, no kind and no scenario is left unjudged (listed as such), never passed.

Every invalid cell carries its evidence (the violation text) and the one command that reproduces it
(``recoverykit chaos --replay <case id>``). Known findings (``--accept``, ``--baseline``) are ``accepted``,
never valid: a cell whose failure is an accepted clause's, or an FA cell whose case failed only on accepted
clauses, is ``accepted``, and the report carries the run's findings grouped per clause (count, cells, the
shortest replay). The report stores the sha256 of the results it was built
from, so a stored report is re-validated by rebuilding it (``validate``), as etcd re-checks stored
robustness reports.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from typing import Any

from recoverykit.chaos.findings import accepted_case
from recoverykit.conformance.scenarios import all_scenarios
from recoverykit.model.catalogue import INTERRUPTION_POINTS, RestartKind, Verdict
from recoverykit.model.contract import CLAUSES, Method, clause
from recoverykit.model.errors import InvalidArgument, MalformedRecord

REPORT_KIND = "recoverykit-failure-acceptance-report"
REPORT_VERSION = 1
RESULTS_KIND = "recoverykit-chaos-results"
ACCEPTED = "accepted"  # a known finding (--accept, --baseline): broken, acknowledged, never valid
_RANK = {Verdict.INVALID.value: 0, ACCEPTED: 1, Verdict.VALID.value: 2, Verdict.UNKNOWN.value: 3}


def digest(results: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(results, sort_keys=True, default=str).encode()).hexdigest()


def _check_results(results: Any) -> dict[str, Any]:
    if not isinstance(results, dict) or results.get("kind") != RESULTS_KIND:
        raise InvalidArgument(f"expected a chaos results document (kind {RESULTS_KIND!r}, written by "
                              f"`recoverykit chaos --out DIR` as results.json), got "
                              f"{type(results).__name__} with kind {getattr(results, 'get', lambda _: None)('kind')!r}")
    if not isinstance(results.get("cases"), list):
        raise MalformedRecord("the results document has no list of cases")
    return results


def _cell(cells: dict, key: tuple[str, str, str]) -> dict[str, Any]:
    if key not in cells:
        cells[key] = {"clause": key[0], "point": key[1], "kind": key[2], "verdict": Verdict.UNKNOWN.value,
                      "cases": 0, "evidence": [], "reproduce": None}
    return cells[key]


def _judge(cell: dict[str, Any], verdict: str, case: dict[str, Any], evidence: str | None) -> None:
    cell["cases"] += 1
    if _RANK.get(verdict, 3) < _RANK[cell["verdict"]]:
        cell["verdict"] = verdict
    if verdict in (Verdict.INVALID.value, ACCEPTED):
        if evidence and len(cell["evidence"]) < 3:
            cell["evidence"].append(f"{case['id']}: {evidence}")
        cell["reproduce"] = cell["reproduce"] or case.get("replay")


def build(results: dict[str, Any]) -> dict[str, Any]:
    """The report (JSON-ready) for one results document."""
    results = _check_results(results)
    accepted = (results.get("acceptance") or {}).get("accepted") or {}
    cells: dict[tuple[str, str, str], dict[str, Any]] = {}
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for case in results["cases"]:
        if case.get("status") not in ("passed", "failed"):
            continue
        by_cell[(case["point"], case["kind"])].append(case)
        for c in case.get("clauses", []):
            verdict = ACCEPTED if c["verdict"] == Verdict.INVALID.value and c["clause"] in accepted else c["verdict"]
            _judge(_cell(cells, (c["clause"], case["point"], case["kind"])), verdict, case, c.get("text"))
    for fa in (c for c in CLAUSES if c.area == "FA"):
        points = fa.points or tuple(p.name for p in INTERRUPTION_POINTS)
        kinds = tuple(k.value for k in (fa.restarts or tuple(RestartKind)))
        # a clause a scenario names is judged by that scenario's cases only; a clause naming neither points
        # nor kinds nor a scenario (late identity, evidence rules) is judged by no chaos case at all
        aimed = {s.id for s in all_scenarios() if fa.id in s.chaos.clauses}
        if not aimed and not fa.points and not fa.restarts:
            continue
        for point in points:
            for kind in kinds:
                for case in by_cell.get((point, kind), []):
                    if aimed and case.get("scenario") not in aimed:
                        continue
                    if case["status"] != "failed" and any(c["clause"] == fa.id for c in case.get("clauses", [])):
                        continue  # its own check judged it in this case: the first loop counted that verdict
                    # a failed case is a failure at this cell; a passed one says nothing about this FA clause
                    # unless a check of it ran (a label without a check is never a pass)
                    verdict = Verdict.INVALID.value if case["status"] == "failed" else Verdict.UNKNOWN.value
                    if verdict == Verdict.INVALID.value and accepted_case(case, accepted):
                        verdict = ACCEPTED  # it failed on accepted clauses only
                    first = (case.get("violations") or [None])[0]
                    _judge(_cell(cells, (fa.id, point, kind)), verdict, case, first)
    ordered = sorted(cells.values(), key=lambda c: (_clause_order(c["clause"]), c["point"], c["kind"]))
    per_clause: dict[str, dict[str, int]] = defaultdict(lambda: {"valid": 0, "invalid": 0, ACCEPTED: 0,
                                                                  "unknown": 0})
    for cell in ordered:
        per_clause[cell["clause"]][cell["verdict"]] += 1
    clauses = [{"clause": cid, "statement": clause(cid).statement, **counts,
                "verdict": "invalid" if counts["invalid"] else ACCEPTED if counts[ACCEPTED] else
                "valid" if counts["valid"] else "unknown"}
               for cid, counts in sorted(per_clause.items(), key=lambda kv: _clause_order(kv[0]))]
    failing = [c for c in ordered if c["verdict"] == Verdict.INVALID.value]
    known = [c for c in ordered if c["verdict"] == ACCEPTED]
    # clauses the chaos runner is meant to judge (method chaos) that no cell judged: listed, never passed
    unjudged = [c.id for c in CLAUSES if Method.CHAOS in c.methods and c.id not in per_clause]
    adapter = results.get("adapter") or {}
    cov = results.get("coverage") or {}
    return {"kind": REPORT_KIND, "version": REPORT_VERSION, "results_sha256": digest(results),
            "adapter": {k: adapter.get(k) for k in ("name", "version", "command", "profiles")},
            "verdict": results.get("verdict"), "reasons": results.get("reasons", [])[:20],
            "mode": results.get("mode"), "shard": results.get("shard"), "statuses": results.get("statuses", {}),
            "coverage": {k: cov.get(k) for k in ("percent", "declared_cells", "exercised_cells", "declared_points",
                                                 "declared_kinds", "declared_never_hit", "counts")},
            "coverage_cells": [{k: c[k] for k in ("point", "kind", "status", "why")} for c in cov.get("cells", [])],
            "points": [p.name for p in INTERRUPTION_POINTS], "kinds": [k.value for k in RestartKind],
            "clauses": clauses, "unjudged_chaos_clauses": unjudged, "failing": failing, "accepted_cells": known,
            "findings": results.get("findings", []), "acceptance": results.get("acceptance") or {}, "cells": ordered}


def _clause_order(clause_id: str) -> int:
    for i, c in enumerate(CLAUSES):
        if c.id == clause_id:
            return i
    return len(CLAUSES)


def validate(report: dict[str, Any], results: dict[str, Any]) -> list[str]:
    """Problems with a stored report (empty: it is exactly what these results give)."""
    if not isinstance(report, dict) or report.get("kind") != REPORT_KIND:
        return [f"not a failure-acceptance report (kind {REPORT_KIND!r})"]
    problems = []
    if report.get("results_sha256") != digest(results):
        problems.append("the report was built from other results (sha256 differs)")
    fresh = build(results)
    for key in ("verdict", "clauses", "failing", "accepted_cells", "cells", "coverage_cells"):
        if report.get(key) != fresh[key]:
            problems.append(f"{key} differs from a rebuild of the results")
    return problems
