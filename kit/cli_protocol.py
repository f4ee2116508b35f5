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
