"""The reference runtime's workspace seeding survives a crash in the middle of it (chaos found this).

A tree kill while a Retry run's isolated attempt was being prepared left its repository half made (a truncated
``.git/HEAD``): ``git init`` then "succeeds" and every later git command says "not a git repository", so the
re-preparation after the restart failed and the user's Retry never reached the provider (RTY-14 at
paperclip_19759/coordinator.settle.after/1/tree_kill, run 1 of the stability benchmark at 65da88b). A repository
with nothing committed yet is made again instead.
"""

from __future__ import annotations

import subprocess
import threading

from recoverykit.impl import workspaces


def test_a_repository_a_crash_left_half_made_is_made_again(tmp_path):
    repo = tmp_path / "attempt"
    repo.mkdir()
    workspaces.git("init", "-q", cwd=repo)
    (repo / ".git" / "HEAD").write_text("")  # the crash cut the write short
    workspaces._seeded_repo(repo, "task t, attempt r\n", tmp_path / ".seeding")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=False)
    assert head.returncode == 0, head.stderr
    assert (repo / "TASK.md").read_text() == "task t, attempt r\n"


def test_a_seeded_repository_is_kept(tmp_path):
    repo = tmp_path / "attempt"
    workspaces._seeded_repo(repo, "first\n", tmp_path / ".seeding")
    before = workspaces.git("rev-parse", "HEAD", cwd=repo).stdout
    workspaces._seeded_repo(repo, "second\n", tmp_path / ".seeding")
    assert workspaces.git("rev-parse", "HEAD", cwd=repo).stdout == before
    assert (repo / "TASK.md").read_text() == "first\n"


def test_a_half_made_repository_a_live_git_child_still_writes_in_is_made_again(tmp_path):
    """A worker kill spares the worker's ``git`` child, which may still be writing in the half-made ``.git``
    while the restarted worker prepares again (chaos: paperclip_19759/coordinator.settle.after/1/worker_kill, run
    2 of the stability benchmark at bb26e7a, where removing that ``.git`` in place raced the child's
    ``config.lock`` and failed the user's Retry). The half-made one is set aside first, so the race cannot reach
    the preparation."""
    scratch = tmp_path / ".seeding"
    for n in range(20):
        repo = tmp_path / f"attempt-{n}"
        (repo / ".git" / "objects").mkdir(parents=True)
        for i in range(200):
            (repo / ".git" / "objects" / f"o{i}").write_text("x")
        stop = threading.Event()

        def child(git_dir=repo / ".git", stop=stop):  # the orphan: a lock file made and dropped, over and over
            while not stop.is_set():
                try:
                    (git_dir / "config.lock").write_text("[core]\n")
                    (git_dir / "config.lock").unlink()
                except OSError:
                    pass

        writer = threading.Thread(target=child, daemon=True)
        writer.start()
        try:
            workspaces._seeded_repo(repo, f"task t, attempt r{n}\n", scratch)
        finally:
            stop.set()
            writer.join(5)
        assert workspaces.git("rev-parse", "HEAD", cwd=repo).returncode == 0
        assert (repo / "TASK.md").read_text() == f"task t, attempt r{n}\n"


def test_seeding_leaves_nothing_beside_the_repository_and_sweeps_what_dead_processes_left(tmp_path):
    scratch = tmp_path / ".seeding"
    (scratch / "999999-deadbeef-seed" / ".git").mkdir(parents=True)  # a seeding a crash cut short
    repo = tmp_path / "isolated-workspace-attempts" / "acme" / "t-1" / "r-1"
    workspaces._seeded_repo(repo, "task t-1, attempt r-1\n", scratch)
    assert sorted(p.name for p in repo.iterdir()) == [".git", "TASK.md"]
    assert sorted(p.name for p in repo.parent.iterdir()) == ["r-1"]  # no scratch among the attempts
    assert list(scratch.iterdir()) == []
