"""The kit's own look at a runtime's workspaces on disk (seed 001): evidence the runtime does not report.

A Paperclip runtime prepares run workspaces inside its data dir: fresh isolated attempts under
``isolated-workspace-attempts/<company>/<task>/<run>``, git worktrees of a checkout. What it says in ``observe``
about them is its own word; this module reads the disk itself, with ``git worktree list --porcelain`` run by the
kit (argument list, no shell, no user or system git configuration), and records what it found in the history as
a ``workspace_inspection`` event (not a restart: ``history.NOT_A_RESTART``), so the checks and a stored bundle
judge the same evidence.

Recorded detail: ``label`` (the drive's moment), ``attempts`` (every ``<company>/<task>/<run>`` directory under
the isolated-attempts tree), ``repos`` (each git repository's path with the worktrees ``git`` lists for it,
main worktree first), ``present`` (each workspace the runtime reported: is it on disk), relative to the data
dir, and ``kept`` (every file the kit planted earlier in the run: its content's sha-256 now, null if gone).

``plant`` leaves the agent's uncommitted work in a directory the kit writes itself (a file the runtime never
committed), recorded the same way with ``planted`` (file -> sha-256), so a check can tell whether a Retry
silently dropped it (RTY-08).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

from recoverykit.conformance import runtime_dir

ISOLATED = "isolated-workspace-attempts"
MAX_DEPTH = 6  # repositories deeper than this under the data dir are not looked for
GIT_TIMEOUT_S = 10.0


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {**env, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"}


def worktrees(repo: Path, data_dir: Path) -> list[str] | None:
    """The worktrees git lists for ``repo`` (main first), relative to ``data_dir``; None if git cannot say."""
    try:
        done = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=str(repo), env=_git_env(),
                              capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    out = []
    for line in done.stdout.splitlines():
        if line.startswith("worktree "):
            out.append(_relative(Path(line[len("worktree "):]), data_dir))
    return out


def _relative(path: Path, data_dir: Path) -> str:
    try:
        return str(path.resolve().relative_to(data_dir.resolve()))
    except ValueError:
        return str(path)


def scan(data_dir: Path) -> dict[str, Any]:
    """What is on disk now: the isolated attempts and every main repository with its worktrees."""
    data_dir = Path(data_dir)
    root = data_dir / ISOLATED
    attempts = sorted(str(p.relative_to(data_dir)) for p in root.glob("*/*/*") if p.is_dir()) if root.is_dir() else []
    repos: dict[str, list[str] | None] = {}
    for here, dirs, _files in os.walk(data_dir):
        depth = len(Path(here).relative_to(data_dir).parts)
        if ".git" in dirs and (Path(here) / ".git").is_dir():  # a main repository (a linked worktree has a file)
            repos[_relative(Path(here), data_dir)] = worktrees(Path(here), data_dir)
        dirs[:] = [d for d in dirs if d != ".git" and depth < MAX_DEPTH]
    return {"attempts": attempts, "repos": repos}


PLANTED_NAME = "rk-agent-work.txt"  # the agent's uncommitted work, as the kit leaves it


def _data_dir(run: Any) -> Path:
    return Path(getattr(run, "data_dir", None) or Path(run.run_dir) / "data")  # a Run, or chaos's CaseEnv


def _sha(data_dir: Path, rel: str) -> str | None:
    """A planted file's hash now; None if it is gone or no longer a regular file (a link or a FIFO the runtime
    put in its place is never followed or opened for a blocking read)."""
    try:
        with runtime_dir.open_regular(data_dir, rel) as fd:
            digest = hashlib.sha256()
            while block := os.read(fd, 1 << 20):
                digest.update(block)
            return digest.hexdigest()
    except OSError:
        return None


def _safe(rel: str) -> bool:
    return bool(rel) and not Path(rel).is_absolute() and ".." not in Path(rel).parts


def inspect(run: Any, label: str, planted: dict[str, str] | None = None) -> dict[str, Any]:
    """Scan ``run``'s data dir and record it in the run's history, with whether each workspace directory the
    runtime reported in its last observation exists (``present``) and what became of every file the kit
    planted (``kept``)."""
    data_dir = _data_dir(run)
    found = scan(data_dir)
    history = run.recorder.history
    last = history.final_observation()
    reported = {w["path"] for w in (last.snapshot.get("workspaces") or [])} if last is not None else set()
    found["present"] = {p: (data_dir / p).is_dir() for p in sorted(reported) if _safe(p)}
    earlier = {f: sha for i in inspections(history) for f, sha in (i.detail.get("planted") or {}).items()}
    found["kept"] = {f: _sha(data_dir, f) for f in sorted({*earlier, *(planted or {})}) if _safe(f)}
    if planted:
        found["planted"] = dict(planted)
    run.recorder.fault("workspace_inspection", label=label, **found)
    return found


def plant(run: Any, workspace: str | None, label: str) -> str | None:
    """Leave uncommitted work (a file no commit holds) in ``workspace``, a directory relative to the data dir,
    and record it with an inspection; the file's path, or None when there is no such directory."""
    if not workspace or not _safe(workspace) or not runtime_dir.is_dir(_data_dir(run), workspace):
        return None
    rel = f"{workspace}/{PLANTED_NAME}"
    body = f"work in progress of {workspace}, left by the kit at {label}\n".encode()
    try:  # the runtime's directory: a new file of the kit's renamed into place, never through a link it planted
        runtime_dir.write_new(_data_dir(run), rel, body)
    except OSError:
        return None
    inspect(run, label, planted={rel: hashlib.sha256(body).hexdigest()})
    return rel


def inspections(history: Any) -> list[Any]:
    return [f for f in history.faults if f.kind == "workspace_inspection"]
