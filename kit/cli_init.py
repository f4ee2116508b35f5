"""``recoverykit init DIR --template {bare,framework}``: a runnable adapter project on the SDK, in one command.

A newcomer's first hour went to the boilerplate every Python adapter writes again (issue 33): the dispatch
loop is the SDK's, but the run-intent table, the controls, the worker's start and ready signal, observe and a
first test were still to write. The project is a package run as ``python -m <package>`` (the name with '-' as
'_'), on the SDK's ``RunIntentStore`` and ``RetryPolicy``: it writes only what is its own. The templates are
package data (``kit/templates/``, shipped in the wheel): ``common/`` is in every project, ``<template>/`` adds
the runtime side. A template file ``x.tmpl`` is written as ``x`` with ``__NAME__`` replaced by the adapter's
name and ``__PACKAGE__`` (in paths too) by the package's. A scaffolded project passes
``recoverykit protocol ping --start`` as it is (tests/test_init.py).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import click
from recoverykit.errors import UsageError

TEMPLATES = {
    "bare": "your runtime is your own code: a worker process answering requests, with the SDK's run-intent store "
            "(RunIntentStore) between adapter and worker (a stand-in worker that makes one model call per request)",
    "framework": "your runtime is built on a framework with its own persistence and resume API (the LangGraph / "
                 "DBOS pattern): the worker resumes each thread from its last checkpoint; the SDK's RunIntentStore "
                 "keeps the run intent (pause, end) the framework does not",
}
ABOUT = {
    "bare": "The runtime is worker.py (a stand-in: REPLACE it with your runtime's worker). The run intent is the\n"
            "SDK's RunIntentStore: this adapter writes each user control there before it replies, starts and lists\n"
            "the worker, and reads the store for quiesce and observe.",
    "framework": "The runtime is worker.py on a framework with its own persistence and resume API (framework.py is a\n"
                 "stand-in: DELETE it and import yours). The SDK's RunIntentStore keeps the run intent the framework\n"
                 "does not (run, paused, done, cancelled): this adapter writes each user control there before it\n"
                 "replies, starts and lists the worker, and reads the store for quiesce and observe.",
}
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


def _walk(folder, prefix: str = ""):
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            yield from _walk(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith(".tmpl"):
            yield prefix + entry.name[: -len(".tmpl")], entry


def _files(template: str) -> dict[str, str]:
    """``{path in the project: text}``: ``common/`` then ``<template>/`` (``__PACKAGE__/`` is the package)."""
    root = resources.files("recoverykit") / "templates"
    return {path: entry.read_text(encoding="utf-8") for folder in ("common", template)
            for path, entry in _walk(root / folder)}


def package_name(name: str) -> str:
    """The project's Python package: the adapter's name with '-' as '_' (``python -m my_agent``)."""
    return name.replace("-", "_")


def scaffold(directory: str | Path, template: str, name: str) -> list[Path]:
    """Write the project of ``template`` into ``directory`` (absent or empty); returns the files written."""
    target = Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{directory} exists and is not an empty directory; recoverykit init writes a new project "
                         "and never overwrites one")
    files = _files(template)
    package = package_name(name)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, text in files.items():
        path = target / filename.replace("__PACKAGE__", package)
        path.parent.mkdir(exist_ok=True)
        path.write_text(text.replace("__ABOUT__", ABOUT[template]).replace("__NAME__", name)
                        .replace("__PACKAGE__", package), encoding="utf-8")
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

    Writes a package run as `python -m <package>` (the name with '-' as '_'): adapter.py (the adapter, on the
    SDK's RunIntentStore), worker.py (a stand-in runtime you replace; framework.py too for --template
    framework), __main__.py; beside it test_ping.py (runs `recoverykit protocol ping --start`) and a README
    with the exact ping, certify and chaos commands. The project passes ping as it is:

        recoverykit init my-adapter && cd my-adapter
        recoverykit protocol ping --start --adapter "python -m my_adapter"

    Exit 0 written; 64 DIRECTORY not empty, or a bad name.
    """
    name = name if name is not None else _default_name(directory)
    if not NAME_RE.match(name):
        raise UsageError(f"--name {name!r}: lower-case letters, digits and '-', starting with a letter")
    written = scaffold(directory, template, name)
    click.echo(f"wrote {len(written)} files of the {template} template in {directory}:")
    for path in written:
        click.echo(f"  {path.relative_to(directory).as_posix()}")
    click.echo(f'next: cd {directory} && recoverykit protocol ping --start --adapter "python -m {package_name(name)}"')
    return 0
