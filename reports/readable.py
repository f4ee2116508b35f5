"""What a person reads: certify and chaos results folded into one page model, clause summary first.

The failure-acceptance report (``failure_acceptance.build``) is the checkable record of a chaos run;
this module turns it, plus any certify results, into what report.md and report.html show, in the order
a reader asks: which clauses broke (verdict, how many cells and cases, the shortest command to replay),
then where (the interruption point x restart kind matrix, every cell pointing at its cases: status,
reasons, bundle and replay command), with known (accepted, baselined) findings kept apart from new
ones. "Why not valid" groups before it lists (``why``): one entry per broken clause with its count of
failing cases, its distinct failure messages and its shortest replay, every case kept beside it.
It only rearranges what the results already say: no verdict is made here, and a clause no result
judged stays unknown. Anchors are built from sanitized names, so adapter text never shapes an id.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from recoverykit.chaos.findings import accepted_case
from recoverykit.conformance import unknowns
from recoverykit.model.catalogue import Verdict
from recoverykit.model.contract import CLAUSES
from recoverykit.model.errors import InvalidArgument
from recoverykit.reports import failure_acceptance

ACCEPTED = failure_acceptance.ACCEPTED
# how a clause's verdicts from several sources combine: a break anywhere wins, then a known break, then a hold
_RANK = {Verdict.INVALID.value: 0, ACCEPTED: 1, Verdict.VALID.value: 2, Verdict.UNKNOWN.value: 3,
         Verdict.NOT_APPLICABLE.value: 4}
_SHOWN = {Verdict.INVALID.value: 0, ACCEPTED: 1, Verdict.UNKNOWN.value: 2, Verdict.VALID.value: 3,
          Verdict.NOT_APPLICABLE.value: 4}
_RUN_RANK = {Verdict.INVALID.value: 0, Verdict.UNKNOWN.value: 1, Verdict.VALID.value: 2}
# a heatmap cell's shade, worst first: the worst of its cases, else its coverage status
SHADES = ("invalid", ACCEPTED, "error", "unknown", "passed", "not_implemented", "not_reachable", "not_selected")
NOT_SELECTED = "not-selected"  # the anchor every unselected cell points at
_STATEMENTS = {c.id: c.statement for c in CLAUSES}
_ORDER = {c.id: i for i, c in enumerate(CLAUSES)}


def is_certify(doc: Any) -> bool:
    """A certify results document (``recoverykit certify --out DIR`` writes it as results.json)."""
    return (isinstance(doc, dict) and doc.get("kind") is None and isinstance(doc.get("clauses"), dict)
            and isinstance(doc.get("cases"), list) and "exit_code" in doc)


def slug(*parts: object) -> str:
    """An HTML id from names: only ``[A-Za-z0-9_.]`` survive, so adapter text cannot shape the markup."""
    return "-".join(re.sub(r"[^A-Za-z0-9_.]+", "_", str(p)) for p in parts)


def view(chaos: Mapping[str, Any] | None = None, certify: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The page model of one chaos results document (merged shards) and any certify results documents."""
    docs = [*([chaos] if chaos is not None else []), *certify]
    if not docs:
        raise InvalidArgument("a report needs at least one results document (certify or chaos)")
    names = {str((d.get("adapter") or {}).get("name")) for d in docs}
    if len(names) > 1:
        raise InvalidArgument(f"these results come from different adapters {sorted(names)}; a report covers one "
                              "runtime")
    report = failure_acceptance.build(dict(chaos)) if chaos is not None else None
    runs = [_certify_run(i, d) for i, d in enumerate(certify)]
    adapter = docs[0].get("adapter") or {}
    clauses, more = _clauses(report, runs)
    findings = _findings(report, runs)
    for row in clauses:  # a clause row links to its finding when it has one
        row["finding"] = any(f["clause"] == row["clause"] for f in findings)
    new_findings = [f for f in findings if f["status"] != ACCEPTED]
    return {"adapter": {"name": adapter.get("name"), "version": adapter.get("version")},
            "verdict": min((str(d.get("verdict")) for d in docs), key=lambda v: _RUN_RANK.get(v, 1)),
            "reasons": [*(report["reasons"] if report else [])][:30]
            + [f"certify run {r['index'] + 1}: required, never judged valid: {', '.join(r['unjudged'])}"
               for r in runs if r["unjudged"]],
            "chaos": _chaos_summary(report, chaos) if report is not None and chaos is not None else None,
            "certify": runs,
            "clauses": [c for c in clauses if c["verdict"] != ACCEPTED],
            "accepted_clauses": [c for c in clauses if c["verdict"] == ACCEPTED], "more_clauses": more,
            "matrix": _matrix(report, chaos) if report is not None and chaos is not None else None,
            "why": _why(new_findings, chaos, runs),
            "findings": new_findings,
            "accepted": [f for f in findings if f["status"] == ACCEPTED],
            "acceptance": _acceptance(report, certify),
            "unjudged_chaos_clauses": report["unjudged_chaos_clauses"] if report else [],
            "unknowns": unknowns_of(chaos, certify),
            "results_sha256": report["results_sha256"] if report else None}


def unknowns_of(chaos: Mapping[str, Any] | None, certify: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The clauses no results document judged valid or invalid and some left unknown, each with its reason class
    (conformance/unknowns.py; the most actionable one when documents differ), counted per class, and how many
    clauses were applicable (some document judged them other than not applicable)."""
    verdicts: dict[str, set[str]] = {}
    whys: list[dict[str, dict[str, str]]] = []
    for doc, is_chaos in [*([(chaos, True)] if chaos is not None else []), *((d, False) for d in certify)]:
        for cid, entry in (doc.get("clauses") or {}).items():
            v = entry if isinstance(entry, str) else (entry or {}).get("finding", (entry or {}).get("verdict"))
            verdicts.setdefault(str(cid), set()).add(str(v))
        whys.append(unknowns.of_chaos(doc) if is_chaos else unknowns.of_certify_doc(doc))
    verdicts = {c: vs for c, vs in verdicts.items() if c in _ORDER}  # catalogue clauses (no pseudo-clause)
    unknown = sorted((c for c, vs in verdicts.items()
                      if Verdict.UNKNOWN.value in vs and not vs & {Verdict.VALID.value, Verdict.INVALID.value}),
                     key=lambda c: (_ORDER.get(c, len(_ORDER)), c))
    clauses = {}
    for cid in unknown:
        found = [w[cid] for w in whys if cid in w]
        clauses[cid] = (min(found, key=lambda w: unknowns.RANK.get(w.get("class"), len(unknowns.RANK))) if found
                        else {"class": unknowns.NOT_EXERCISED, "why": "no case of these runs exercised it"})
    applicable = sum(bool(vs - {Verdict.NOT_APPLICABLE.value}) for vs in verdicts.values())
    return {"classes": unknowns.counts(clauses), "applicable": applicable, "clauses": clauses}


def _chaos_summary(report: dict[str, Any], chaos: Mapping[str, Any]) -> dict[str, Any]:
    return {"mode": report["mode"], "shard": report["shard"], "statuses": report["statuses"],
            "coverage": report["coverage"], "wall_s": chaos.get("wall_s"), "cases": len(chaos.get("cases", []))}


def _certify_run(index: int, doc: Mapping[str, Any]) -> dict[str, Any]:
    replay = str(doc.get("replay") or "")
    entries = {str(c): e for c, e in (doc.get("clauses") or {}).items() if isinstance(e, dict)}
    accepted = {c for c, e in entries.items() if e.get("accepted_by")}
    cases = []
    for case in doc.get("cases", []):
        results = [r for r in case.get("results", []) if isinstance(r, dict)]
        broken = {str(r.get("clause")) for r in results if r.get("verdict") == Verdict.INVALID.value}
        status = str(case.get("verdict"))
        if status == Verdict.INVALID.value and broken and broken <= accepted:
            status = ACCEPTED
        name = str(case.get("name"))
        texts = {str(r.get("clause")): str(r.get("text") or "") for r in results
                 if r.get("verdict") == Verdict.INVALID.value}
        cases.append({"anchor": slug("case", index + 1, name), "name": name, "kind": case.get("kind"),
                      "status": status, "message": case.get("message") or "",
                      "program": [str(x) for x in case.get("program") or []], "bundle": case.get("bundle"),
                      "broken": sorted(broken), "texts": texts, "seconds": case.get("seconds"),
                      "replay": f"{replay} --only {shlex.quote(name)}" if replay else None,
                      "judged": sorted({str(r.get("clause")) for r in results
                                        if r.get("verdict") != Verdict.NOT_APPLICABLE.value})})
    unjudged = sorted(str(c) for c in doc.get("required", []) if (entries.get(c) or {}).get("verdict") not in
                      (Verdict.VALID.value, Verdict.INVALID.value, ACCEPTED))
    return {"index": index, "verdict": doc.get("verdict"), "seed": doc.get("seed"), "seconds": doc.get("seconds"),
            "profiles": list(doc.get("profiles") or []), "replay": replay, "cases": cases, "unjudged": unjudged,
            "incomplete": bool(doc.get("incomplete")), "clauses": entries,
            "findings": [f for f in doc.get("findings", []) if isinstance(f, dict)]}


def _clauses(report: dict[str, Any] | None, runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict]:
    """One row per clause some result judged (or a certify run requires): combined verdict, counts, replay.
    Clauses no result judged are only counted (``more``): every one of them is in results.json."""
    rows: dict[str, dict[str, Any]] = {}

    def row(cid: str) -> dict[str, Any]:
        if cid not in rows:
            rows[cid] = {"clause": cid, "anchor": slug("clause", cid), "statement": _STATEMENTS.get(cid, ""),
                         "verdict": Verdict.NOT_APPLICABLE.value, "cells": 0, "cell_counts": {}, "cases": 0,
                         "required": False, "replay": None, "_rank": None}
        return rows[cid]

    def combine(r: dict[str, Any], verdict: str) -> None:
        if _RANK.get(verdict, 3) < _RANK.get(r["verdict"], 3):
            r["verdict"] = verdict

    for c in (report or {}).get("clauses", []):
        r = row(c["clause"])
        r["cells"] = c["valid"] + c["invalid"] + c[ACCEPTED] + c["unknown"]
        r["cell_counts"] = {k: c[k] for k in ("invalid", ACCEPTED, "valid", "unknown") if c[k]}
        combine(r, c["verdict"])
    for f in (report or {}).get("findings", []):
        best = f.get("shortest") or {}
        _offer(row(f["clause"]), (1, best.get("seconds") or float("inf")), best.get("replay"))
    for cell in [*(report or {}).get("failing", []), *(report or {}).get("accepted_cells", [])]:
        _offer(row(cell["clause"]), (1, float("inf")), cell["reproduce"])
    more = {Verdict.UNKNOWN.value: 0, Verdict.NOT_APPLICABLE.value: 0}
    for run in runs:
        judged = {cid for case in run["cases"] for cid in case["judged"]}
        for case in run["cases"]:
            for cid in case["judged"]:
                row(cid)["cases"] += 1
        for cid, entry in run["clauses"].items():
            verdict = str(entry.get("verdict"))
            if cid in judged or entry.get("required") or cid in rows:
                r = row(cid)
                r["required"] = r["required"] or bool(entry.get("required"))
                combine(r, verdict)
        for f in run["findings"]:
            best = f.get("shortest") or {}
            rank = (2, best.get("steps") or 0) if best.get("steps") is not None else (0, best.get("seconds") or 0)
            _offer(row(str(f.get("clause"))), rank, best.get("replay"))
    for cid in {c for run in runs for c in run["clauses"]} - set(rows):
        verdicts = {str(run["clauses"][cid].get("verdict")) for run in runs if cid in run["clauses"]}
        more[Verdict.UNKNOWN.value if Verdict.UNKNOWN.value in verdicts else Verdict.NOT_APPLICABLE.value] += 1
    # worst first (a break, a known break, never judged, held), then in the catalogue's order
    out = sorted(rows.values(), key=lambda r: (_SHOWN.get(r["verdict"], 3), _ORDER.get(r["clause"], len(_ORDER)),
                                               r["clause"]))
    for r in out:
        del r["_rank"]
    return out, more


def _offer(row: dict[str, Any], rank: tuple, replay: Any) -> None:
    """Keep the shortest replay: a certify scenario (one fixed program), then a chaos case (one restart before
    two, the earliest hit, the fastest: ``chaos.findings``), then a lockstep program (the fewest steps)."""
    if replay and (row["_rank"] is None or rank < row["_rank"]):
        row["_rank"], row["replay"] = rank, str(replay)


def _findings(report: dict[str, Any] | None, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per broken clause: its status, message, where (chaos cells, certify cases) and the shortest replay."""
    by: dict[str, dict[str, Any]] = {}

    def entry(cid: str, status: str) -> dict[str, Any]:
        f = by.setdefault(cid, {"clause": cid, "anchor": slug("clause", cid), "statement": _STATEMENTS.get(cid, ""),
                                "status": status, "accepted_by": None, "count": 0, "cells": [], "cases": [],
                                "message": "", "replay": None, "bundle": None})
        if status != ACCEPTED:
            f["status"] = status  # a break some source did not accept is a new finding
        return f

    for f in (report or {}).get("findings", []):
        e = entry(f["clause"], f["status"])
        e["count"] += f["count"]
        e["accepted_by"] = e["accepted_by"] or f.get("accepted_by")
        e["cells"] += [{"label": c, "anchor": slug("cell", *c.split(" x ", 1))} for c in f["cells"]]
        e["message"] = e["message"] or f.get("message") or ""
        e["replay"] = e["replay"] or (f.get("shortest") or {}).get("replay")
        e["bundle"] = e["bundle"] or (f.get("shortest") or {}).get("bundle")
    for cell in [*(report or {}).get("failing", []), *(report or {}).get("accepted_cells", [])]:
        # a cell some case's failure made invalid for a clause no case broke itself (the FA clauses that cover it)
        e = entry(cell["clause"], cell["verdict"])
        anchor = slug("cell", cell["point"], cell["kind"])
        if anchor not in {c["anchor"] for c in e["cells"]}:
            e["cells"].append({"label": f"{cell['point']} x {cell['kind']}", "anchor": anchor})
        e["message"] = e["message"] or next(iter(cell["evidence"]), "")
        e["replay"] = e["replay"] or cell["reproduce"]
    for run in runs:
        anchors = {c["name"]: c["anchor"] for c in run["cases"]}
        bundles = {c["name"]: c["bundle"] for c in run["cases"]}
        for f in run["findings"]:
            e = entry(str(f.get("clause")), str(f.get("status")))
            best = f.get("shortest") or {}
            e["count"] += int(f.get("count") or 0)
            e["accepted_by"] = e["accepted_by"] or f.get("accepted_by")
            e["cases"] += [{"label": f"certify run {run['index'] + 1}: {n}", "anchor": anchors.get(n)}
                           for n in dict.fromkeys(f.get("seen_in") or [])]
            e["message"] = e["message"] or f.get("message") or ""
            if not e["replay"] or best.get("steps") is None:  # a certify scenario is the shortest replay of all
                e["replay"], e["bundle"] = best.get("replay"), bundles.get(best.get("case"))
    return sorted(by.values(), key=lambda f: (_ORDER.get(f["clause"], len(_ORDER)), f["clause"]))


_BROKE = re.compile(r"^broke ([A-Za-z]+-[0-9]+): ")
_VARYING = re.compile(r"[0-9a-f]{12,}|[0-9]+")  # ids, pids, counts: what differs between two cases of one failure
WHY_MESSAGES = 3  # distinct messages shown per broken clause; the rest are counted


def detail(clause: Any, message: Any) -> str:
    """A checker's message without the clause's statement it starts with (``broke X: <statement> (detail)``):
    the statement is shown once beside the clause; the detail is what differs from one case to the next."""
    text, cid = str(message or ""), str(clause or "")
    for verb in ("broke", "not judged", "held"):
        head = f"{verb} {cid}: {_STATEMENTS.get(cid, '')}"
        if cid and text.startswith(head):
            rest = text[len(head):].strip()
            if not rest:
                return verb
            return rest[1:-1] if rest.startswith("(") and rest.endswith(")") else rest
    return text


def _why(findings: list[dict[str, Any]], chaos: Mapping[str, Any] | None,
         runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per broken clause (a new finding): its failing cases, their distinct messages (cases whose
    messages differ only in ids and counts are one message), the shortest replay; most failing cases first."""
    cases: dict[str, list[dict[str, Any]]] = {}
    accepted = ((chaos or {}).get("acceptance") or {}).get("accepted") or {}
    for case in (chaos or {}).get("cases", []):
        if case.get("status") != "failed" or accepted_case(case, accepted):
            continue
        anchor = slug("cell", case["point"], case["kind"]) if case.get("point") and case.get("kind") else None
        for violation in case.get("violations") or []:
            found = _BROKE.match(str(violation))
            if found and found.group(1) not in accepted:
                cases.setdefault(found.group(1), []).append(
                    {"id": str(case.get("id")), "anchor": anchor, "message": detail(found.group(1), violation)})
    for run in runs:
        for case in run["cases"]:
            if case["status"] != Verdict.INVALID.value:
                continue
            for cid in case["broken"]:
                cases.setdefault(cid, []).append({"id": f"certify run {run['index'] + 1}: {case['name']}",
                                                  "anchor": case["anchor"],
                                                  "message": detail(cid, case["texts"].get(cid) or case["message"])})
    by_cell: dict[str, list[dict[str, Any]]] = {}
    for case in (chaos or {}).get("cases", []):  # a clause broken by cells (an FA clause covering them)
        if case.get("status") == "failed" and not accepted_case(case, accepted) and case.get("violations"):
            first = str(case["violations"][0])
            found = _BROKE.match(first)
            by_cell.setdefault(f"{case.get('point')} x {case.get('kind')}", []).append(
                {"id": str(case.get("id")), "anchor": slug("cell", case.get("point"), case.get("kind")),
                 "message": f"{found.group(1)}: {detail(found.group(1), first)}" if found else first})
    out = []
    for f in findings:
        listed = cases.get(f["clause"]) or [c for cell in f["cells"] for c in by_cell.get(cell["label"], [])]
        shapes: dict[str, dict[str, Any]] = {}
        for c in listed or [{"message": detail(f["clause"], f["message"])}]:
            shape = shapes.setdefault(_VARYING.sub("#", c["message"]), {"text": c["message"], "count": 0})
            shape["count"] += 1
        messages = sorted(shapes.values(), key=lambda m: -m["count"])
        out.append({"clause": f["clause"], "anchor": f["anchor"], "statement": f["statement"],
                    "count": len(listed) or f["count"], "messages": messages[:WHY_MESSAGES],
                    "more_messages": max(0, len(messages) - WHY_MESSAGES), "replay": f["replay"], "cases": listed})
    return sorted(out, key=lambda g: (-g["count"], _ORDER.get(g["clause"], len(_ORDER)), g["clause"]))


def _acceptance(report: dict[str, Any] | None, certify: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """What became of each acceptance: stale (held: drop it), not exercised, changed (baseline not applied)."""
    out: dict[str, list[str]] = {"stale": [], "not_exercised": [], "changed": []}
    for block in [(report or {}).get("acceptance") or {}, *((d.get("acceptance") or {}) for d in certify)]:
        for key in out:
            out[key] += [str(x) for x in block.get(key) or [] if str(x) not in out[key]]
    return out


def _matrix(report: dict[str, Any], chaos: Mapping[str, Any]) -> dict[str, Any]:
    """The point x restart-kind heatmap and, per cell, its evidence: every case there, or why there is none."""
    accepted = (chaos.get("acceptance") or {}).get("accepted") or {}
    coverage = {(c["point"], c["kind"]): c for c in report["coverage_cells"]}
    cases: dict[tuple[str, str], list[dict[str, Any]]] = {}
    others: list[dict[str, Any]] = []
    for case in chaos.get("cases", []):
        shown = _case(case, accepted)
        if case.get("point") and case.get("kind"):
            cases.setdefault((str(case["point"]), str(case["kind"])), []).append(shown)
        else:
            others.append(shown)
    points = list(dict.fromkeys([*report["points"], *(p for p, _ in coverage), *(p for p, _ in cases)]))
    kinds = list(dict.fromkeys([*report["kinds"], *(k for _, k in coverage), *(k for _, k in cases)]))
    rows, evidence, quiet = [], [], []
    for point in points:
        cells = []
        for kind in kinds:
            here, cov = cases.get((point, kind), []), coverage.get((point, kind))
            status = cov["status"] if cov else "not_selected"
            shade = _shade(here, status)
            anchor = slug("cell", point, kind) if (here or cov) else NOT_SELECTED
            cell = {"point": point, "kind": kind, "shade": shade, "status": status, "anchor": anchor,
                    "cases": len(here), "failed": sum(c["status"] in ("failed", ACCEPTED) for c in here),
                    "why": (cov or {}).get("why") or ""}
            cells.append(cell)
            if here:
                evidence.append({**cell, "list": here})
            elif cov:
                quiet.append(cell)
        rows.append({"point": point, "cells": cells})
    counts = {s: sum(c["shade"] == s for r in rows for c in r["cells"]) for s in SHADES}
    return {"points": points, "kinds": kinds, "rows": rows, "evidence": evidence, "quiet": quiet,
            "other_cases": others, "counts": {k: v for k, v in counts.items() if v}}


def _case(case: Mapping[str, Any], accepted: Mapping[str, str]) -> dict[str, Any]:
    status = ACCEPTED if accepted_case(case, accepted) else str(case.get("status"))
    reasons = [str(v) for v in case.get("violations") or []]
    if case.get("why") and status != "passed":
        reasons.append(str(case["why"]))
    return {"id": str(case.get("id")), "status": status, "reasons": reasons, "bundle": case.get("bundle"),
            "replay": case.get("replay")}


def _shade(cases: list[dict[str, Any]], status: str) -> str:
    """The worst case of the cell (a failure, a known one, a kit error, not reached) else its coverage."""
    seen = {c["status"] for c in cases}
    for status_, shade in (("failed", "invalid"), (ACCEPTED, ACCEPTED), ("error", "error"),
                           ("not_reached", "unknown")):
        if status_ in seen:
            return shade
    if status == "exercised":
        return "passed"
    return status if status in SHADES else "unknown"
