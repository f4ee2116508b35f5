"""``recoverykit certify`` and ``recoverykit check``: thin skins over ``recoverykit.conformance.certify``.

The failpoint broker is the conformance environment's own (``recoverykit.conformance.broker``), so
nothing is wired in here. Exit codes: 0 valid, 1 invalid, 2 unknown, 64 usage (a malformed
``--baseline`` too); accepted findings (``--accept``, ``--baseline``) decide none of them;
143 / 130 / 129 when SIGTERM / SIGINT / SIGHUP stopped the run (``recoverykit.signals``; every ending:
docs/exit-codes.md).
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import click
from recoverykit.conformance.safe_text import rich_text
from recoverykit.model.catalogue import Profile, Verdict
from recoverykit.model.errors import InvalidArgument
from rich.console import Console
from rich.table import Table

STYLE = {"valid": "green", "invalid": "bold red", "unknown": "yellow", "not_applicable": "dim", "accepted": "magenta"}


@click.command()
@click.option("--adapter", "adapter", default=None, metavar="CMD",
              help="The adapter command (split like a shell would, never run by one). "
                   "Default: the bundled reference runtime, `python -m recoverykit.impl`.")
@click.option("--profile", "profiles", multiple=True, default=("chat_core",), show_default=True,
              type=click.Choice([p.value for p in Profile]),
              help="Contract profile(s) whose required clauses decide the verdict (repeatable).")
@click.option("--seed", type=int, default=None, help="Seed of the lockstep machine (printed when not given).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Results directory (results.json, junit.xml, report.md, report.html, runs/, bundles/). Default: "
                   "a new temp dir. An earlier run there moves to previous/NNN/; one still running there: exit 64.")
@click.option("--json", "as_json", is_flag=True, help="Print results.json to stdout instead of the table.")
@click.option("--examples", type=click.IntRange(min=1), default=None,
              help="Lockstep examples (default: the settings profile's).")
@click.option("--settings", "settings_profile", type=click.Choice(["ci", "thorough"]), default="ci",
              show_default=True, help="Hypothesis settings profile of the lockstep machine.")
@click.option("--only", multiple=True, metavar="CASE",
              help="Run only these cases: scenario ids or `lockstep` (repeatable); used by replay commands.")
@click.option("--strict-evidence", is_flag=True,
              help="A required clause held valid only by what the runtime reports about itself (observe), with no "
                   "evidence of the kit's own (provider ledger, witness log, process table), is unknown.")
@click.option("--accept", "accept", multiple=True, metavar="CLAUSE",
              help="A known finding: this clause is reported `accepted` (never valid) and does not decide the exit "
                   "code; one that holds is reported as a stale acceptance (repeatable, or a comma list).")
@click.option("--baseline", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Accept the findings of a baseline file written by --write-baseline (a malformed one: exit 64).")
@click.option("--write-baseline", "write_baseline", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Write this run's findings (every clause judged invalid) as a baseline file.")
@click.option("--timeout-scale", "timeout_scale", default="1", show_default=True, metavar="FACTOR",
              help="Multiply every window the kit waits in for the runtime (a model request held, a settle, a "
                   "start, a reply) by FACTOR (0.1 to 100): a slow runtime or a loaded machine gets more time. "
                   "Calibration may raise it, never lower it.")
@click.option("--calibrate/--no-calibrate", "calibrate", default=True, show_default=True,
              help="Before the cases, start the runtime once and time its start and one turn; a slow one gets its "
                   "windows scaled up (at most x10; recorded in results.json under pacing.calibration).")
def certify(adapter, profiles, seed, out, as_json, examples, settings_profile, only, strict_evidence, accept,
            baseline, write_baseline, timeout_scale, calibrate) -> None:
    """Certify an adapter against the recovery contract: scenarios, lockstep machine, history checker.

    Exit 0 valid, 1 invalid, 2 unknown (a required clause never exercised), 64 usage error;
    interrupted by SIGTERM 143, by SIGINT 130, by SIGHUP 129 (partial results.json marked incomplete).
    """
    from recoverykit.conformance.certify import Options
    from recoverykit.conformance.certify import certify as run
    from recoverykit.conformance.client_process import split_command
    from recoverykit.conformance.scenarios import all_scenarios
    if adapter is not None:  # `--adapter ""` (an unset CI variable) must never certify the reference runtime
        try:
            split_command(adapter)
        except InvalidArgument as exc:
            raise click.UsageError(str(exc)) from None
    from recoverykit.conformance.acceptance import load
    from recoverykit.conformance.client import start_timeout_s
    from recoverykit.conformance.pacing import Pacing, check_scale
    try:
        scale = check_scale(timeout_scale)
        acceptance = load(accept, baseline)
        start_timeout_s()  # a bad RECOVERYKIT_START_TIMEOUT_S is the user's input: a usage error before any run
    except InvalidArgument as exc:
        raise click.UsageError(str(exc)) from None
    if write_baseline is not None and not write_baseline.parent.resolve().is_dir():
        raise click.UsageError(f"--write-baseline {write_baseline}: no directory {write_baseline.parent} to write in")
    if write_baseline is not None:  # before the run: an unwritable path must not cost a whole run, then its verdict
        from recoverykit.conformance.acceptance import check_writable
        try:
            check_writable(write_baseline)
        except InvalidArgument as exc:
            raise click.UsageError(str(exc)) from None
    ids = [s.id for s in all_scenarios()]
    bad = [c for c in only if c != "lockstep" and c not in ids]
    if bad:
        raise click.UsageError(f"--only {bad[0]!r} is not a case; use `lockstep` or one of {', '.join(ids)}")
    from recoverykit import signals
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                   "{task.total} cases"), TimeElapsedColumn(), console=err, transient=True)
    task = bar.add_task("certifying", total=len(ids) + 1 if not only else len(only))

    def progress(name: str, what: str) -> None:
        if signals.stopping():
            return  # a case that ends now was cut by the signal: its verdict says nothing
        if what == "start":
            bar.update(task, description=f"running {name}")
        else:
            bar.console.print(f"  {name}: [{STYLE.get(what, '')}]{what}[/]")
            bar.advance(task)

    options = Options(adapter=adapter, profiles=tuple(profiles), seed=seed, out=out, examples=examples,
                      settings_profile=settings_profile, only=tuple(only),
                      progress=progress, strict_evidence=strict_evidence, acceptance=acceptance,
                      write_baseline=write_baseline, pacing=Pacing(scale, scale), calibrate=calibrate,
                      notice=lambda line: bar.console.print(rich_text(line), highlight=False))
    from recoverykit.conformance import subreaper
    from recoverykit.conformance.reaper import reap_stale
    reap_stale()  # leftovers of an earlier kit that was killed before it could clean up
    try:
        with subreaper.adopting(), signals.handled(), bar:  # orphans of the run are the kit's: reaped at its end
            cert = run(options)
    except InvalidArgument as exc:
        raise click.UsageError(str(exc)) from None
    except KeyboardInterrupt as exc:  # SIGTERM / SIGINT: reaped, partial results written; exit 128 + signum
        partial = getattr(exc, "partial_results", None)
        if partial is not None:  # the report is a bonus on the way out, never a crash
            with contextlib.suppress(Exception):
                _write_report(Path(partial))
        signals.finish(exc, partial)
    code = cert.exit_code
    try:
        _write_report(cert.out / "results.json")
    except OSError as exc:  # a full disk under --out: results.json is there, the reports are not; never exit 70
        click.echo(f"the reports could not be written to {cert.out} ({exc.strerror or exc}); results.json was; "
                   "the verdict is unknown", err=True)
        code = code if code > 128 else Verdict.UNKNOWN.exit_code
    if cert.baseline_error is not None:
        Console(stderr=True).print(f"{cert.baseline_error}; the baseline was not written", markup=False,
                                   highlight=False)
    if as_json:
        click.echo(json.dumps(cert.as_dict(), indent=2))
    else:
        _table(cert, Console())
    sys.exit(code)


def _write_report(results: Path) -> None:
    """report.md and report.html beside results.json (``recoverykit report`` renders the same from it)."""
    from recoverykit.conformance.private_files import privatize
    from recoverykit.reports.merge import REPORT_HTML, REPORT_MD, write_report
    write_report(None, [json.loads(results.read_text(encoding="utf-8"))], html=results.parent / REPORT_HTML,
                 md=results.parent / REPORT_MD)
    for name in (REPORT_HTML, REPORT_MD):
        privatize(results.parent / name)  # as private as results.json: 0600


def _table(cert, console: Console) -> None:
    from recoverykit.conformance.proofs import proof_of
    table = Table(title=rich_text(f"recoverykit certify: {cert.adapter_info.get('name', cert.adapter)} "
                                  f"{cert.adapter_info.get('version', '')}"))
    table.add_column("clause")
    table.add_column("verdict")
    table.add_column("required")
    table.add_column("evidence")
    table.add_column("proof")
    quiet = {Verdict.UNKNOWN: 0, Verdict.NOT_APPLICABLE: 0}
    judged = {c for case in cert.cases for r in case.results for c in [r.clause_id]}
    for clause_id, verdict in sorted(cert.clauses.items()):
        if clause_id not in judged and clause_id not in cert.required and verdict in quiet:
            quiet[verdict] += 1  # never exercised: counted below, listed in results.json
            continue
        basis = cert.bases.get(clause_id, "")
        proof = proof_of(clause_id) if basis else ""
        label = cert.label(clause_id)
        shown = f"[{STYLE[label]}]{label}[/]" + (" [yellow](stale acceptance)[/]" if clause_id in cert.accepted
                                                  and verdict is Verdict.VALID else "")
        table.add_row(clause_id, shown,
                      "yes" if clause_id in cert.required else "", basis,
                      "[yellow]unproven[/]" if proof == "unproven" and verdict is Verdict.VALID else proof)
    console.print(table)
    console.print(f"{quiet[Verdict.UNKNOWN]} more clauses of the declared profiles were never exercised (unknown) "
                  f"and {quiet[Verdict.NOT_APPLICABLE]} belong to undeclared profiles (not applicable); "
                  "every clause is in results.json", highlight=False)
    for case in cert.cases:
        if case.verdict in (Verdict.INVALID, Verdict.UNKNOWN):
            label = "accepted" if case.accepted(cert.accepted) else case.verdict.value
            console.print(rich_text(label, STYLE[label]), rich_text(f"{case.name}: {case.message}"), highlight=False)
            for line in case.program:
                console.print(rich_text(f"    {line}"), highlight=False)
            for more in case.findings[1:]:  # the lockstep search went on after its first finding
                console.print(rich_text(f"    and {more['message']} ({more['steps']} steps, {more['source']}):"),
                              highlight=False)
                for line in more["program"]:
                    console.print(rich_text(f"      {line}"), highlight=False)
            if case.bundle:
                console.print(rich_text(f"    bundle: {case.bundle}"), highlight=False)
                console.print(rich_text(f"    replay: {cert.replay_command(case.name)}"), highlight=False)
    _findings(cert, console)
    unjudged = sorted(c for c in cert.required if cert.clauses.get(c) is not Verdict.VALID
                      and cert.clauses.get(c) is not Verdict.INVALID and c not in cert.accepted)
    if unjudged:
        console.print(f"[yellow]required but never judged valid[/] (missing evidence is not a pass): "
                      f"{', '.join(unjudged)}", highlight=False)
    console.print("verdict:", rich_text(cert.verdict.value, STYLE[cert.verdict.value]),
                  rich_text(f" (seed {cert.seed}, {cert.seconds:.1f} s; results: {cert.out / 'results.json'}, "
                            f"junit: {cert.out / 'junit.xml'}, report: {cert.out / 'report.html'})"))


def _findings(cert, console: Console) -> None:
    """Failures grouped per clause (count, shortest replay), then what became of each acceptance."""
    findings = cert.findings()
    if findings:
        console.print("findings per clause (runs that broke it; shortest replay):", highlight=False)
    for f in findings:
        best = f["shortest"]
        steps = f", {best['steps']} steps" if best.get("steps") is not None else ""
        style = STYLE["accepted" if f["status"] == "accepted" else "invalid"]
        where = ", ".join(dict.fromkeys(f["seen_in"]))
        console.print(rich_text(f"  {f['clause']}"), rich_text(f["status"], style),
                      rich_text(f"x{f['count']} in {where}; shortest: {best['case']}{steps}: {best['replay']}"),
                      highlight=False)
    summary = cert.acceptance_summary()
    if summary["confirmed"]:
        console.print(rich_text("accepted findings (known, not passed): " + ", ".join(
            f"{c} ({cert.accepted[c]})" for c in summary["confirmed"]), STYLE["accepted"]), highlight=False)
    if summary["stale"]:
        console.print(rich_text("stale acceptances (accepted, yet they held in this run; drop them): "
                                + ", ".join(summary["stale"]), "yellow"), highlight=False)
    if summary["not_exercised"]:
        console.print(rich_text("accepted but not exercised in this run: " + ", ".join(summary["not_exercised"])),
                      highlight=False)
    if summary["changed"]:
        console.print(rich_text("baseline entries not applied (the clause's statement changed since; accept "
                                "again if still meant): " + ", ".join(summary["changed"]), "yellow"), highlight=False)
    if summary.get("grown"):
        console.print(rich_text("accepted aggregate clauses not applied: they now rest on clauses the baseline did not "
                                "accept, and gate: " + ", ".join(summary["grown"]), "yellow"), highlight=False)
    if summary.get("adapter_warning"):
        Console(stderr=True).print(rich_text(f"warning: {summary['adapter_warning']}", "yellow"), highlight=False)


@click.command()
@click.argument("bundle", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the clause results as JSON.")
def check(bundle: Path, as_json: bool) -> None:
    """Re-check a stored bundle with the history checker and exit with its verdict (0 / 1 / 2)."""
    from recoverykit.conformance.bundle import recheck
    from recoverykit.model.errors import MalformedRecord
    try:
        verdict, results = recheck(bundle)
    except (InvalidArgument, MalformedRecord) as exc:  # a corrupt bundle is bad input: a usage error
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(json.dumps({"verdict": verdict.value, "results": [r.as_dict() for r in results]}, indent=2))
    else:
        console = Console()
        for r in results:
            console.print(rich_text(f"{r.verdict.value:8}", STYLE[r.verdict.value]), rich_text(r.text),
                          highlight=False)
        console.print(f"verdict: [{STYLE[verdict.value]}]{verdict.value}[/]")
    sys.exit(verdict.exit_code)
