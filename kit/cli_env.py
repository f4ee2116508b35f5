"""``recoverykit env``: run the kit's environment by hand (provider, probes, failpoints, reaping).

A thin skin over ``recoverykit.conformance.provider``, ``...probe_tools``, ``recoverykit.chaos.
failpoints`` and ``...reaper``: useful to try a runtime against the scripted provider without the
suite, to check a failpoint spec, and to clean up after a kit that was killed.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path

import click
from recoverykit.errors import UsageError
from recoverykit.model.catalogue import INTERRUPTION_POINTS
from recoverykit.model.errors import InvalidArgument


@click.group()
def env() -> None:
    """The environment the kit owns around a runtime: provider, probe tools, failpoints, reaper."""


@env.command("provider")
@click.option("--script", "script_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The provider script (JSON; see docs/environment.md).")
@click.option("--ledger", "ledger_path", default="provider-ledger.jsonl", show_default=True,
              type=click.Path(dir_okay=False), help="Where the ledger is appended.")
@click.option("--port", default=0, show_default=True, help="TCP port on 127.0.0.1 (0: the OS picks one).")
def provider(script_path: str, ledger_path: str, port: int) -> None:
    """Serve the scripted OpenAI-compatible provider until interrupted.

    Prints its base URL, ledger and the token its /_kit/ endpoints need (X-Recoverykit-Token) as JSON.
    """
    from pydantic import ValidationError
    from recoverykit.conformance.provider import serve

    try:
        running = serve(script_path, ledger_path, port=port)
    except InvalidArgument as exc:  # not a regular file, too large, not JSON (conformance/input_files.py)
        raise UsageError(str(exc)) from None
    except (ValidationError, ValueError) as exc:
        raise UsageError(f"the provider script {script_path} is not valid: {exc}") from None
    stop = threading.Event()
    from recoverykit.conformance.interrupts import SIGNALS
    for sig in SIGNALS:  # SIGHUP too: a closed terminal closes the provider as Ctrl-C does
        signal.signal(sig, lambda *_: stop.set())
    click.echo(json.dumps({"base_url": running.base_url, "ledger": str(Path(ledger_path).resolve()),
                           "token": running.token}), nl=True)
    sys.stdout.flush()
    try:
        stop.wait()
    finally:
        running.close()


@env.command("probe-tools")
@click.option("--witness", required=True, type=click.Path(dir_okay=False), help="The witness log the probes append to.")
@click.option("--broker", default=None, help="The failpoint socket held probes report to.")
def probe_tools(witness: str, broker: str | None) -> None:
    """Print the standard probe tools as JSON (what ``init.probe_tools`` carries)."""
    from recoverykit.conformance.probe_tools import standard_probe_tools

    tools = standard_probe_tools(Path(witness).resolve(), broker)
    click.echo(json.dumps([t.model_dump(mode="json") for t in tools], indent=2))


@env.group("failpoints")
def failpoints() -> None:
    """Failpoint specs and points."""


@failpoints.command("check")
@click.argument("spec")
def check(spec: str) -> None:
    """Parse and validate a RECOVERYKIT_FAILPOINTS value; print its canonical form."""
    from recoverykit.chaos.failpoints import format_spec, parse, validate

    try:
        click.echo(format_spec(validate(parse(spec))))
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None


@failpoints.command("list")
def list_points() -> None:
    """List the interruption points: name, reach, profile, description."""
    for p in INTERRUPTION_POINTS:
        click.echo(f"{p.name:40} {p.reach.value:12} {p.profile.value:16} {p.description}")


@env.command("docs")
@click.option("--path", "doc_path", default="docs/failpoints.md", show_default=True, type=click.Path(dir_okay=False))
@click.option("--write", is_flag=True, help="Rewrite the generated region; without it, only check freshness.")
def docs(doc_path: str, write: bool) -> None:
    """Check (or with --write regenerate) the generated point table in docs/failpoints.md."""
    from recoverykit.chaos.failpoints import refresh_doc

    path = Path(doc_path)
    if not path.exists():
        raise UsageError(f"{doc_path} does not exist; run from the repository root or pass --path")
    current = path.read_text(encoding="utf-8")
    fresh = refresh_doc(current)
    if write:
        path.write_text(fresh, encoding="utf-8")
        click.echo(f"wrote {doc_path}")
    elif fresh != current:
        click.echo(f"{doc_path} is stale; run: recoverykit env docs --write", err=True)
        raise click.exceptions.Exit(1)
    else:
        click.echo(f"{doc_path} is fresh")


@env.command("leftovers")
@click.option("--marker", default=None, help="A run marker; without it, list every stale recoverykit run.")
def leftovers(marker: str | None) -> None:
    """List processes left by a run (by marker) or by runs whose kit died."""
    from recoverykit.conformance.reaper import leftovers as find
    from recoverykit.conformance.reaper import stale_markers

    found = {marker: find(marker)} if marker else stale_markers()
    click.echo(json.dumps({m: [[r.pid, r.create_time] for r in refs] for m, refs in found.items()}))


@env.command("reap")
@click.option("--marker", default=None, help="Kill the processes carrying this run marker.")
@click.option("--stale", is_flag=True, help="Kill the leftovers of every recoverykit run whose kit is dead.")
def reap(marker: str | None, stale: bool) -> None:
    """SIGKILL leftovers (verified by psutil); exits 1 if any survived."""
    from recoverykit.conformance.reaper import reap as reap_marker
    from recoverykit.conformance.reaper import reap_stale

    if bool(marker) == stale:
        raise UsageError("pass exactly one of --marker MARKER or --stale")
    report = reap_marker(marker) if marker else reap_stale()
    click.echo(json.dumps({"killed": [r.pid for r in report.killed],
                           "already_gone": [r.pid for r in report.already_gone],
                           "survivors": [r.pid for r in report.survivors]}))
    if report.survivors:
        raise click.exceptions.Exit(1)
