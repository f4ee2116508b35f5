"""``recoverykit contract``: print the contract catalogue (table or JSON) and the generated docs.

A thin skin over ``recoverykit.model.contract``; everything it prints is built in memory from the
catalogue, so it works the same from an installed wheel as from a checkout.
"""

from __future__ import annotations

import json
import sys

import click
from recoverykit.model.catalogue import Profile
from recoverykit.model.contract import CLAUSES, Clause, Method, by_method, by_profile, clause, render_markdown, to_json
from recoverykit.model.errors import InvalidArgument


def _write(text: str) -> None:
    # UTF-8 whatever the locale: the catalogue quotes seed 003 in Chinese.
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (some embedding); let click pick the encoding
        click.echo(text, nl=False)
        return
    sys.stdout.flush()
    buffer.write(text.encode("utf-8"))
    buffer.flush()


def _table(clauses: tuple[Clause, ...]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"recovery contract: {len(clauses)} clauses", show_lines=False)
    for name in ("id", "kind", "profile", "methods", "statement", "source"):
        table.add_column(name, overflow="fold", no_wrap=name in ("id", "kind"))
    for c in clauses:
        methods = ",".join(m.value for m in Method if m in c.methods)
        table.add_row(c.id, c.kind.value, c.profile.value, methods, c.statement, f"{c.seed[:3]} / {c.section}")
    Console().print(table)


@click.group()
def contract() -> None:
    """The contract catalogue: every seed clause a runtime must honour, with its source."""


@contract.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of clause objects.")
@click.option("--profile", type=click.Choice([p.value for p in Profile]), help="Only clauses of this profile.")
@click.option("--method", type=click.Choice([m.value for m in Method]), help="Only clauses checkable this way.")
def list_clauses(as_json: bool, profile: str | None, method: str | None) -> None:
    """List the clauses (a table, or JSON with --json)."""
    chosen = CLAUSES
    if profile is not None:
        chosen = tuple(c for c in chosen if c in by_profile(profile))
    if method is not None:
        chosen = tuple(c for c in chosen if c in by_method(method))
    if as_json:
        _write(json.dumps(to_json(chosen), indent=2, ensure_ascii=False) + "\n")
    else:
        _table(chosen)


@contract.command("show")
@click.argument("clause_id")
@click.option("--json", "as_json", is_flag=True, help="Print the clause as a JSON object.")
def show(clause_id: str, as_json: bool) -> None:
    """Show one clause by id (e.g. OWN-06)."""
    try:
        found = clause(clause_id)
    except InvalidArgument as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        _write(json.dumps(found.to_json(), indent=2, ensure_ascii=False) + "\n")
        return
    methods = ", ".join(m.value for m in Method if m in found.methods)
    _write(f"{found.id} ({found.kind.value}, {found.profile.value}): {found.statement}\n"
           f"  source: {found.seed}, section \"{found.section}\"\n"
           f"  quote: \"{found.quote}\"\n"
           f"  checked by: {methods}\n")


@contract.command("docs")
def docs() -> None:
    """Print docs/contract.md (regenerate: recoverykit contract docs > docs/contract.md)."""
    _write(render_markdown())


@contract.command("coverage")
@click.option("--json", "as_json", is_flag=True, help="Print the coverage document as JSON.")
@click.option("--results", "results_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Take the reference verdicts from this certify results.json instead of running certify on the "
                   "bundled reference runtime (about 10 s).")
def coverage_command(as_json: bool, results_path: str | None) -> None:
    """Per clause: profile, the checks that judge it, their evidence, killing mutants, the reference verdict."""
    from recoverykit.reports.coverage import coverage
    verdicts = _reference_verdicts(results_path)
    doc = coverage(verdicts)
    if as_json:
        _write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="what the kit judges, per clause")
    for name in ("clause", "profile", "status", "reference", "evidence", "checks", "killing mutants"):
        table.add_column(name, overflow="fold")
    for row in doc["clauses"]:
        if row["checks"] or row["killing_mutants"]:
            table.add_row(row["clause"], row["profile"], row["status"], row["reference_verdict"],
                          row["evidence"] or "", ", ".join(x["check"] for x in row["checks"]),
                          ", ".join(row["killing_mutants"]))
    console = Console()
    console.print(table)
    for row in doc["clauses"]:
        if row["why_not_judged"] and row["status"] != "judged":
            where = "" if row["observable"] else " (not observable from outside)"
            console.print(f"not judged {row['clause']}{where}: {row['why_not_judged']}", highlight=False)
    for profile, t in doc["profiles"].items():
        share = t["judged_share_of_observable"]
        console.print(f"{profile}: {t['clauses']} clauses, {t['observable']} observable from outside; "
                      f"{t['with_check']} with a check, {t['valid']} valid on the reference runtime, "
                      f"{t['proven']} proven by a mutant, {t['judged']} judged ({t['unproven']} unproven)"
                      + (f"; {share:.0%} of the observable judged" if share is not None else ""), highlight=False)


def _reference_verdicts(results_path: str | None) -> dict[str, str]:
    """clause -> verdict, from a results.json or a fresh certify run of the bundled reference runtime."""
    if results_path is not None:
        try:
            from recoverykit.conformance.input_files import read_json
            doc = read_json(results_path, "--results")
            return {c: v["verdict"] for c, v in doc["clauses"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise click.UsageError(f"--results {results_path}: not a certify results.json ({exc})") from None
    import tempfile

    from recoverykit.conformance.certify import Options, certify
    with tempfile.TemporaryDirectory(prefix="rk-coverage-") as out:
        cert = certify(Options(out=__import__("pathlib").Path(out) / "certify"))
        return {c: v.value for c, v in cert.clauses.items()}
