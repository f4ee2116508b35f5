"""What changed between two runs of one runtime: the comparison a CI gate makes beside the absolute verdict.

``recoverykit diff OLD NEW`` reads two results documents of the same command (two certify runs, or two chaos
runs: a ``--out`` directory, its results.json, or a stored report folder under reports/ with its
results.json.gz) and says, clause by clause, what moved:

- a *regression* is a clause broken in NEW (invalid, or accepted as a known finding) that OLD did not break;
- a clause *fixed* was broken in OLD and holds in NEW;
- a *new unknown* is a clause OLD judged (held or broke) that NEW leaves unknown, with NEW's reasons;
- a *changed cell* is an interruption point x restart kind (chaos) or a case (certify) both runs selected
  whose outcome differs. Cells only one run selected are counted, not compared: a smaller selection is not
  a change of the runtime.

It only compares what the documents already say; no verdict is made here. Bad input (no results there, two
different runtimes, a certify run against a chaos run) is ``InvalidArgument``.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recoverykit.chaos.findings import accepted_case
from recoverykit.chaos.systematic import RESULTS_KIND
from recoverykit.conformance.safe_text import visible
from recoverykit.model.contract import CLAUSES
from recoverykit.model.errors import InvalidArgument
from recoverykit.reports.readable import detail, is_certify
from recoverykit.reports.results_schema import check_results

BROKEN = frozenset({"invalid", "accepted"})
HELD = "valid"
UNKNOWN = "unknown"
UNSELECTED = frozenset({"not_selected", "absent"})
FILES = ("results.json", "results.json.gz")
_STATEMENTS = {c.id: c.statement for c in CLAUSES}
_ORDER = {c.id: i for i, c in enumerate(CLAUSES)}
_MAX_REASONS = 3


def load(path: str | Path) -> tuple[str, dict[str, Any]]:
    """``("certify"|"chaos", doc)`` from a results file (``.json`` or ``.json.gz``) or a directory holding one."""
    p = Path(path)
    if p.is_dir():
        found = [p / name for name in FILES if (p / name).is_file()]
        if not found:
            raise InvalidArgument(f"{path}: no {' or '.join(FILES)} there; pass the --out directory of a certify or "
                                  "chaos run, its results.json, or a stored report folder (reports/<runtime>)")
        p = found[0]
    try:
        raw = p.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        doc = json.loads(raw.decode("utf-8"))
    except (OSError, EOFError, ValueError, RecursionError) as exc:
        raise InvalidArgument(f"{p} cannot be read as a results document ({type(exc).__name__}: "
                              f"{str(exc)[:200]})") from None
    if is_certify(doc):
        return "certify", doc
    if isinstance(doc, dict) and doc.get("kind") == RESULTS_KIND:
        return "chaos", check_results(doc, str(p))
    raise InvalidArgument(f"{p} is neither a certify nor a chaos results document (the results.json that "
                          "`recoverykit certify --out DIR` or `recoverykit chaos --out DIR` writes)")


def _text(x: Any) -> str:
    return x if isinstance(x, str) else "" if x is None else str(x)


def _dicts(x: Any) -> list[dict[str, Any]]:
    return [e for e in x if isinstance(e, dict)] if isinstance(x, list) else []


def _add(bucket: list[str], text: str) -> None:
    if text and text not in bucket and len(bucket) < _MAX_REASONS:
        bucket.append(text)


def snapshot(kind: str, doc: Mapping[str, Any]) -> dict[str, Any]:
    """What the comparison reads of one run: per clause its verdict, reasons and replay; per cell its outcome."""
    clauses: dict[str, dict[str, Any]] = {}

    def clause(cid: str) -> dict[str, Any]:
        return clauses.setdefault(cid, {"verdict": UNKNOWN, "reasons": [], "messages": [], "replay": None})

    cells: dict[str, str] = {}
    findings = _dicts(doc.get("findings"))
    if kind == "certify":
        for cid, entry in (doc.get("clauses") if isinstance(doc.get("clauses"), dict) else {}).items():
            if isinstance(entry, dict):
                clause(str(cid))["verdict"] = _text(entry.get("verdict")) or UNKNOWN
        for case in _dicts(doc.get("cases")):
            cells[_text(case.get("name"))] = _text(case.get("verdict")) or UNKNOWN
            for r in _dicts(case.get("results")):
                if r.get("verdict") == UNKNOWN:
                    _add(clause(_text(r.get("clause")))["reasons"], detail(r.get("clause"), r.get("text")))
    else:
        accepted = (doc.get("acceptance") or {}).get("accepted") or {}
        for cid, verdict in (doc.get("clauses") if isinstance(doc.get("clauses"), dict) else {}).items():
            v = _text(verdict) or UNKNOWN
            clause(str(cid))["verdict"] = "accepted" if v == "invalid" and cid in accepted else v
        by_cell: dict[str, list[str]] = {}
        for case in _dicts(doc.get("cases")):
            for r in _dicts(case.get("clauses")):
                if r.get("verdict") == UNKNOWN:
                    _add(clause(_text(r.get("clause")))["reasons"], detail(r.get("clause"), r.get("text")))
            if case.get("point") and case.get("kind"):
                status = _text(case.get("status"))
                if status == "failed" and accepted_case(case, accepted):
                    status = "accepted"
                by_cell.setdefault(f"{case['point']} x {case['kind']}", []).append(status)
        for cell in _dicts((doc.get("coverage") or {}).get("cells")):
            label = f"{cell.get('point')} x {cell.get('kind')}"
            cells[label] = _cell_state(by_cell.pop(label, []), _text(cell.get("status")))
        for label, statuses in by_cell.items():  # cases in no coverage cell: still compared
            cells[label] = _cell_state(statuses, "")
    for f in findings:
        c = clause(_text(f.get("clause")))
        best = f.get("shortest") if isinstance(f.get("shortest"), dict) else {}
        _add(c["messages"], detail(f.get("clause"), f.get("message")))
        c["replay"] = c["replay"] or _text(best.get("replay")) or None
    for c in clauses.values():
        if c["verdict"] == UNKNOWN and not c["reasons"]:
            c["reasons"].append("no case of this run judged it")
    adapter = doc.get("adapter") if isinstance(doc.get("adapter"), dict) else {}
    return {"kind": kind, "adapter": _text(adapter.get("name")) or None, "version": adapter.get("version"),
            "verdict": _text(doc.get("verdict")), "cases": len(_dicts(doc.get("cases"))), "clauses": clauses,
            "cells": cells, "selection": doc.get("selection") if kind == "chaos" else
            sorted(_text(c.get("name")) for c in _dicts(doc.get("cases")))}


def _cell_state(statuses: list[str], coverage: str) -> str:
    """A cell's outcome: its worst case (a failure, a known one, a kit error, not reached), else its coverage."""
    for status, state in (("failed", "invalid"), ("accepted", "accepted"), ("error", "error"),
                          ("not_reached", UNKNOWN)):
        if status in statuses:
            return state
    if "passed" in statuses or coverage == "exercised":
        return "passed"
    return coverage or "absent"


def diff(old: Mapping[str, Any], new: Mapping[str, Any], *, old_name: str = "OLD",
         new_name: str = "NEW") -> dict[str, Any]:
    """The comparison of two snapshots (``snapshot``) of one runtime; ``exit_code`` 1 on any regression."""
    if old["kind"] != new["kind"]:
        raise InvalidArgument(f"{old_name} is a {old['kind']} result and {new_name} a {new['kind']} result; diff "
                              "compares two runs of the same command (certify with certify, chaos with chaos)")
    if old["adapter"] != new["adapter"]:
        raise InvalidArgument(f"{old_name} and {new_name} come from different runtimes ({old['adapter']!r}, "
                              f"{new['adapter']!r}); diff compares two runs of one runtime")
    regressions, fixed, unknowns = [], [], []
    for cid in sorted(set(old["clauses"]) | set(new["clauses"]), key=lambda c: (_ORDER.get(c, len(_ORDER)), c)):
        absent = {"verdict": UNKNOWN, "reasons": ["not in the results"], "messages": [], "replay": None}
        was, now = old["clauses"].get(cid, absent), new["clauses"].get(cid, absent)
        row = {"clause": cid, "statement": _STATEMENTS.get(cid, ""), "was": was["verdict"], "now": now["verdict"]}
        if now["verdict"] in BROKEN and was["verdict"] not in BROKEN:
            regressions.append({**row, "messages": now["messages"], "replay": now["replay"]})
        elif was["verdict"] in BROKEN and now["verdict"] == HELD:
            fixed.append(row)
        elif now["verdict"] == UNKNOWN and was["verdict"] != UNKNOWN:
            unknowns.append({**row, "reasons": now["reasons"]})
    both = set(old["cells"]) & set(new["cells"])
    changed = [{"cell": label, "was": old["cells"][label], "now": new["cells"][label]}
               for label in sorted(both) if old["cells"][label] != new["cells"][label]
               and old["cells"][label] not in UNSELECTED and new["cells"][label] not in UNSELECTED]
    compared = sum(1 for label in both if old["cells"][label] not in UNSELECTED
                   and new["cells"][label] not in UNSELECTED)
    selected = {n: {k for k, v in s["cells"].items() if v not in UNSELECTED} for n, s in (("old", old), ("new", new))}
    only = {n: len(selected[n] - selected["new" if n == "old" else "old"]) for n in selected}
    notes = []
    if old["selection"] != new["selection"]:
        notes.append(f"the two runs selected different {'cases' if old['kind'] == 'certify' else 'cells'} "
                     f"({only['old']} only in {old_name}, {only['new']} only in {new_name}): a clause that went "
                     "unknown may only be outside NEW's selection")
    return {"kind": old["kind"], "adapter": new["adapter"],
            "old": {"name": old_name, "verdict": old["verdict"], "cases": old["cases"], "version": old["version"]},
            "new": {"name": new_name, "verdict": new["verdict"], "cases": new["cases"], "version": new["version"]},
            "regressions": regressions, "fixed": fixed, "new_unknowns": unknowns, "changed_cells": changed,
            "cells_compared": compared, "cells_only_in": only, "notes": notes,
            "exit_code": 1 if regressions else 0}


def compare(old_path: str | Path, new_path: str | Path) -> dict[str, Any]:
    """``diff`` of the results at two paths (files or directories)."""
    return diff(snapshot(*load(old_path)), snapshot(*load(new_path)), old_name=str(old_path), new_name=str(new_path))


def text(d: Mapping[str, Any]) -> str:
    """The comparison as a person reads it: regressions first, each with its messages and shortest replay."""
    what = "cases" if d["kind"] == "certify" else "cells (point x restart kind)"
    lines = [f"recoverykit diff: {d['adapter']} ({d['kind']} results)",
             f"  old: {d['old']['name']}: {d['old']['verdict']}, {d['old']['cases']} cases",
             f"  new: {d['new']['name']}: {d['new']['verdict']}, {d['new']['cases']} cases", ""]
    lines.append(f"regressions: {len(d['regressions'])} (clauses broken in NEW that OLD did not break)")
    for r in d["regressions"]:
        lines.append(f"  {r['clause']}: {r['was']} -> {r['now']}  {r['statement']}")
        lines += [f"      {m}" for m in r["messages"]]
        if r["replay"]:
            lines.append(f"      replay: {r['replay']}")
    lines.append(f"fixed: {len(d['fixed'])}")
    lines += [f"  {r['clause']}: {r['was']} -> {r['now']}  {r['statement']}" for r in d["fixed"]]
    lines.append(f"new unknowns: {len(d['new_unknowns'])}")
    for r in d["new_unknowns"]:
        lines.append(f"  {r['clause']}: {r['was']} -> unknown  {r['statement']}")
        lines += [f"      {m}" for m in r["reasons"]]
    lines.append(f"changed {what}: {len(d['changed_cells'])} of {d['cells_compared']} compared")
    lines += [f"  {c['cell']}: {c['was']} -> {c['now']}" for c in d["changed_cells"]]
    lines += [f"note: {n}" for n in d["notes"]]
    n = len(d["regressions"])
    lines.append(f"{n} regression{'s' if n != 1 else ''}: exit {d['exit_code']}")
    return "\n".join(visible(line) for line in lines) + "\n"  # adapter text cannot forge a line
