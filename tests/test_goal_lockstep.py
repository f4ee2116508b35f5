"""Goal lockstep (issue 13): the user's Goal event sequences derived from the model's exploration, run through the
reference runtime, agree with the model's Goal graph after every event; a runtime that disagrees is caught."""

from __future__ import annotations

import sys

from recoverykit.conformance.environment import Run
from recoverykit.conformance.lockstep_goals import goal_paths, provider_script, run_goal_paths
from recoverykit.model.catalogue import GoalState

REFERENCE = f"{sys.executable} -m recoverykit.impl"


def test_the_paths_come_from_the_explored_goal_graph():
    paths = goal_paths()
    events = {e for p in paths for e in p}
    assert {"pause", "resume", "end", "revise", "budget_change"} <= events
    assert ("pause", "resume", "end") in paths  # the explored cycle active -> paused -> active, then ended
    assert all(p[0] in ("pause", "end", "revise") for p in paths)  # each starts with what an active Goal enables
    assert not any(a[:len(b)] == b for a in paths for b in paths if a != b)  # no path is another's prefix


def test_the_reference_runtime_follows_the_model_on_every_explored_goal_path(tmp_path):
    paths = goal_paths()
    (tmp_path / "run").mkdir()
    with Run(REFERENCE, tmp_path / "run", provider_script(paths)) as run:
        run.start()
        done = run_goal_paths(run, paths)
    problems = [(p.path, c, d) for p in done for c, d in p.problems]
    assert not problems, problems
    assert any(s.endswith(GoalState.CANCELLED.value) for p in done for s in p.states)


def test_a_runtime_whose_resume_does_not_leave_paused_is_caught(tmp_path, monkeypatch):
    """The comparison can fail: a Resume the runtime acknowledges but the observed Goal stays paused."""
    import recoverykit.conformance.lockstep_goals as lg

    monkeypatch.setattr(lg, "SEEN_WITHIN_S", 0.5)
    real_send = lg._send

    def no_resume(run, name, goal, revision):  # the runtime "acknowledges" the Resume but never applies it
        return True if name == "resume" else real_send(run, name, goal, revision)

    monkeypatch.setattr(lg, "_send", no_resume)
    path = ("pause", "resume")
    (tmp_path / "run").mkdir()
    with Run(REFERENCE, tmp_path / "run", provider_script([path])) as run:
        run.start()
        (done,) = lg.run_goal_paths(run, [path])
    assert done.problems and done.problems[0][0] == "GOAL-01" and "model says active" in done.problems[0][1]
