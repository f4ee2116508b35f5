"""The reference runtime's workspace seeding survives a crash in the middle of it (chaos found this).

A tree kill while a Retry run's isolated attempt was being prepared left its repository half made (a truncated
``.git/HEAD``): ``git init`` then "succeeds" and every later git command says "not a git repository", so the
re-preparation after the restart failed and the user's Retry never reached the provider (RTY-14 at
paperclip_19759/coordinator.settle.after/1/tree_kill, run 1 of the stability benchmark at 65da88b). A repository
with nothing committed yet is made again instead.
"""

from __future__ import annotations

import subprocess

from recoverykit.impl import workspaces


def test_a_repository_a_crash_left_half_made_is_made_again(tmp_path):
    repo = tmp_path / "attempt"
    repo.mkdir()
    workspaces.git("init", "-q", cwd=repo)
    (repo / ".git" / "HEAD").write_text("")  # the crash cut the write short
    workspaces._seeded_repo(repo, "task t, attempt r\n")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=False)
    assert head.returncode == 0, head.stderr
    assert (repo / "TASK.md").read_text() == "task t, attempt r\n"


def test_a_seeded_repository_is_kept(tmp_path):
    repo = tmp_path / "attempt"
    workspaces._seeded_repo(repo, "first\n")
    before = workspaces.git("rev-parse", "HEAD", cwd=repo).stdout
    workspaces._seeded_repo(repo, "second\n")
    assert workspaces.git("rev-parse", "HEAD", cwd=repo).stdout == before
    assert (repo / "TASK.md").read_text() == "first\n"
