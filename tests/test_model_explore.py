"""Bounded exploration: the model holds every invariant at depth 6, and a broken transition is caught."""

import networkx as nx
import pytest
from recoverykit.model import abstract as a
from recoverykit.model import abstract_events as ev
from recoverykit.model.catalogue import GoalState
from recoverykit.model.contract import CLAUSES, clause
from recoverykit.model.errors import InvalidArgument
from recoverykit.model.explore import CONFIGURATIONS, explore
from recoverykit.model.invariants import ALL_INVARIANTS, cited_clause_ids


@pytest.fixture(scope="module")
def depth6():
    return explore(6)


def test_depth_six_has_no_violation(depth6):
    assert depth6.ok, [v.to_json() for v in depth6.violations]
    assert depth6.max_depth_reached == 6
    assert depth6.states > 50_000 and depth6.transitions > depth6.states


def test_result_is_a_networkx_graph_and_json(depth6):
    graph = depth6.graph
    assert isinstance(graph, nx.DiGraph)
    assert graph.number_of_nodes() == depth6.states
    assert all("event" in data for _, _, data in list(graph.edges(data=True))[:100])
    data = depth6.to_json()
    assert data["ok"] is True and data["violations"] == []
    assert len(data["invariants_checked"]) == len(ALL_INVARIANTS)
    assert set(data["configurations"]) == set(CONFIGURATIONS)


def test_goal_state_graph(depth6):
    goal = depth6.goal_graph
    assert goal["states_reached"] == sorted(g.value for g in GoalState)
    assert all(check["ok"] for check in goal["checks"])
    exits = {(e["from"], e["to"]): set(e["events"]) for e in goal["edges"]}
    assert not any(src in ("achieved", "cancelled") for src, _ in exits)
    assert exits[("budget_exhausted", "active")] == {"budget_change"}
    assert exits[("paused", "active")] == {"resume"}


def test_every_invariant_cites_an_existing_clause():
    ids = {c.id for c in CLAUSES}
    assert cited_clause_ids() <= ids
    for inv in ALL_INVARIANTS:
        assert clause(inv.clause_id).broke().startswith(f"broke {inv.clause_id}: ")
        assert inv.statement and inv.scope in ("state", "transition", "retry")


def test_every_event_kind_happens(depth6):
    events = {label.partition("(")[0] for _, _, label in depth6.edges}
    for name in ("admit", "pause", "resume", "end", "approve", "deny", "tool_dispatch", "tool_commit", "reconcile",
                 "provider_usage", "verify_met", "notify", "crash", "graceful_exit", "start", "start_crash",
                 "clock_jump", "host_change", "stop_all_exit", "frontend_reload", "retry_click", "task_fail",
                 "budget_change", "revise", "blocked"):
        assert name in events, name


# --- the explorer can fail: deliberately broken transitions, injected through ``handlers`` -------------


def _summing_usage(s, i):
    """Broken: adds each cumulative snapshot to the receipt instead of keeping the watermark."""
    w = s[a.ITEMS][i]
    if s[a.RT] != a.UP or not w[a.PROV] or w[a.ATT_L] >= 2:
        return []
    w = list(w)
    w[a.ATT_L] += 1
    w[a.ATT_W] += w[a.ATT_L]
    w[a.PROV] = 2
    return [(f"provider_usage({i})", ev.put(s, i, w))]


def _restart_resumes_paused(s, i):
    """Broken: recovery treats every item as runnable, paused ones included."""
    out = ev.start(s, i)
    return [(label, (ns[0], ns[1], ns[2], ns[3], tuple(
        tuple(a.RUN if k == a.DES else v for k, v in enumerate(w)) for w in ns[a.ITEMS]))) for label, ns in out]


def test_broken_usage_watermark_is_found_with_a_shortest_path():
    result = explore(4, handlers={"provider_usage": _summing_usage}, build_graph=False)
    assert not result.ok
    found = {(v.invariant, v.configuration): v for v in result.violations}
    violation = found[("usage_never_fabricated", "chat-unknown-tool")]
    assert violation.clause_id == "USG-05"
    assert violation.message.startswith("broke USG-05: ")
    # breadth first: the shortest way to a summed receipt from a queued chat request
    assert violation.path == ["admit(0)", "provider_request(0)", "provider_usage(0)", "provider_usage(0)"]
    # from a turn already running it is one event shorter
    assert len(found[("usage_never_fabricated", "tool-running")].path) == 3


def test_broken_recovery_that_resumes_paused_work_is_found():
    result = explore(3, handlers={"start": _restart_resumes_paused}, build_graph=False)
    names = {v.invariant for v in result.violations}
    assert "paused_leaves_only_by_user" in names
    violation = next(v for v in result.violations if v.invariant == "paused_leaves_only_by_user")
    assert violation.clause_id == "RI-03"
    assert violation.path == ["stop_all_exit", "start"]  # the shortest: stop everything, start again


def test_broken_admission_that_ignores_the_budget_is_found():
    def admit_over_budget(s, i):
        w = s[a.ITEMS][i]
        if s[a.RT] != a.UP or w[a.DES] != a.RUN or w[a.TURN] == a.T_ACTIVE:
            return []
        w = list(w)
        w[a.TURN], w[a.LASTKEY], w[a.REASON] = a.T_ACTIVE, f"{w[a.LASTKEY]}+", a.R[a.ReasonCode.RUNNING]
        return [(f"admit({i})", ev.put(s, i, w))]

    result = explore(5, handlers={"admit": admit_over_budget}, build_graph=False)
    assert "no_admission_over_budget" in {v.invariant for v in result.violations}


def test_depth_zero_checks_only_the_initial_states():
    result = explore(0, build_graph=False)
    assert result.ok and result.states == len(CONFIGURATIONS) and result.transitions == 0
    reach = result.goal_graph["checks"][0]
    assert reach["ok"] is None and "skipped" in reach  # too shallow to ask for every Goal state


@pytest.mark.parametrize("depth", [-1, "6", 2.5, True])
def test_bad_depth_is_an_invalid_argument(depth):
    with pytest.raises(InvalidArgument, match="depth"):
        explore(depth)


def test_unknown_handler_override_is_an_invalid_argument():
    with pytest.raises(InvalidArgument, match="no event handler 'teleport'"):
        explore(1, handlers={"teleport": ev.reload})


def test_docs_list_every_invariant():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "model.md").read_text(encoding="utf-8")
    for inv in ALL_INVARIANTS:
        assert f"| {inv.name} | {inv.clause_id} | {inv.scope} |" in text, inv.name
