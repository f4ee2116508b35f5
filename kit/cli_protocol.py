"""`recoverykit protocol`: the adapter protocol's schema, its document, and `ping` for adapter authors."""

from __future__ import annotations

import json

import click


@click.group()
def protocol() -> None:
    """The adapter protocol: schema, docs, and a first check of an adapter."""


@protocol.command()
def schema() -> None:
    """Print the JSON Schema (draft 2020-12) of every protocol message."""
    from recoverykit.conformance.protocol import json_schema

    click.echo(json.dumps(json_schema(), indent=2, sort_keys=False))


@protocol.command()
def docs() -> None:
    """Print docs/protocol.md (generated from the same schemas)."""
    from recoverykit.conformance.protocol_docs import render

    click.echo(render(), nl=False)


@protocol.command()
@click.option("--adapter", "adapter", required=True, help="The adapter command (split like a shell would; no shell).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="Seconds to wait for each reply.")
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="Run directory for the adapter's stderr log and message record (default: a temporary one).")
@click.option("--max-line-bytes", type=click.IntRange(min=64), default=None, help="Per-line limit (default 1 MiB).")
@click.option("--start", "start", is_flag=True,
              help="Also start the runtime (with the kit's scripted provider), list its processes, observe once "
                   "and stop it: a runtime that crashes at start is told here, pointing at its stderr log.")
def ping(adapter: str, timeout_s: float, out: str | None, max_line_bytes: int | None, start: bool) -> None:
    """Handshake, observe, shut down: the first check of a new adapter.

    Exits 0 when the adapter speaks the protocol, 1 on a protocol break, 2 when the outcome is unknown
    (silence past the timeout, observe refused, or with --start a runtime that did not start or died at
    once), 64 when the command cannot be started.
    """
    from recoverykit.conformance.errors import AdapterCommandError
    from recoverykit.conformance.ping import ping as run_ping
    from recoverykit.errors import UsageError

    try:
        result = run_ping(adapter, timeout_s=timeout_s, out=out, max_line_bytes=max_line_bytes, start=start)
    except AdapterCommandError as exc:
        raise UsageError(str(exc)) from None
    from recoverykit.conformance.safe_text import visible

    for line in result.lines:
        click.echo(visible(line))
    if result.error:
        click.echo(visible(result.error), err=True)
    click.get_current_context().exit(result.exit_code)
