"""Where a task's run works: workspace choice, preparation and binding, with real git in the data dir.

Seed 001, "Admission and execution": a Retry continues in the task's own local directory only when that is safe
(the same one directory the failed run used, still bound to and owned by the task, not shared, its executor
stopped and its generation settled, nothing else holding it, its git status readable from the directory itself);
otherwise in a fresh isolated attempt under ``isolated-workspace-attempts/<company>/<task>/<run>``, seeded from
committed files, the previous directory left unmodified. Preparing the same attempt again after a restart reuses
the directory that attempt already bound, with its strategy (#19759): a task directory is never the base of a
new git worktree; a worktree's base is the project's checkout or the task's own worktree.

git runs as a subprocess with an argument list (never a shell), with a fixed identity and no system or global
configuration, so the kit can read the result with ``git worktree list`` itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .db import Database
from .store import now, one, process_alive

ISOLATED = "isolated-workspace-attempts"
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "runtime",
           "GIT_AUTHOR_EMAIL": "runtime@localhost", "GIT_COMMITTER_NAME": "runtime",
           "GIT_COMMITTER_EMAIL": "runtime@localhost", "GIT_TERMINAL_PROMPT": "0"}


class PrepareFailed(Exception):
    """Preparation failed before any provider dispatch; ``code`` is the run's error code."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=str(cwd), env=env, capture_output=True, text=True, timeout=30,
                          check=False)


SCRATCH = ".seeding"  # under the data dir: repositories being made, and half-made ones set aside


def _seeded_repo(path: Path, seed_text: str, scratch: Path) -> None:
    """A git repository at ``path`` holding one commit of the seed files (idempotent: kept if already there).

    The repository is made in a private directory under ``scratch`` (outside every tree a reader of workspaces
    looks at); its seed file, then its ``.git`` (the commit point), are renamed into ``path``, so no crash leaves a
    half-made repository there and nothing else in ``path`` is touched. A half-made ``.git`` an older version (or
    a crash in the old way) left has nothing committed: it is renamed aside before it is removed, since a ``git``
    child of a killed worker may still be writing in it (a worker kill spares its children; chaos found an
    ``rmtree`` racing such a child's ``config.lock``)."""
    if (path / ".git").exists() and git("rev-parse", "HEAD", cwd=path).returncode == 0:
        return
    path.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    _sweep(scratch)
    tag = f"{os.getpid()}-{os.urandom(4).hex()}"
    fresh = scratch / f"{tag}-seed"
    fresh.mkdir()
    try:
        made = git("init", "-q", cwd=fresh)
        if made.returncode != 0:
            raise PrepareFailed("workspace_validation_failed", f"cannot create a repository in {path}: "
                                                               f"{made.stderr.strip()}")
        (fresh / "TASK.md").write_text(seed_text)
        git("add", "TASK.md", cwd=fresh)
        done = git("commit", "-q", "-m", "seed", cwd=fresh)
        if done.returncode != 0:
            raise PrepareFailed("workspace_validation_failed", f"cannot seed {path}: {done.stderr.strip()}")
        if (path / ".git").exists():
            aside = scratch / f"{tag}-half-made"
            os.rename(path / ".git", aside)
            shutil.rmtree(aside, ignore_errors=True)
        os.replace(fresh / "TASK.md", path / "TASK.md")
        os.rename(fresh / ".git", path / ".git")
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def _sweep(scratch: Path) -> None:
    """Remove what processes that are gone left in ``scratch`` (a crash in the middle of a seeding)."""
    for entry in scratch.iterdir():
        pid = entry.name.split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid), None):
            shutil.rmtree(entry, ignore_errors=True)


def git_readable(path: Path) -> bool:
    """Git status is readable from the directory itself (it is its own top level, not a parent's)."""
    top = git("rev-parse", "--show-toplevel", cwd=path) if path.is_dir() else None
    if top is None or top.returncode != 0 or Path(top.stdout.strip()).resolve() != path.resolve():
        return False
    return git("--no-optional-locks", "status", "--porcelain", cwd=path).returncode == 0


def add_worktree(data: Path, base: str, path: str) -> None:
    """A new git worktree of ``base`` (a checkout) at ``path``; both relative to the data dir."""
    if (data / path).exists():
        return
    (data / path).parent.mkdir(parents=True, exist_ok=True)
    made = git("worktree", "add", "-q", "--detach", str(data / path), cwd=data / base)
    if made.returncode != 0:
        raise PrepareFailed("git_worktree_base_not_git_checkout",
                            f"requested isolated_workspace with git_worktree, but base workspace {base} is not a git "
                            f"checkout: {made.stderr.strip()}")


def bind(db: Database, run: dict, path: str, strategy: str, *, owner: str | None, base: str | None) -> None:
    """Record the workspace (once) and bind it to the run (inside the caller's tx)."""
    db.execute("INSERT OR IGNORE INTO workspaces (path, strategy, task_id, run_id, base, isolated, created_at)"
               " VALUES (?,?,?,?,?,?,?)", (path, strategy, owner, run["run_id"] if owner else None, base,
                                           int(path.startswith(ISOLATED + "/")), now()))
    db.execute("UPDATE runs SET workspace=? WHERE run_id=?", (path, run["run_id"]))


def reusable(db: Database, data: Path, task: dict, prior: dict | None) -> str | None:
    """The prior run's directory when a Retry may continue there (seed 001's conditions), else None."""
    if prior is None or not prior["workspace"]:
        return None
    ws = one(db, "SELECT * FROM workspaces WHERE path=?", (prior["workspace"],))
    if ws is None or ws["task_id"] != task["task_id"] or ws["strategy"] in ("project_checkout", "shared"):
        return None  # not bound to and owned by this task, or a shared workspace
    if prior["state"] in ("queued", "preparing", "bootstrapping", "dispatched"):
        return None  # the prior executor is not stopped
    coordinator = one(db, "SELECT * FROM coordinators WHERE run_id=?", (prior["run_id"],))
    if coordinator is None or coordinator["state"] not in ("terminal_failure", "completed"):
        return None  # its recovery generation is not settled
    holders = one(db, "SELECT COUNT(*) AS n FROM runs WHERE workspace=? AND run_id<>? AND state IN"
                      " ('queued','preparing','bootstrapping','dispatched')", (ws["path"], prior["run_id"]))
    if holders["n"]:
        return None  # another run holds it
    if not git_readable(data / ws["path"]):
        return None
    return ws["path"]


def prepare(db: Database, data: Path, task: dict, run: dict, company: str) -> tuple[str, str]:
    """Choose, create and bind the run's workspace; (path, strategy). Re-preparation reuses the bound one."""
    if run["workspace"]:
        ws = one(db, "SELECT * FROM workspaces WHERE path=?", (run["workspace"],))
        strategy = ws["strategy"] if ws else "task_directory"
        if not (data / run["workspace"]).is_dir():
            raise PrepareFailed("workspace_validation_failed", f"the bound directory {run['workspace']} is gone")
        return run["workspace"], strategy
    prior = one(db, "SELECT * FROM runs WHERE run_id=?", (run["retry_of"],)) if run["retry_of"] else None
    if prior is None:  # the task's first run
        if task["project"]:
            checkout = f"projects/{task['project']}"
            _seeded_repo(data / checkout, f"project {task['project']}\n", data / SCRATCH)
            path = f"worktrees/{company}/{task['task_id']}"
            add_worktree(data, checkout, path)
            bind(db, run, checkout, "project_checkout", owner=None, base=None)
            bind(db, run, path, "git_worktree", owner=task["task_id"], base=checkout)
            return path, "git_worktree"
        path = f"agents/{company}"  # the agent's shared home: not the task's own directory
        (data / path).mkdir(parents=True, exist_ok=True)
        bind(db, run, path, "shared", owner=None, base=None)
        return path, "shared"
    reuse = reusable(db, data, task, prior)
    if reuse is not None:
        ws = one(db, "SELECT * FROM workspaces WHERE path=?", (reuse,))
        db.execute("UPDATE runs SET workspace=? WHERE run_id=?", (reuse, run["run_id"]))
        return reuse, ws["strategy"]
    path = f"{ISOLATED}/{company}/{task['task_id']}/{run['run_id']}"  # a fresh isolated attempt
    _seeded_repo(data / path, f"task {task['task_id']}, attempt {run['run_id']}\n", data / SCRATCH)
    bind(db, run, path, "task_directory", owner=task["task_id"], base=None)
    return path, "task_directory"
