"""``recoverykit model``: explore the executable model and report what it proves.

A thin skin over ``recoverykit.model.explore``: parse the options, call ``explore``, print a rich
summary or the JSON, exit 0 when no invariant broke and 1 (invalid) when one did, printing each
violation's shortest event path so it can be replayed by hand.
"""

from __future__ import annotations

import json

import click

# Deeper than this takes minutes and gigabytes; the bound keeps a typo from hanging CI.
MAX_DEPTH = 10


@click.group()
def model() -> None:
    """The executable model of the recovery contract."""


@model.command("explore")
@click.option("--depth", type=click.IntRange(0, MAX_DEPTH), default=6, show_default=True,
              help="Maximum number of events on a path from an initial configuration.")
@click.option("--config", "configs", multiple=True, metavar="NAME",
              help="Start only from this initial configuration (repeatable); default: all of them.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def explore_command(depth: int, configs: tuple[str, ...], as_json: bool) -> None:
    """Explore every abstract state within DEPTH events and check every safety invariant.

    Exits 0 when no invariant broke, 1 when one did (the shortest event path is printed).
    """
    from recoverykit.model.explore import CONFIGURATIONS, explore

    unknown = [c for c in configs if c not in CONFIGURATIONS]
    if unknown:
        raise click.BadParameter(f"unknown configuration(s) {unknown}; choose from {sorted(CONFIGURATIONS)}",
                                 param_hint="--config")
    chosen = {c: CONFIGURATIONS[c] for c in configs} if configs else None
    result = explore(depth, configurations=chosen, build_graph=False)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        _summary(result)
    raise click.exceptions.Exit(0 if result.ok else 1)


def _summary(result) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"model exploration, depth {result.depth}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for name, value in (
        ("initial configurations", len(result.configurations)),
        ("states", f"{result.states:,}"),
        ("transitions", f"{result.transitions:,}"),
        ("deepest level reached", result.max_depth_reached),
        ("invariants checked", len(result.invariants_checked)),
        ("Goal states reached", f"{len(result.goal_graph['states_reached'])} of 6"),
        ("violations", len(result.violations)),
        ("wall time", f"{result.elapsed_s:.2f} s"),
        ("states per second", f"{result.states_per_second:,.0f}"),
    ):
        table.add_row(name, str(value))
    console.print(table)
    # plain echo, never wrapped: a path is meant to be copied
    for violation in result.violations:
        click.secho(violation.message, fg="red", bold=True)
        path = " -> ".join(violation.path) or "(initial state)"
        click.echo(f"  configuration {violation.configuration}: {path}")
    if result.ok:
        click.echo(f"valid: no invariant broke in {result.states:,} states")
    else:
        click.echo(f"invalid: {len(result.violations)} invariant violation(s)")
