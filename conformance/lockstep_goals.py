"""Goal lockstep: the user's Goal event sequences the model's exploration derives, run against an adapter, with the
Goal's observed state, revision and flags compared with the model after every event.

The chat lockstep machine (``lockstep``) drives work items; a Goal's graph is the model's ``goal_transition`` over
the events a user sends (pause, resume, end, a revision, a budget change). ``goal_paths`` reads the Goal graph the
bounded exploration found (``model.explore``: which Goal state each event leads to) and lists every path of user
events from ``active``, each also with a revision and a budget change inserted, which the model says change the
revision only. ``run_goal_paths`` runs each path on a Goal of its own, kept from working on by itself (every
provider request of its script is held), so each change is the event's: after every event the Goal must be in
``goal_transition``'s state, at the model's revision, with a phase exactly while it is neither paused nor terminal
(GOAL-01) and with ``can_end`` / ``can_resume`` as its state allows (UI-04). A request the adapter refuses is the
model's too only where the model does not enable it (a terminal Goal is never revised or resumed).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from recoverykit.conformance.environment import Run
from recoverykit.conformance.pacing import SEEN
from recoverykit.conformance.provider import ProviderTimeout
from recoverykit.conformance.provider_script import script_tag
from recoverykit.model.catalogue import GoalState
from recoverykit.model.decisions import GoalEvent, goal_transition
from recoverykit.model.explore import CONFIGURATIONS, explore

USER_EVENTS: dict[str, GoalEvent] = {"pause": GoalEvent.PAUSE, "resume": GoalEvent.RESUME, "end": GoalEvent.END,
                                     "revise": GoalEvent.REVISION, "budget_change": GoalEvent.BUDGET_CHANGE}
TERMINAL = (GoalState.ACHIEVED, GoalState.CANCELLED)
HOLD_ALL = [{"kind": "hold", "at_chunk": 0, "attempts": list(range(1, 21))}]
SEEN_WITHIN_S = SEEN.seconds  # how long an event's effect may take to show (a Pause reaches a worker mid-request)
EXPLORE_DEPTH = 4


def goal_paths(max_events: int = 3) -> list[tuple[str, ...]]:
    """Paths of user events from ``active`` in the explored Goal graph (to a terminal state or ``max_events``
    long), each also with a revision first and a budget change after its first event."""
    result = explore(EXPLORE_DEPTH, configurations={"goal-with-budget": CONFIGURATIONS["goal-with-budget"]})
    moves: dict[str, list[tuple[str, str]]] = {}
    for edge in result.goal_graph["edges"]:
        for name in edge["events"]:
            if name in USER_EVENTS:
                moves.setdefault(edge["from"], []).append((name, edge["to"]))
    paths: list[tuple[str, ...]] = []

    def walk(state: str, path: tuple[str, ...]) -> None:
        if path:
            paths.append(path)
        if len(path) == max_events or GoalState(state) in TERMINAL:
            return
        for name, to in sorted(moves.get(state, [])):
            walk(to, (*path, name))

    walk(GoalState.ACTIVE.value, ())
    variants = [("revise", *p) for p in paths] + [(p[0], "budget_change", *p[1:]) for p in paths]
    every = set(paths + variants)
    longest = {p for p in every if not any(len(q) > len(p) and q[:len(p)] == p for q in every)}  # a prefix is
    return sorted(longest, key=lambda p: (len(p), p))  # judged after each of its events on the longer path


def goal_script(script_id: str) -> dict:
    """A Goal that never gets an answer: every attempt of its first request is held."""
    return {"id": script_id, "usage_style": "final", "verifier": {},
            "steps": [{"text": "[[goal:candidate]] held", "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                       "faults": HOLD_ALL}]}


def provider_script(paths: list[tuple[str, ...]]) -> dict:
    return {"scripts": [goal_script(f"gls{i}") for i in range(len(paths))], "hold_timeout_s": 120.0}


@dataclass
class PathRun:
    path: tuple[str, ...]
    problems: list[tuple[str, str]] = field(default_factory=list)  # (clause id, what differed)
    states: list[str] = field(default_factory=list)


def _expected_flags(state: GoalState) -> dict[str, Any]:
    return {"can_end": state not in TERMINAL, "can_resume": state in (GoalState.PAUSED, GoalState.BLOCKED)}


def _send(run: Run, name: str, goal: dict, revision: int) -> bool:
    if name == "revise":
        out = run.op("goal_update", goal_id=goal["goal_id"], revision=revision,
                     objective=f"{script_tag(goal['script'])} write the report, revision {revision + 1}", reason=None)
    elif name == "budget_change":
        out = run.op("budget_set", work_id=goal["work_id"], limit={"max_tokens": 100000, "max_cost_usd": None})
    else:
        out = run.op(name, work_id=goal["work_id"])
    return out.ok


def _compare(found: dict | None, state: GoalState, revision: int) -> list[tuple[str, str]]:
    if found is None:
        return [("GOAL-01", "the Goal is not in the snapshot")]
    out = []
    if found.get("state") != state.value:
        out.append(("GOAL-01", f"state {found.get('state')}, the model says {state.value}"))
    if found.get("revision") != revision:
        out.append(("GOAL-01", f"revision {found.get('revision')}, the model says {revision}"))
    if (found.get("phase") is None) != (state is GoalState.PAUSED or state in TERMINAL):
        out.append(("GOAL-01", f"phase {found.get('phase')} while {state.value}"))
    for flag, want in _expected_flags(state).items():
        if found.get(flag) != want:
            out.append(("UI-04", f"{flag} {found.get(flag)} while {state.value}"))
    return out


def run_path(run: Run, script_id: str, path: tuple[str, ...]) -> PathRun:
    """One path on a Goal of its own, compared with the model after every event."""
    done = PathRun(path)
    created = run.op("goal_create", session_id=f"s-{script_id}", objective=f"{script_tag(script_id)} write the "
                     "report", budget=None)
    if not created.ok:
        done.problems.append(("GOAL-01", "goal_create was refused"))
        return done
    goal = {**created.reply.model_dump(mode="json"), "script": script_id}
    with contextlib.suppress(ProviderTimeout):  # a Goal still queued behind busy workers works on no more than it
        run.wait_held(SEEN_WITHIN_S, script_id=script_id)
    try:
        _follow(run, goal, path, done)
    finally:  # the Goal's worker is let go (ended, its held request cut), so the next path's Goal gets one
        if not done.states or not done.states[-1].endswith(("cancelled", "achieved")):
            run.op("end", work_id=goal["work_id"])
        for held in run.provider.held():
            if held.script_id == script_id:
                run.provider.release(held, cut=True)
    return done


def _follow(run: Run, goal: dict, path: tuple[str, ...], done: PathRun) -> None:
    state, revision = GoalState.ACTIVE, int(goal["revision"])
    for name in path:
        enabled = state not in TERMINAL and (name != "resume" or state is GoalState.PAUSED)
        if _send(run, name, goal, revision):
            revision += name == "revise"
            state = goal_transition(state, USER_EVENTS[name], False)
        elif enabled:
            done.problems.append(("GOAL-01", f"{name} was refused while the model enables it ({state.value})"))
        deadline = time.monotonic() + run.window(SEEN_WITHIN_S)
        while True:
            found = next((g for g in run.observe().get("goals") or [] if g["goal_id"] == goal["goal_id"]), None)
            diff = _compare(found, state, revision)
            if not diff or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        done.states.append(f"{name}->{state.value}")
        if diff:
            done.problems += [(c, f"after {' '.join(path[:path.index(name) + 1])}: {d}") for c, d in diff]
            break


def run_goal_paths(run: Run, paths: list[tuple[str, ...]]) -> list[PathRun]:
    """Every path on its own Goal in one started runtime (``provider_script(paths)`` is its script)."""
    return [run_path(run, f"gls{i}", p) for i, p in enumerate(paths)]


__all__ = ["PathRun", "goal_paths", "provider_script", "run_goal_paths", "run_path"]
