"""Bounded breadth-first exploration of the abstract state space, with every invariant checked.

``explore(depth)`` starts from ``CONFIGURATIONS`` (one or two work items: chat and Goal, with and
without an unknown-effect tool, budgets, paused work, a runtime already down mid-tool, a Paperclip
Retry), applies every enabled event of ``abstract_events.HANDLERS`` breadth first up to ``depth``
events, checks every state invariant in every reachable state and every transition invariant on
every edge, and returns the result as data (``ExploreResult.to_json``). Breadth first means the
path recorded for a violation is a shortest one. The Goal state graph (the projection of all edges
on Goal states) is checked separately: every Goal state reachable, achieved and cancelled absorbing,
budget_exhausted left only by a budget change, paused only by a resume (or the user's end).

``handlers`` overrides entries of the event table: the tests pass a deliberately broken handler
this way and expect the explorer to find it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import networkx as nx
from recoverykit.model import abstract as a
from recoverykit.model import abstract_events as ev
from recoverykit.model.catalogue import GoalState
from recoverykit.model.contract import clause
from recoverykit.model.errors import InvalidArgument
from recoverykit.model.invariants import ALL_INVARIANTS, fused

if TYPE_CHECKING:
    import networkx as nx

_CHAT_Q = a.item(a.CHAT)
_RUNNING_TOOL = a.item(a.CHAT, turn=a.T_ACTIVE, tool=a.TOOL_DISPATCHED, child=1, exec=1, gen=1, owner=1, ckpt=0,
                       last_key="2:w0:1:0", reason=a.R[a.ReasonCode.RUNNING])

CONFIGURATIONS: dict[str, tuple] = {
    "chat-unknown-tool": (a.UP, 0, 0, None, (_CHAT_Q,)),
    "goal-with-budget": (a.UP, 0, 0, None, (a.item(a.GOAL, limit=1),)),
    "chat-and-goal": (a.UP, 0, 0, None, (a.item(a.CHAT, effect=a.EFF_READ_ONLY), a.item(a.GOAL))),
    "tool-running": (a.UP, 0, 0, None, (_RUNNING_TOOL,)),
    "paused-goal-and-running-chat": (a.UP, 0, 0, None, (a.item(a.GOAL, desired=a.PAUSED), _RUNNING_TOOL)),
    "down-mid-tool": (a.DOWN, 0, 0, None, (a.item(a.CHAT, turn=a.T_ACTIVE, tool=a.TOOL_DISPATCHED, exec=1, gen=1,
                                                  ckpt=0, last_key="2:w0:1:0", reason=a.R[a.ReasonCode.RUNNING]),)),
    "goal-waiting": (a.UP, 0, 0, None, (a.item(a.GOAL, wait=a.W_LIVE, wait_v=1, phase=a.PH_WAITING, commit=1, gen=1,
                                               owner=1, last_key="2:w0:1:0", turn=a.T_COMPLETED,
                                               reason=a.R[a.ReasonCode.WAITING_DEPENDENCY]),)),
    # the initial attempt has failed at t=0 and the first retry is scheduled (30 s + 20 % jitter)
    "paperclip-retry": (a.UP, 0, 0, (1, 1, 0, 0, 36, 1, 1), (_CHAT_Q,)),
}


@dataclass
class Violation:
    invariant: str
    clause_id: str
    message: str
    path: list[str]
    configuration: str
    state: dict

    def to_json(self) -> dict:
        return {"invariant": self.invariant, "clause": self.clause_id, "message": self.message,
                "configuration": self.configuration, "path": self.path, "state": self.state}


@dataclass
class ExploreResult:
    depth: int
    max_depth_reached: int
    states: int
    transitions: int
    configurations: list[str]
    invariants_checked: list[dict]
    violations: list[Violation]
    goal_graph: dict
    elapsed_s: float
    cpu_s: float = 0.0  # process CPU time: on a shared machine, the figure other jobs do not skew
    edges: list[tuple[int, int, str]] = field(default_factory=list, repr=False)
    _graph: nx.DiGraph | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def states_per_second(self) -> float:
        return self.states / self.elapsed_s if self.elapsed_s else 0.0

    @property
    def graph(self) -> nx.DiGraph:
        """The explored state graph (nodes are state ids, edges carry their ``event``), built on first use."""
        if self._graph is None:
            import networkx  # imported on first use: importing the model stays cheap

            graph = networkx.DiGraph()
            graph.add_nodes_from(range(self.states))
            graph.add_edges_from((u, v, {"event": label}) for u, v, label in self.edges)
            self._graph = graph
        return self._graph

    def to_json(self) -> dict:
        return {"depth": self.depth, "max_depth_reached": self.max_depth_reached, "states": self.states,
                "transitions": self.transitions, "configurations": self.configurations,
                "invariants_checked": self.invariants_checked, "violations": [v.to_json() for v in self.violations],
                "goal_graph": self.goal_graph, "elapsed_s": round(self.elapsed_s, 3), "cpu_s": round(self.cpu_s, 3),
                "states_per_second": round(self.states_per_second), "ok": self.ok}


def describe(state: tuple) -> dict:
    """A readable form of an abstract state for reports."""
    items = [{name: value for name, value in zip(a.FIELDS, w, strict=True)} for w in state[a.ITEMS]]
    for w in items:
        w["reason"] = a.REASONS[w["reason"]].value
        w["gstate"] = None if w["gstate"] == a.NO_GOAL else a.GOAL_STATES[w["gstate"]].value
    return {"runtime": "up" if state[a.RT] == a.UP else "down", "host_changed": bool(state[a.HOSTF]),
            "clock_jumped": bool(state[a.JUMPED]), "retry": state[a.RETRY], "items": items}


def _path(sid: int, parent: list[int], via: list[str]) -> list[str]:
    out = []
    while parent[sid] >= 0:
        out.append(via[sid])
        sid = parent[sid]
    return out[::-1]


def explore(depth: int = 6, *, configurations: Mapping[str, tuple] | None = None,
            handlers: Mapping[str, ev.Handler] | None = None, build_graph: bool = True,
            max_violations: int = 20) -> ExploreResult:
    """Explore every state reachable in at most ``depth`` events; see the module docstring.

    ``build_graph`` builds the networkx graph right away (outside the timed part); otherwise
    ``ExploreResult.graph`` builds it on first use.
    """
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise InvalidArgument(f"depth must be a non-negative int, got {depth!r} ({type(depth).__name__})")
    configs = dict(CONFIGURATIONS if configurations is None else configurations)
    table = dict(ev.HANDLERS)
    for name, handler in (handlers or {}).items():
        if name not in table:
            raise InvalidArgument(f"no event handler {name!r} to override; known: {sorted(table)}")
        table[name] = handler
    item_handlers = [table[n] for n in ev.ITEM_HANDLERS]
    global_handlers = [table[n] for n in ev.GLOBAL_HANDLERS]
    state_ok, edge_ok, retry_ok = fused("state"), fused("transition"), fused("retry")

    started, cpu_started = time.perf_counter(), time.process_time()
    ids: dict[tuple, int] = {}
    states: list[tuple] = []
    parent: list[int] = []
    via: list[str] = []
    origin: list[str] = []
    edges: list[tuple[int, int, str]] = []
    goal_edges: dict[tuple[str, str], set[str]] = {}
    goal_seen: set[str] = set()
    violations: list[Violation] = []
    broken: set[tuple[str, str]] = set()
    item_moves: dict[tuple, list[tuple[str, tuple]]] = {}

    def report(scope: str, args: tuple, sid: int, state: tuple, extra_label: str | None = None) -> None:
        # a fused check failed: find which invariants broke; each is reported once per configuration
        for inv in ALL_INVARIANTS:
            if inv.scope != scope or inv.check(*args):
                continue
            key = (inv.name, origin[sid])
            if key in broken or len(violations) >= max_violations:
                continue
            broken.add(key)
            path = _path(sid, parent, via) + ([extra_label] if extra_label else [])
            violations.append(Violation(inv.name, inv.clause_id, clause(inv.clause_id).broke(inv.statement), path,
                                        origin[sid], describe(state)))

    frontier: list[int] = []
    for name, initial in configs.items():
        if initial in ids:
            continue
        sid = len(states)
        ids[initial] = sid
        states.append(initial)
        parent.append(-1)
        via.append("")
        origin.append(name)
        frontier.append(sid)
        for w in initial[a.ITEMS]:
            if w[a.GSTATE] != a.NO_GOAL:
                goal_seen.add(a.GOAL_STATES[w[a.GSTATE]].value)
            if not state_ok(initial, w):
                report("state", (initial, w), sid, initial)

    level_reached = 0
    # The cyclic garbage collector would rescan the ever-growing state table every few thousand
    # allocations; the walk creates no reference cycles, so the collector is paused while it runs.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for level in range(depth):
            next_frontier: list[int] = []
            for sid in frontier:
                s = states[sid]
                items = s[a.ITEMS]
                n = len(items)
                produced: list[tuple[str, int, tuple]] = []
                if s[a.RT] == a.UP:  # every item event needs a running runtime
                    head = s[:a.ITEMS]
                    for t in range(n):
                        # Item events see only the runtime, the host and their own item, so their outcomes
                        # are computed once per (runtime, host, index, item) and reused in every state
                        # that differs only in the other items.
                        key = (s[a.RT], s[a.HOSTF], t, items[t])
                        moves = item_moves.get(key)
                        if moves is None:
                            moves = [(label, ns[a.ITEMS][t])
                                     for handler in item_handlers for label, ns in handler(s, t)]
                            item_moves[key] = moves
                        for label, nw in moves:
                            produced.append((label, t, (*head, (*items[:t], nw, *items[t + 1:]))))
                for handler in global_handlers:
                    for label, ns in handler(s, -1):
                        produced.append((label, -1, ns))
                for label, target, ns in produced:
                    nid = ids.get(ns)
                    new = nid is None
                    if new:
                        nid = len(states)
                        ids[ns] = nid
                        states.append(ns)
                        parent.append(sid)
                        via.append(label)
                        origin.append(origin[sid])
                        next_frontier.append(nid)
                    edges.append((sid, nid, label))
                    if ns is s:
                        continue  # a self-loop (a reload) changes nothing, so no invariant can break on it
                    name = label.partition("(")[0]
                    nitems = ns[a.ITEMS]
                    global_change = ns[a.RT] != s[a.RT] or ns[a.HOSTF] != s[a.HOSTF]
                    for i in range(n):
                        pw, nw = items[i], nitems[i]
                        if pw is nw and not global_change:
                            continue  # an untouched item was checked in the state it came from
                        own = target == i
                        if not edge_ok(name, own, pw, nw):
                            report("transition", (name, own, pw, nw), sid, ns, label)
                        if new and not state_ok(ns, nw):
                            report("state", (ns, nw), nid, ns)
                        if pw[a.GSTATE] != nw[a.GSTATE]:
                            gfrom, gto = a.GOAL_STATES[pw[a.GSTATE]].value, a.GOAL_STATES[nw[a.GSTATE]].value
                            goal_seen.add(gto)
                            goal_edges.setdefault((gfrom, gto), set()).add(name)
                    pr, nr = s[a.RETRY], ns[a.RETRY]
                    if pr is not None and nr is not pr and not retry_ok(label, pr, nr):
                        report("retry", (label, pr, nr), sid, ns, label)
            if next_frontier:
                level_reached = level + 1
            frontier = next_frontier
    finally:
        if gc_was_enabled:
            gc.enable()

    goal_graph = _check_goal_graph(goal_seen, goal_edges, violations, depth, configurations is not None)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    result = ExploreResult(
        depth=depth, max_depth_reached=level_reached, states=len(states), transitions=len(edges),
        configurations=list(configs),
        invariants_checked=[{"name": inv.name, "clause": inv.clause_id, "scope": inv.scope,
                             "statement": inv.statement} for inv in ALL_INVARIANTS],
        violations=violations, goal_graph=goal_graph, elapsed_s=elapsed, cpu_s=cpu, edges=edges)
    if build_graph:
        result.graph  # noqa: B018 - built now, after the timed exploration
    return result


# The least depth at which every Goal state is reachable from CONFIGURATIONS (achieved needs
# admit, todo_complete, verify_met); shallower runs report the reachability check as skipped.
GOAL_REACH_DEPTH = 3

# Goal states and the only events that may move a Goal out of them.
GOAL_EXITS: dict[str, frozenset[str]] = {
    GoalState.ACHIEVED.value: frozenset(),
    GoalState.CANCELLED.value: frozenset(),
    GoalState.PAUSED.value: frozenset({"resume", "end"}),
    GoalState.BUDGET_EXHAUSTED.value: frozenset({"budget_change", "end"}),
}
_GOAL_CLAUSE = {GoalState.ACHIEVED.value: "GOAL-06", GoalState.CANCELLED.value: "GOAL-06",
                GoalState.PAUSED.value: "RI-03", GoalState.BUDGET_EXHAUSTED.value: "RI-03"}


def _check_goal_graph(seen: set[str], edges: dict[tuple[str, str], set[str]], violations: list[Violation],
                      depth: int, custom: bool) -> dict:
    checks = []
    unreached = [g.value for g in GoalState if g.value not in seen]
    skip = None
    if custom:
        skip = "custom configurations: reachability is asked of the default set only"
    elif depth < GOAL_REACH_DEPTH:
        skip = f"depth {depth} is below {GOAL_REACH_DEPTH}, the least that reaches them all"
    if skip:
        checks.append({"check": "every Goal state reachable", "ok": None, "unreached": unreached, "skipped": skip})
    else:
        checks.append({"check": "every Goal state reachable", "ok": not unreached, "unreached": unreached})
    if unreached and not skip:
        violations.append(Violation("goal_states_reachable", "GOAL-01", clause("GOAL-01").broke(
            f"Goal states never reached: {unreached}"), [], "goal-graph", {}))
    for state, allowed in GOAL_EXITS.items():
        bad = sorted(f"{src}->{dst} by {e}" for (src, dst), evs in edges.items() if src == state
                     for e in evs if e not in allowed)
        checks.append({"check": f"{state} left only by {sorted(allowed) or 'nothing'}", "ok": not bad, "bad": bad})
        if bad:
            cid = _GOAL_CLAUSE[state]
            violations.append(Violation(f"goal_exit_{state}", cid, clause(cid).broke(f"{bad}"), [], "goal-graph", {}))
    return {"states_reached": sorted(seen),
            "edges": [{"from": s, "to": t, "events": sorted(e)} for (s, t), e in sorted(edges.items())],
            "checks": checks}
