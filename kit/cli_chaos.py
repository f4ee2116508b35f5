"""``recoverykit chaos`` and ``recoverykit merge``: a thin skin over ``recoverykit.chaos.systematic``.

``chaos`` runs the systematic case list (or ``--random N`` seeded waves, or ``--replay CASE_ID``)
against an adapter (default: the bundled reference runtime), prints one line per case on stderr, and
writes results.json plus the failure-acceptance report (JSON, Markdown, HTML) and a bundle per
failing case into ``--out``. ``merge`` joins shard outputs. Exits: 0 valid, 1 invalid, 2 unknown,
64 usage error; 143 / 130 / 129 when SIGTERM / SIGINT / SIGHUP stopped the run (``recoverykit.signals``: every process
of the run reaped, results.json of the finished cases marked incomplete).
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import click
from recoverykit.conformance.errors import OutputsNotWritten
from recoverykit.conformance.out_dir import claim
from recoverykit.conformance.private_files import privatize, write_private
from recoverykit.conformance.safe_text import visible
from recoverykit.errors import UsageError
from recoverykit.model.catalogue import Verdict
from recoverykit.model.errors import InvalidArgument


def _emit_json(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def _progress(total: int, quiet: bool, accepted=()):
    from recoverykit.chaos.findings import accepted_case
    done = {"n": 0}
    t0 = time.monotonic()

    def show(result: dict) -> None:
        done["n"] += 1
        if quiet:
            return
        extra = result.get("why") or "; ".join(result.get("violations", [])[:1])
        status = "accepted" if accepted_case(result, accepted) else result["status"]
        line = f"[{done['n']}/{total} {time.monotonic() - t0:6.1f}s] {status:<15} {result['id']}"
        click.echo(visible(line + (f"  ({extra[:160]})" if extra and result["status"] != "passed" else "")), err=True)
    return show


def _summary(doc: dict, out: Path | None) -> None:
    cov = doc.get("coverage", {})
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(doc.get("statuses", {}).items()))
    acceptance = doc.get("acceptance") or {}
    known = f"; {acceptance['cases']} failed only on accepted clauses" if acceptance.get("cases") else ""
    click.echo(visible(f"verdict: {doc['verdict']} ({statuses}{known}); coverage {cov.get('exercised_cells')}/"
                       f"{cov.get('declared_cells')} declared cells ({cov.get('percent')} %) in {doc.get('wall_s')} s"),
               err=True)
    for reason in doc.get("reasons", [])[:10]:
        click.echo(f"  - {visible(reason)}", err=True)
    for f in doc.get("findings", []):  # failures grouped per clause: how many cases, and the one to replay first
        click.echo(visible(f"  {f['clause']} {f['status']}: {f['count']} case(s) at {len(f['cells'])} cell(s); "
                           f"shortest replay: {f['shortest']['replay']}"), err=True)
    for key, what in (("confirmed", "accepted findings (known, not passed)"),
                      ("stale", "stale acceptances (accepted, yet they held in this run; drop them)"),
                      ("not_exercised", "accepted but not exercised in this run"),
                      ("changed", "baseline entries not applied (the clause's statement changed since)"),
                      ("grown", "accepted aggregate clauses not applied: they now rest on clauses the baseline did "
                                "not accept, and gate")):
        if acceptance.get(key):
            click.echo(visible(f"{what}: {', '.join(acceptance[key])}"), err=True)
    if acceptance.get("adapter_warning"):
        click.echo(visible(f"warning: {acceptance['adapter_warning']}"), err=True)
    if out is not None:
        click.echo(f"results and report: {visible(out)}", err=True)


@click.command()
@click.option("--adapter", help="Adapter command (shlex-split, no shell). Default: the bundled reference runtime.")
@click.option("--points", default="all", show_default=True, help="Interruption points: all or a comma list.")
@click.option("--kinds", default="all", show_default=True, help="Restart kinds: all or a comma list.")
@click.option("--scenarios", default="all", show_default=True, help="Scenarios: all or a comma list.")
@click.option("--random", "random_waves", type=int, default=None, help="Run N seeded random waves instead.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random waves.")
@click.option("--wave", type=int, default=None, help="With --random: start at this wave (replay of one wave).")
@click.option("--replay", "replay", help="Rerun exactly one case by its id.")
@click.option("--shard", default=None, help="K/N: run only the K-th of N disjoint parts of the case list.")
@click.option("--workers", type=int, default=0, show_default=True,
              help="Run the cases in N pytest-xdist worker processes (pytest -n N); 0: one after another here.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Write results, report and bundles here (an earlier run there moves to previous/NNN/; one still "
                   "running there: exit 64).")
@click.option("--timeout", "timeout_s", type=float, default=20.0, show_default=True,
              help="Seconds to wait for a point or a reply before the case is unknown.")
@click.option("--keep", is_flag=True, help="Keep every case's run directory (failing ones are always bundled).")
@click.option("--list", "list_only", is_flag=True,
              help="Print the case ids this selection would run (after the dry run), then exit.")
@click.option("--trace", "trace_path", type=click.Path(), default=None,
              help="Enumerate the cases from this dry-run trace (trace.json of an earlier --out) instead of a new "
                   "dry run: shards of one run then share one case list.")
@click.option("--durable-writes", "durable_writes", is_flag=True,
              help="Also stop a Python runtime before and after every SQLite commit, fsync and atomic rename it makes "
                   "(the adapter declares durable.write.before/after; docs/failpoints.md section 7). With --trace, "
                   "the trace decides.")
@click.option("--json", "as_json", is_flag=True, help="Print the results document as JSON on stdout.")
@click.option("--quiet", is_flag=True, help="No per-case lines on stderr.")
@click.option("--accept", "accept", multiple=True, metavar="CLAUSE",
              help="A known finding: a case that broke only accepted clauses is reported accepted (never passed) and "
                   "does not decide the exit code; a clause that held is a stale acceptance (repeatable, or a comma "
                   "list).")
@click.option("--baseline", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Accept the findings of a baseline file written by --write-baseline (a malformed one: exit 64).")
@click.option("--write-baseline", "write_baseline", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write this run's findings (every clause a case broke) as a baseline file.")
@click.option("--timeout-scale", "timeout_scale", default="1", show_default=True, metavar="FACTOR",
              help="Multiply every window the kit waits in for the runtime (--timeout, the quiesce after a restart, "
                   "a start, a reply) by FACTOR (0.1 to 100). Calibration may raise it, never lower it.")
@click.option("--calibrate/--no-calibrate", "calibrate", default=True, show_default=True,
              help="Before the cases, start the runtime once and time its start and one turn; a slow one gets its "
                   "windows scaled up (at most x10; recorded in results.json under pacing.calibration).")
def chaos(adapter, points, kinds, scenarios, random_waves, seed, wave, replay, shard, workers, out_dir, timeout_s,
          keep, list_only, trace_path, durable_writes, as_json, quiet, accept, baseline, write_baseline,
          timeout_scale, calibrate) -> int:
    """Kill the runtime at every interruption point, for every restart kind, and check recovery."""
    from recoverykit import signals
    from recoverykit.chaos import systematic
    from recoverykit.chaos.cases import enumerate_cases, parse_case_id
    from recoverykit.chaos.dry_run import TRACE_FILE, Trace
    from recoverykit.chaos.shard import parse_shard, select
    from recoverykit.conformance import subreaper
    from recoverykit.conformance.acceptance import load
    from recoverykit.conformance.errors import AdapterCommandError
    from recoverykit.conformance.pacing import Pacing, check_scale, using
    from recoverykit.conformance.reaper import reap_stale
    from recoverykit.reports.merge import write_all

    try:
        if adapter is not None:  # `--adapter ""` (an unset CI variable) must never test the reference runtime
            from recoverykit.conformance.client_process import split_command
            split_command(adapter)
        the_shard = parse_shard(shard)
        scale = check_scale(timeout_scale)
        acceptance = load(accept, baseline)
        from recoverykit.conformance.client import start_timeout_s
        start_timeout_s()  # a bad RECOVERYKIT_START_TIMEOUT_S is the user's input: a usage error before any run
        if write_baseline is not None and not Path(write_baseline).parent.resolve().is_dir():
            raise InvalidArgument(f"--write-baseline {write_baseline}: no directory {Path(write_baseline).parent} "
                                  "to write in")
        if write_baseline is not None:  # before the run: an unwritable path must not cost a run, then its verdict
            from recoverykit.conformance.acceptance import check_writable
            check_writable(write_baseline)
        if workers < 0:
            raise InvalidArgument(f"--workers {workers}: 0 runs the cases here, N >= 1 in N pytest-xdist workers")
        if workers and random_waves is not None:
            raise InvalidArgument(f"--workers {workers} with --random: random waves run one after another in this "
                                  "process (their time to first detection is the point); drop --workers")
        trace = None
        if replay is not None:
            cases = [parse_case_id(replay)]
        elif random_waves is None:
            enumerate_cases(Trace({}), scenarios, points, kinds)  # a bad selection is a usage error before any run
            trace = Trace.read(trace_path) if trace_path else None
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="recoverykit-chaos-"))
    with contextlib.ExitStack() as held:
        try:  # one run at a time in --out (else exit 64); an earlier run's outputs move to previous/NNN/
            held.enter_context(claim(out))
        except InvalidArgument as exc:
            raise UsageError(str(exc)) from None
        held.enter_context(subreaper.adopting())  # orphans of the run (its xdist workers' too) are reaped at its end
        with signals.handled():
            try:
                pacing = Pacing(scale, scale)
                if calibrate and not list_only:
                    pacing = _calibrate(adapter, out, pacing, quiet)
                held.enter_context(using(pacing))  # every case's windows, the dry run's and the declaration's
                if replay is None and random_waves is None:
                    if trace is None:
                        reap_stale()
                        declared = systematic.declare(adapter, out / "runs")
                        trace = systematic.load_trace(None, adapter, declared, scenarios, out / "runs", timeout_s,
                                                      durable_writes)
                    trace.write(out / TRACE_FILE)
                    cases = select(enumerate_cases(trace, scenarios, points, kinds), the_shard)
                    if not quiet:
                        click.echo(f"dry run: {len(trace.reached)} scenario(s) traced in {trace.total_s:.1f} s; "
                                   f"{len(cases)} case(s) in this selection; trace: {out / TRACE_FILE}", err=True)
                if list_only:
                    for case in cases if random_waves is None else []:
                        click.echo(visible(case.id))
                    return 0
                doc = _run(adapter, scenarios, points, kinds, random_waves, seed, wave, replay, the_shard, workers,
                           out, timeout_s, keep, quiet, None if random_waves is not None else len(cases), trace,
                           acceptance)
            except AdapterCommandError as exc:  # the adapter command cannot even start: a usage error
                raise UsageError(str(exc)) from None
            except KeyboardInterrupt as exc:  # SIGTERM / SIGINT: reaped; what finished is written, incomplete
                partial = getattr(exc, "partial_document", None)
                if partial is not None:  # results.json first: the report is a bonus on the way out, never a crash
                    write_private(out / "results.json", json.dumps(partial, indent=1, sort_keys=True, default=str)
                                  + "\n")
                    with contextlib.suppress(Exception):
                        write_all(partial, out)
                signals.finish(exc, out / "results.json" if partial is not None else None)
        unwritten = [f"bundle of {c.get('id')}: {c['bundle_unwritten']}" for c in doc.get("cases", [])
                     if isinstance(c, dict) and c.get("bundle_unwritten")]
        if unwritten:  # a full disk kept evidence from being written: never a verdict of the runtime's
            doc["verdict"], doc["outputs_incomplete"] = Verdict.UNKNOWN.value, unwritten
        doc["pacing"] = pacing.as_dict()
        try:
            for path in write_all(doc, out).values():
                privatize(path)  # results and reports are as private as the runs: 0600
        except OSError as exc:
            raise OutputsNotWritten(f"the results could not all be written to {out} ({exc.strerror or exc}): the "
                                    "verdict is unknown. Free some space or give another --out, and run "
                                    "again") from None
    if write_baseline is not None:
        from recoverykit import __version__
        from recoverykit.conformance.acceptance import baseline_document
        from recoverykit.conformance.acceptance import write_baseline as write_file
        try:
            from recoverykit.chaos.systematic import breaks_of
            write_file(write_baseline, baseline_document(doc.get("findings", []), written_by="chaos",
                                                         adapter=doc.get("adapter") or {}, kit_version=__version__,
                                                         breaks=breaks_of(doc.get("cases", []))))
        except InvalidArgument as exc:  # checked writable before the run: told, and the verdict still decides the exit
            click.echo(visible(f"{exc}; the baseline was not written"), err=True)
    if as_json:
        _emit_json(doc)
    _summary(doc, out)
    return Verdict(doc["verdict"]).exit_code


def _calibrate(adapter, out: Path, asked, quiet: bool):
    """The pacing after calibrating the runtime once (``recoverykit.conformance.calibration``); its line printed."""
    from recoverykit.conformance.calibration import calibrate
    from recoverykit.conformance.certify import calibration_line, default_adapter
    pacing = calibrate(default_adapter() if adapter is None else adapter, out / "runs", asked)
    if not quiet:
        click.echo(visible(calibration_line(pacing)), err=True)
    return pacing


def _run(adapter, scenarios, points, kinds, random_waves, seed, wave, replay, the_shard, workers, out, timeout_s,
         keep, quiet, total, trace, acceptance) -> dict:
    """The run itself (systematic, replay or random waves); its results document."""
    from recoverykit.chaos import random_waves as waves
    from recoverykit.chaos import systematic
    from recoverykit.conformance.reaper import reap_stale

    if random_waves is None:
        return systematic.run(adapter, scenarios=scenarios, points=points, kinds=kinds, shard=the_shard,
                              workers=workers, out_dir=out, timeout_s=timeout_s, keep=keep, seed=seed, replay=replay,
                              trace=trace, progress=_progress(total, quiet, acceptance.accepted), acceptance=acceptance)
    reap_stale()
    t0, started = time.monotonic(), time.time()
    declared = systematic.declare(adapter, out / "runs")
    selection = {"random": random_waves, "seed": seed}
    try:
        one = scenarios.split(",")[0].strip() if scenarios not in ("all", "") and "," not in scenarios else None
        results = waves.run_waves(random_waves, seed, adapter, base_dir=out / "runs", first_wave=wave or 0,
                                  progress=_progress(random_waves, quiet, acceptance.accepted),
                                  scenario_id=one or waves.SCENARIO)  # --scenarios X: waves of that one scenario
    except KeyboardInterrupt as exc:
        doc = systematic.results_document(getattr(exc, "partial_results", []), declared, mode="random",
                                          shard=the_shard, selection=selection, seed=seed, started=started,
                                          wall_s=time.monotonic() - t0, acceptance=acceptance)
        exc.partial_document = systematic.incomplete(doc, exc, random_waves)  # type: ignore[attr-defined]
        raise
    return systematic.results_document(results, declared, mode="random", shard=the_shard, selection=selection,
                                       seed=seed, started=started, wall_s=time.monotonic() - t0, acceptance=acceptance)


@click.command()
@click.argument("parts", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Write the merged results and report here.")
@click.option("--json", "as_json", is_flag=True, help="Print the merged results document as JSON on stdout.")
@click.option("--check-report", is_flag=True,
              help="Instead: PARTS are REPORT.json RESULTS.json; re-validate the stored report against the results.")
def merge(parts, out_dir, as_json, check_report) -> int:
    """Merge the results of chaos shards (their --out directories or results.json files) into one."""
    from recoverykit.reports import merge as merging

    try:
        if check_report:
            if len(parts) != 2:
                raise InvalidArgument("--check-report takes two paths: report.json results.json")
            problems = merging.check_report(parts[0], parts[1])
            for p in problems:
                click.echo(f"report does not match: {visible(p)}", err=True)
            if not problems:
                click.echo("report matches its results", err=True)
            return 1 if problems else 0
        doc = merging.merge(merging.load_results(p) for p in parts)
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None
    if out_dir:
        try:
            merging.write_all(doc, out_dir)
        except OSError as exc:  # e.g. a directory where results.json belongs: the user's --out, not a kit defect
            raise UsageError(f"cannot write the merged results into {out_dir}: {exc}") from None
    if as_json:
        _emit_json(doc)
    _summary(doc, Path(out_dir) if out_dir else None)
    return Verdict(doc["verdict"]).exit_code
