"""Systematic mode: run the case list (or one shard of it) and build the results document.

The pipeline reads top to bottom in ``run``: declare (one handshake: what does the adapter implement?),
dry run (``dry_run``: which points each scenario reaches, how often; or a stored trace), enumerate
(``cases``), shard, run each case (``runner.run_case``), classify coverage, decide the verdict. Cases
are independent (each has its own run dir, provider, broker, adapter and run marker).

Scale-out (docs/decisions.md D10): ``workers=0`` runs the cases one after another in this process;
``workers=N`` (N >= 1) runs them as pytest items in N pytest-xdist worker processes
(``xdist_run``, ``xdist_plugin``), each case's result read back from its own file, so the document
is the same either way. Across machines, ``--shard K/N`` splits the same list and ``recoverykit
merge`` joins the results.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from recoverykit import __version__ as KIT_VERSION
from recoverykit.chaos import coverage, spares
from recoverykit.chaos.case_env import DEFAULT_ADAPTER, CaseEnv
from recoverykit.chaos.cases import Case, choose, enumerate_cases, not_implemented_reason, parse_case_id
from recoverykit.chaos.dry_run import TRACE_FILE, Trace, dry_run
from recoverykit.chaos.findings import accepted_case, findings
from recoverykit.chaos.runner import run_case
from recoverykit.chaos.shard import Shard, select
from recoverykit.conformance import unknowns
from recoverykit.conformance.acceptance import Acceptance, classify, derive, grown, grown_text
from recoverykit.conformance.checker import ClauseResult, merge
from recoverykit.conformance.pacing import Pacing, using
from recoverykit.conformance.reaper import reap_stale
from recoverykit.conformance.scenarios import all_scenarios
from recoverykit.model.catalogue import INTERRUPTION_POINTS, OPT_IN_POINTS, POINTS_BY_NAME, Reach, RestartKind, Verdict
from recoverykit.model.errors import InvalidArgument

RESULTS_KIND = "recoverykit-chaos-results"
RESULTS_VERSION = 1
POINT_NAMES = [p.name for p in INTERRUPTION_POINTS]
KIND_NAMES = [k.value for k in RestartKind]


def declare(adapter: str | list[str] | None, base_dir: str | Path | None = None) -> dict[str, Any]:
    """The adapter's init_ok (name, version, profiles, failpoints, restart kinds, observes)."""
    env = CaseEnv(adapter, {"scripts": [{"id": "declare", "steps": [{"text": "ok"}]}]}, base_dir=base_dir)
    try:
        ok = env.start()
        return {"command": adapter if adapter is not None else DEFAULT_ADAPTER, "name": ok.name,
                "version": ok.version, "protocol_version": ok.protocol_version,
                "profiles": [p.value for p in ok.profiles], "failpoints": list(ok.failpoints),
                "restart_kinds": [k.value for k in ok.restart_kinds], "observes": [s.value for s in ok.observes]}
    finally:
        env.close()
        env.remove()


def run_one(case: Case, adapter: str | list[str] | None, *, declared: dict[str, Any] | None = None,
            base_dir: str | Path | None = None, bundle_dir: str | Path | None = None, timeout_s: float = 20.0,
            keep: bool = False, seed: int = 0) -> dict[str, Any]:
    """One case's result; a case the declaration rules out is reported without starting anything."""
    if declared is not None:
        why = not_implemented_reason(case, declared["failpoints"], declared["restart_kinds"], declared["profiles"])
        if why is not None:
            return {**case.as_dict(), "status": "not_implemented", "why": why, "verdict": Verdict.UNKNOWN.value,
                    "clauses": [], "violations": [], "leftovers": [], "timings": {}}
    return run_case(case, adapter, base_dir=base_dir, bundle_dir=bundle_dir, timeout_s=timeout_s, keep=keep, seed=seed)


def run_list(cases: Sequence[Case], adapter: str | list[str] | None, *, base_dir: str | Path | None = None,
             bundle_dir: str | Path | None = None, timeout_s: float = 20.0, keep: bool = False, seed: int = 0,
             declared: dict[str, Any] | None = None,
             progress: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run every case here, one after another; results in case order."""
    results = []
    try:
        with spares.warm_spares():  # each case adopts the adapter started while the one before ran
            for case in cases:
                results.append(run_one(case, adapter, declared=declared, base_dir=base_dir, bundle_dir=bundle_dir,
                                       timeout_s=timeout_s, keep=keep, seed=seed))
                if progress is not None:
                    progress(results[-1])
    except KeyboardInterrupt as exc:  # SIGINT / SIGTERM: the cases finished so far go with it
        exc.partial_results = list(results)  # type: ignore[attr-defined]
        raise
    return results


def verdict_of(results: Sequence[dict[str, Any]], cov: dict[str, Any],
               accepted: Iterable[str] = ()) -> tuple[Verdict, list[str]]:
    """invalid if any case broke a clause; unknown if anything declared was left unjudged; else valid.
    A case that broke accepted clauses only (a known finding) is neither a failure nor a pass."""
    accepted = frozenset(accepted)
    reasons = []
    broken = [f"dry run of {name}: {why}" for name, why in sorted(cov.get("dry_run_broken", {}).items())]
    failed = [r for r in results if r["status"] == "failed" and not accepted_case(r, accepted)]
    if broken or failed:
        return Verdict.INVALID, broken + [f"{r['id']}: {v}" for r in failed for v in r["violations"][:1]]
    errors = [r for r in results if r["status"] == "error"]
    reasons += [f"{r['id']}: {r.get('why', 'error')}" for r in errors]
    reasons += [f"declared point {p} never exercised" for p in cov.get("declared_never_hit", [])]
    reasons += [f"declared cell {cell} never exercised" for cell in cov.get("unknown_cells", [])
                if cell.split(" x ")[0] not in cov.get("declared_never_hit", [])]
    reasons += [f"declared point {p} never reached by any scenario's dry run"
                for p in cov.get("declared_never_reached", [])]
    reasons += [f"dry run of {name}: {why}" for name, why in sorted(cov.get("dry_run_failed", {}).items())]
    leftovers = [r for r in results if r.get("leftovers")]
    reasons += [f"{r['id']}: leftover processes {r['leftovers']}" for r in leftovers]
    if reasons or not any(r["status"] == "passed" or accepted_case(r, accepted) for r in results):
        return Verdict.UNKNOWN, reasons or ["no case was exercised"]
    return Verdict.VALID, []


def clause_summary(results: Sequence[dict[str, Any]]) -> dict[str, str]:
    flat = [ClauseResult(c["clause"], Verdict(c["verdict"]), c["text"]) for r in results for c in r.get("clauses", [])]
    return {k: v.value for k, v in sorted(merge(flat).items())}


def breaks_of(results: Sequence[dict[str, Any]]) -> list[tuple[str, tuple[str, ...]]]:
    """(clause, the clauses it rests on) per invalid clause result of every case."""
    return [(c["clause"], tuple(c.get("because") or ())) for r in results for c in r.get("clauses", [])
            if c.get("verdict") == Verdict.INVALID.value]


def acceptance_block(results: Sequence[dict[str, Any]], acceptance: Acceptance,
                     adapter: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the document records of the acceptance in force: the clauses, what this run saw of each, the accepted
    aggregate clauses that now rest on new clauses (``grown``: they gate), and a baseline of another adapter."""
    warning = acceptance.adapter_warning(adapter or {})
    return {**acceptance.as_dict(), **classify(acceptance.accepted, clause_summary(results)),
            "cases": sum(1 for r in results if accepted_case(r, acceptance.accepted)),
            "grown": grown_text(grown(acceptance.rests_on, breaks_of(results))),
            **({"adapter_warning": warning} if warning else {})}


def never_reached(trace: Trace, declared: dict[str, Any]) -> list[str]:
    """Declared runtime points of declared profiles that no scenario's dry run reached. A profile none of whose
    scenarios has chaos cells (each says why in ``Chaos.none``; the approvals profile: its drives make the moves
    and kill at its points themselves) has no dry run that could reach its points: they are not counted here."""
    seen = {p for points in trace.reached.values() for p, n in points.items() if n > 0}
    if not trace.durable_writes:  # opt-in points are not armed without the flag: nothing could reach them
        seen |= set(OPT_IN_POINTS)
    chaotic = {s.profile.value for s in all_scenarios() if s.has_chaos}
    return sorted(p for p in declared["failpoints"] if p in POINTS_BY_NAME and p not in seen
                  and POINTS_BY_NAME[p].reach is Reach.RUNTIME
                  and POINTS_BY_NAME[p].profile.value in declared["profiles"]
                  and POINTS_BY_NAME[p].profile.value in chaotic)


def results_document(results: Sequence[dict[str, Any]], declared: dict[str, Any], *, mode: str, shard: Shard,
                     selection: dict[str, Any], seed: int, started: float, wall_s: float,
                     trace: Trace | None = None, acceptance: Acceptance = Acceptance(),
                     run_cases: Sequence[str] | None = None) -> dict[str, Any]:
    """The results document of these case results. ``run_cases``: the ids of every case of the whole run this
    shard is part of (before ``--shard`` took its part), recorded so that ``merge`` can tell a complete shard
    set from an incomplete one (``reports.shard_set``)."""
    reachable = {(c.point, c.kind) for c in enumerate_cases(trace)} if trace is not None else None
    never = never_reached(trace, declared) if trace is not None and selection.get("scenarios") == "all" else []
    cov = coverage.classify(results, declared["failpoints"], declared["restart_kinds"],
                            selection.get("points"), selection.get("kinds"), reachable=reachable, never_reached=never)
    if trace is not None and trace.failed:
        cov["dry_run_failed"] = dict(trace.failed)
    if trace is not None and trace.broken:
        cov["dry_run_broken"] = dict(trace.broken)
    acceptance = replace(acceptance, accepted=derive(acceptance.accepted, breaks_of(results), acceptance.rests_on))
    verdict, reasons = verdict_of(results, cov, acceptance.accepted)
    statuses: dict[str, int] = {}
    for r in results:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return with_unknowns({"kind": RESULTS_KIND, "version": RESULTS_VERSION, "kit_version": KIT_VERSION, "mode": mode,
            "adapter": declared, "shard": str(shard), "seed": seed, "selection": selection, "started": started,
            "wall_s": round(wall_s, 3), "verdict": verdict.value, "reasons": reasons[:50], "statuses": statuses,
            "clauses": clause_summary(results), "coverage": cov, "cases": list(results),
            "acceptance": acceptance_block(results, acceptance, declared),
            "findings": findings(results, acceptance.accepted),
            "run": run_block(run_cases, trace),
            **({"dry_run": _dry_run_summary(trace)} if trace is not None else {})})


def with_unknowns(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with each unknown clause's reason class (conformance/unknowns.py) and their count."""
    found = unknowns.of_chaos(doc)
    return {**doc, "unknowns": {"classes": unknowns.counts(found), "clauses": found}}


def run_block(run_cases: Sequence[str] | None, trace: Trace | None) -> dict[str, Any]:
    """What identifies the whole run a shard belongs to: its case list and the dry-run trace it came from."""
    return {"cases": len(run_cases) if run_cases is not None else None,
            "case_ids": sorted(run_cases) if run_cases is not None else None,
            "trace_sha256": trace_digest(trace) if trace is not None else None}


def trace_digest(trace: Trace) -> str:
    """The sha256 of what in a trace decides the case list (the points reached, what was left out and why; not
    the seconds it took, nor the adapter's command line, which differs between CI machines)."""
    doc = trace.as_dict()
    kept = {k: v for k, v in doc.items() if k not in ("seconds", "total_s", "adapter")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()


def _dry_run_summary(trace: Trace) -> dict[str, Any]:
    return {"seconds": trace.total_s, "cases": len(enumerate_cases(trace)), "scenarios": sorted(trace.reached),
            **({"durable_writes": True, "labels": trace.labels} if trace.durable_writes else {}),
            "skipped": dict(trace.skipped), "failed": dict(trace.failed), "broken": dict(trace.broken),
            "reached": {s: dict(sorted(p.items())) for s, p in sorted(trace.reached.items())}}


def load_trace(trace: str | Path | Trace | None, adapter: str | list[str] | None, declared: dict[str, Any],
               scenarios: Any = None, base_dir: str | Path | None = None, timeout_s: float = 20.0,
               durable_writes: bool = False) -> Trace:
    """A stored trace (``--trace FILE``: whether it armed durable writes is its own), or a fresh dry run of the
    chosen scenarios."""
    if isinstance(trace, Trace):
        return trace
    if trace is not None:
        return Trace.read(trace)
    names = choose(scenarios, [s.id for s in all_scenarios()], "scenarios")
    return dry_run(adapter, declared, scenarios=[s for s in all_scenarios() if s.id in names], base_dir=base_dir,
                   timeout_s=timeout_s, durable_writes=durable_writes)


def run(adapter: str | list[str] | None = None, *, scenarios: Any = None, points: Any = None, kinds: Any = None,
        shard: Shard = Shard(1, 1), workers: int = 0, out_dir: str | Path | None = None, timeout_s: float = 20.0,
        keep: bool = False, seed: int = 0, replay: str | None = None, trace: str | Path | Trace | None = None,
        progress: Callable[[dict[str, Any]], None] | None = None,
        acceptance: Acceptance = Acceptance(), durable_writes: bool = False,
        pacing: Pacing | None = None) -> dict[str, Any]:
    """The whole systematic pipeline; returns the results document. ``workers``: 0 here, N in N xdist workers.
    ``durable_writes``: the dry run arms the adapter's durable-write points too (docs/failpoints.md section 7).
    ``pacing``: the windows of every case (None: the current pacing); recorded in the document."""
    with using(pacing) as paced:
        doc = _run(adapter, scenarios=scenarios, points=points, kinds=kinds, shard=shard, workers=workers,
                   out_dir=out_dir, timeout_s=timeout_s, keep=keep, seed=seed, replay=replay, trace=trace,
                   progress=progress, acceptance=acceptance, durable_writes=durable_writes)
    return {**doc, "pacing": paced.as_dict()}


def _run(adapter: str | list[str] | None, *, scenarios: Any, points: Any, kinds: Any, shard: Shard, workers: int,
         out_dir: str | Path | None, timeout_s: float, keep: bool, seed: int, replay: str | None,
         trace: str | Path | Trace | None, progress: Callable[[dict[str, Any]], None] | None,
         acceptance: Acceptance, durable_writes: bool) -> dict[str, Any]:
    if workers < 0:
        raise InvalidArgument(f"workers={workers}: 0 runs the cases in this process, N >= 1 in N pytest-xdist workers")
    reap_stale()  # an earlier chaos run that was killed leaves nothing running into this one
    started, t0 = time.time(), time.monotonic()
    out = Path(out_dir) if out_dir is not None else None
    base = out / "runs" if out is not None else None
    bundles = out / "bundles" if out is not None else None
    declared = declare(adapter, base)
    the_trace: Trace | None = None
    if replay is not None:
        cases = every = [parse_case_id(replay)]
        selection: dict[str, Any] = {"replay": replay, "points": [cases[0].point], "kinds": [cases[0].kind]}
    else:
        the_trace = load_trace(trace, adapter, declared, scenarios, base, timeout_s, durable_writes)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            the_trace.write(out / TRACE_FILE)
        every = enumerate_cases(the_trace, scenarios, points, kinds)
        cases = select(every, shard)
        selection = {"scenarios": scenarios or "all", "durable_writes": the_trace.durable_writes,
                     "points": None if points in (None, "all") else choose(points, POINT_NAMES, "points"),
                     "kinds": None if kinds in (None, "all") else choose(kinds, KIND_NAMES, "kinds")}
    mode = "replay" if replay else "systematic"
    try:
        if workers == 0:
            results = run_list(cases, adapter, base_dir=base, bundle_dir=bundles, timeout_s=timeout_s, keep=keep,
                               seed=seed, declared=declared, progress=progress)
        else:
            from recoverykit.chaos.xdist_run import run_cases  # spawns pytest: only when asked to scale out

            results = run_cases(cases, adapter, workers=workers, declared=declared, base_dir=base,
                                bundle_dir=bundles, work_parent=out, timeout_s=timeout_s, keep=keep, seed=seed,
                                progress=progress)
    except KeyboardInterrupt as exc:  # SIGINT / SIGTERM: a document of the cases that finished, marked incomplete
        done = list(getattr(exc, "partial_results", []))
        doc = results_document(done, declared, mode=mode, shard=shard, selection=selection, seed=seed,
                               started=started, wall_s=time.monotonic() - t0, trace=the_trace, acceptance=acceptance,
                               run_cases=[c.id for c in every])
        exc.partial_document = incomplete(doc, exc, len(cases))  # type: ignore[attr-defined]
        raise
    if base is not None and base.exists() and not any(base.iterdir()):
        base.rmdir()
    return results_document(results, declared, mode=mode, shard=shard, selection=selection, seed=seed,
                            started=started, wall_s=time.monotonic() - t0, trace=the_trace, acceptance=acceptance,
                            run_cases=[c.id for c in every])


def incomplete(doc: dict[str, Any], exc: BaseException, total: int) -> dict[str, Any]:
    """Mark a results document as cut short by a signal: never valid, and it says how far it got."""
    name = getattr(exc, "name", "SIGINT")
    why = f"interrupted by {name} after {len(doc['cases'])} of {total} cases; the rest never ran"
    verdict = doc["verdict"] if doc["verdict"] == Verdict.INVALID.value else Verdict.UNKNOWN.value
    return {**doc, "incomplete": True, "interrupted_by": name, "verdict": verdict, "reasons": [why, *doc["reasons"]]}
