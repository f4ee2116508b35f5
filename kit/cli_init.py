"""``recoverykit init DIR --template {bare,framework}``: a runnable adapter project on the SDK, in one command.

A newcomer's first hour went to the boilerplate every Python adapter writes again (issue 33): the dispatch
loop is the SDK's, but the run-intent table, the controls, the worker's start and ready signal, observe and a
first test were still to write. The templates are package data (``kit/templates/``, shipped in the wheel):
``common/`` is in every project, ``<template>/`` adds the runtime side. A template file ``x.tmpl`` is written
as ``x`` with ``__NAME__`` replaced by the adapter's name. A scaffolded project passes
``recoverykit protocol ping --start`` as it is (tests/test_init.py).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import click
from recoverykit.errors import UsageError

TEMPLATES = {
    "bare": "your runtime is your own code: a worker process answering requests, with a store the adapter can "
            "read (a stand-in worker that makes one model call per request)",
    "framework": "your runtime is built on a framework with its own persistence and resume API (the LangGraph / "
                 "DBOS pattern): the worker resumes each thread from its last checkpoint; the adapter keeps the run "
                 "intent (pause, end) the framework does not",
}
ABOUT = {
    "bare": "The runtime is worker.py (a stand-in: REPLACE it with your runtime's worker) and its durable run intent\n"
            "store.py; this adapter writes each user control there before it replies, starts and lists the worker,\n"
            "and reads the store for quiesce and observe.",
    "framework": "The runtime is worker.py on a framework with its own persistence and resume API (framework.py is a\n"
                 "stand-in: DELETE it and import yours); store.py keeps the run intent the framework does not (run,\n"
                 "paused, done, cancelled). This adapter writes each user control there before it replies, starts\n"
                 "and lists the worker, and reads the store for quiesce and observe.",
}
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


def _files(template: str) -> dict[str, str]:
    root = resources.files("recoverykit") / "templates"
    out = {}
    for folder in ("common", template):
        for entry in sorted((root / folder).iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".tmpl"):
                out[entry.name[: -len(".tmpl")]] = entry.read_text(encoding="utf-8")
    return out


def scaffold(directory: str | Path, template: str, name: str) -> list[Path]:
    """Write the project of ``template`` into ``directory`` (absent or empty); returns the files written."""
    target = Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{directory} exists and is not an empty directory; recoverykit init writes a new project "
                         "and never overwrites one")
    files = _files(template)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, text in files.items():
        path = target / filename
        path.write_text(text.replace("__ABOUT__", ABOUT[template]).replace("__NAME__", name), encoding="utf-8")
        written.append(path)
    return written


def _default_name(directory: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", Path(directory).resolve().name.lower()).strip("-")
    return name if NAME_RE.match(name) else "my-runtime"


@click.command(epilog="Templates:\n\n" + "\n\n".join(f"  {k}: {v}" for k, v in TEMPLATES.items()))
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--template", type=click.Choice(sorted(TEMPLATES)), default="bare", show_default=True,
              help="bare: your own runtime (a worker process and a store); framework: a framework with its own "
                   "persistence and resume API (LangGraph, DBOS).")
@click.option("--name", default=None, help="The adapter's name in its handshake (default: from DIRECTORY).")
def init(directory, template, name) -> int:
    """Scaffold an adapter project on the SDK (recoverykit.adapter) in DIRECTORY (new or empty).

    Writes adapter.py (the adapter), worker.py and store.py (a stand-in runtime you replace; framework.py too
    for --template framework), test_ping.py (runs `recoverykit protocol ping --start`) and a README with the
    exact ping, certify and chaos commands. The project passes ping as it is:

        recoverykit init my-adapter && cd my-adapter
        recoverykit protocol ping --start --adapter "python adapter.py"

    Exit 0 written; 64 DIRECTORY not empty, or a bad name.
    """
    name = name if name is not None else _default_name(directory)
    if not NAME_RE.match(name):
        raise UsageError(f"--name {name!r}: lower-case letters, digits and '-', starting with a letter")
    written = scaffold(directory, template, name)
    click.echo(f"wrote {len(written)} files of the {template} template in {directory}:")
    for path in written:
        click.echo(f"  {path.name}")
    click.echo(f'next: cd {directory} && recoverykit protocol ping --start --adapter "python adapter.py"')
    return 0
