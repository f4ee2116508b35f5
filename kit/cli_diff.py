"""``recoverykit diff OLD NEW``: what changed between two runs of one runtime, the question a CI gate asks.

A thin skin over ``recoverykit.reports.diff``: OLD and NEW are two certify results or two chaos results (a
``--out`` directory, its results.json, or a stored report folder with results.json.gz). Exit 1 when a clause
NEW breaks was not broken in OLD (a regression), 0 otherwise, whatever the absolute verdicts; 64 for bad
input (no results there, two runtimes, certify against chaos).
"""

from __future__ import annotations

import json

import click
from recoverykit.errors import UsageError
from recoverykit.model.errors import InvalidArgument


@click.command()
@click.argument("old", type=click.Path(exists=True))
@click.argument("new", type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON instead of text.")
def diff(old, new, as_json) -> int:
    """Compare two results of one runtime: OLD (e.g. main's last run) and NEW (this change's run).

    Each is a results.json (or results.json.gz) of `recoverykit certify` or `recoverykit chaos`, the --out
    directory holding it, or a stored report folder such as reports/langgraph. Prints the regressions (clauses
    NEW breaks that OLD did not), the clauses fixed, the new unknowns with NEW's reasons, and the changed
    cells (chaos: point x restart kind; certify: cases) that both runs selected.

    Exit 1 on any regression, 0 otherwise; 64 bad input (no results there, results of two different runtimes,
    a certify run against a chaos run).
    """
    from recoverykit.reports import diff as diffing

    try:
        result = diffing.compare(old, new)
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result, indent=1, sort_keys=True))
    else:
        click.echo(diffing.text(result), nl=False)
    return int(result["exit_code"])
