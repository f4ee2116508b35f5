"""Merging shard results into one, and writing a run's files (results, report JSON/Markdown/HTML).

``recoverykit chaos --shard K/N --out DIR`` on each CI machine, then ``recoverykit merge DIR...``
gives one results document as if the run had been whole: the cases joined (a case id twice is a
mistake in the sharding and is refused), coverage merged cell by cell, verdict and clause summary
recomputed from the joined cases rather than trusted from the parts. ``recoverykit report`` reads certify
and chaos results alike (``load_any``): chaos shards merged this way, certify runs beside them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from recoverykit.chaos import coverage
from recoverykit.chaos.findings import findings
from recoverykit.chaos.systematic import RESULTS_KIND, acceptance_block, clause_summary, verdict_of, with_unknowns
from recoverykit.conformance import input_files
from recoverykit.conformance.acceptance import Acceptance
from recoverykit.model.catalogue import Verdict
from recoverykit.model.errors import InvalidArgument
from recoverykit.reports import certify_verdict, failure_acceptance, readable, render, results_db, shard_set
from recoverykit.reports.junit import junit_xml
from recoverykit.reports.results_db import RESULTS_DB
from recoverykit.reports.results_schema import check_certify, check_results

RESULTS_FILE, REPORT_JSON, REPORT_MD, REPORT_HTML = "results.json", "report.json", "report.md", "report.html"
JUNIT_XML = "junit.xml"


def _results_file(path: str | Path, what: str) -> Path:
    """``path`` itself, or the results.json in it when it is a directory; missing: ``InvalidArgument``."""
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS_FILE
    if not p.exists():
        raise InvalidArgument(f"{path}: no {RESULTS_FILE} there; pass the --out directory of a {what} run or its "
                              f"{RESULTS_FILE}")
    return p


def load_results(path: str | Path) -> dict[str, Any]:
    """A chaos results document from a file or a directory holding results.json."""
    p = _results_file(path, "chaos")
    doc = _read_json(p)
    if not isinstance(doc, dict) or doc.get("kind") != RESULTS_KIND:
        raise InvalidArgument(f"{p} is not a chaos results document (kind {RESULTS_KIND!r})")
    return check_results(doc, str(p))


def load_any(path: str | Path) -> tuple[str, dict[str, Any]]:
    """``("chaos", doc)`` or ``("certify", doc)``: a results document of either command, from a file or its
    ``--out`` directory (``recoverykit report`` takes both)."""
    p = _results_file(path, "certify or chaos")
    doc = _read_json(p)
    if readable.is_certify(doc):
        return "certify", check_certify(doc, str(p))
    if isinstance(doc, dict) and doc.get("kind") == RESULTS_KIND:
        return "chaos", check_results(doc, str(p))
    raise InvalidArgument(f"{p} is neither a certify nor a chaos results document (the results.json that "
                          "`recoverykit certify --out DIR` or `recoverykit chaos --out DIR` writes)")


def report_pages(paths: Iterable[str | Path]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The chaos results (shards merged into one, as ``merge`` does) and the certify results among ``paths``, each
    with its verdict recomputed from its cases (``judged``, ``certify_verdict.judged``)."""
    chaos, certify = [], []
    for path in paths:
        what, doc = load_any(path)
        (chaos if what == "chaos" else certify).append(doc)
    return (judged(chaos) if chaos else None), [certify_verdict.judged(d) for d in certify]


def judged(chaos: list[dict[str, Any]]) -> dict[str, Any]:
    """The chaos results as one document whose verdict is recomputed from the cases, never the stored one: one
    document keeps its own fields (a shard or an incomplete run is then judged as such); several are merged."""
    merged = merge(chaos)
    if len(chaos) > 1:
        return merged
    return {**chaos[0], **{k: merged[k] for k in ("verdict", "reasons", "missing") if k in merged}}


def write_report(chaos: dict[str, Any] | None, certify: list[dict[str, Any]], *, html: str | Path | None = None,
                 md: str | Path | None = None) -> dict[str, Any]:
    """Render the readable report of these results to the given paths; returns its page model."""
    page = readable.view(chaos, certify)
    for path, text in ((html, render.html), (md, render.markdown)):
        if path is not None:
            Path(path).write_text(text(page), encoding="utf-8")
    return page


def _read_json(p: Path) -> Any:
    """A JSON file's document; a file that cannot be read or parsed (a directory, a FIFO, a device, larger than
    the input limit, truncated, not UTF-8) is ``InvalidArgument`` (``input_files``)."""
    return input_files.read_json(p, "results")


def merge(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """One results document of these shards of one run, its verdict recomputed from their cases; an incomplete
    set (a shard or a case missing, a part cut short) is never valid (``shard_set``)."""
    parts = list(parts)
    if not parts:
        raise InvalidArgument("merge needs at least one results document")
    names = {(p.get("adapter") or {}).get("name") for p in parts}
    if len(names) > 1:
        raise InvalidArgument(f"these results come from different adapters {sorted(map(str, names))}; merge the "
                              "shards of one run")
    missing = shard_set.check(parts)
    seen: dict[str, str] = {}
    cases = []
    for part in parts:
        for case in part["cases"]:
            if case["id"] in seen:
                raise InvalidArgument(f"case {case['id']} appears in shard {seen[case['id']]} and shard "
                                      f"{part.get('shard')}: the shards overlap")
            seen[case["id"]] = str(part.get("shard"))
            cases.append(case)
    cov = coverage.merge_cells(p["coverage"] for p in parts)
    acceptances = [Acceptance.from_dict(p.get("acceptance")) for p in parts]
    if any(a.accepted != acceptances[0].accepted for a in acceptances):
        raise InvalidArgument("these shards ran with different acceptances (--accept / --baseline); run every shard "
                              "with the same ones")
    acceptance = acceptances[0]
    verdict, reasons = verdict_of(cases, cov, acceptance.accepted)
    if missing:  # missing evidence: unknown at best; a break found in the parts that are here stays invalid
        verdict = Verdict.INVALID if verdict is Verdict.INVALID else Verdict.UNKNOWN
        reasons = [*missing, *reasons]
    statuses: dict[str, int] = {}
    for c in cases:
        statuses[c["status"]] = statuses.get(c["status"], 0) + 1
    first = parts[0]
    return with_unknowns({**{k: first.get(k) for k in ("kind", "version", "kit_version", "mode", "adapter", "seed",
                                                        "selection",
                                          "run")},
            "parts": [q for p in parts for q in shard_set.identity(p)],
            **({"missing": missing} if missing else {}),
            **({"incomplete": True, "interrupted_by": "+".join(sorted({str(p.get("interrupted_by")) for p in parts
                                                                       if p.get("incomplete")}))}
               if any(p.get("incomplete") for p in parts) else {}),
            "shard": "+".join(sorted(str(p.get("shard")) for p in parts)), "merged_from": len(parts),
            "started": min(p.get("started", 0) for p in parts), "wall_s": max(p.get("wall_s", 0) for p in parts),
            "verdict": verdict.value, "reasons": reasons[:50], "statuses": statuses, "clauses": clause_summary(cases),
            "coverage": cov, "cases": cases,
            "acceptance": acceptance_block(cases, acceptance, parts[0].get("adapter") or {}),
            "findings": findings(cases, acceptance.accepted)})


def write_all(results: dict[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """results.json, report.json, report.md, report.html, junit.xml and results.db in ``out_dir``; returns
    their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = failure_acceptance.build(results)
    page = readable.view(results)
    files = {RESULTS_FILE: json.dumps(results, indent=1, sort_keys=True, default=str) + "\n",
             REPORT_JSON: json.dumps(report, indent=1, sort_keys=True) + "\n",
             REPORT_MD: render.markdown(page), REPORT_HTML: render.html(page), JUNIT_XML: junit_xml(results)}
    paths = {}
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        paths[name] = out / name
    paths[RESULTS_DB] = results_db.write(results, out / RESULTS_DB)
    return paths


def check_report(report_path: str | Path, results_path: str | Path) -> list[str]:
    """Re-validate a stored report against the results it claims to come from."""
    report = _read_json(Path(report_path))
    return failure_acceptance.validate(report, load_results(results_path))
