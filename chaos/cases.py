"""The systematic case list: scenario x interruption point x hit x restart kind, each with a stable id.

Random restart waves miss timing races (Paperclip's #19759 was only reproduced by unit tests, never
by its restart-chaos waves). So the chaos runner enumerates instead: every point a scenario passes
through, every time it passes through it, every restart kind of seed 000. The enumeration is pure
and does not ask the adapter anything, so every CI shard computes the same list and a case id means
the same case on every machine and for every adapter:

    <scenario>/<point>/<hit>/<kind>            e.g. chat_unknown_write/tool.result.commit.before/1/tree_kill
    <scenario>/<point>/<hit>/crash_during_recovery@<recovery point>

Which cases an adapter can run (its declared failpoints and restart kinds) is decided later
(``plan``); a case it cannot run is reported as not implemented, never dropped.

A scenario here is the chaos runner's view of a public entry point: the provider script, the
sessions that submit, and how often each point is expected to be reached (from the script's shape,
not from a run). A point no scenario reaches is "not reachable" in the coverage.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from recoverykit.model.catalogue import (
    INTERRUPTION_POINTS,
    POINTS_BY_NAME,
    RECOVERY_POINTS,
    Profile,
    Reach,
    RestartKind,
)
from recoverykit.model.errors import InvalidArgument

CRASH_DURING_RECOVERY = RestartKind.CRASH_DURING_RECOVERY.value
# Restart kinds the adapter performs itself (it declares them); the others the kit does with psutil.
ADAPTER_KINDS = frozenset({RestartKind.FRONTEND_RELOAD, RestartKind.NORMAL_EXIT, RestartKind.GRACEFUL_WORKER_RESTART,
                           RestartKind.STOP_ALL_EXIT})
KIT_KINDS = frozenset(RestartKind) - ADAPTER_KINDS
KILL_KINDS = (RestartKind.WORKER_KILL, RestartKind.TREE_KILL)
# Environment holds: how the kit stops a run there without the runtime's help.
TOOL_SLEEP_S = 1.0  # tool.running: long enough to be caught alive, short enough to wait for after a kill
_STEPS_TOOL_THEN_TEXT = 2


@dataclass(frozen=True)
class Scenario:
    """A public entry point the chaos runner drives, with the points it passes and how often."""

    name: str
    description: str
    sessions: tuple[str, ...]  # one submit per session, each tagged with the session's script
    tool: str = "probe_unknown"
    hits: dict[str, int] = field(default_factory=dict)  # point -> times the scenario reaches it
    kinds: tuple[RestartKind, ...] | None = None  # None: every kind
    during: str | None = None  # a user action taken while held: pause, end, input
    double_start: bool = False  # after a kill, two starts race: a repeated notification must admit once
    clauses: tuple[str, ...] = ()
    profile: Profile = Profile.CHAT_CORE

    def script_id(self, session: str) -> str:
        return f"{self.name}.{session}"

    def provider_script(self, point: str | None = None, hit: int = 1) -> dict[str, Any]:
        """The scripted provider's script for one case: the environment's own hold sits at ``point``."""
        scripts = []
        for session in self.sessions:
            args: dict[str, Any] = {}
            if point == "tool.running":
                args["sleep_s"] = TOOL_SLEEP_S
            if point == "tool.finished.uncommitted":
                args["hold"] = True
            steps: list[dict[str, Any]] = [
                {"tool_calls": [{"name": self.tool, "arguments": args}],
                 "usage": {"prompt_tokens": 20, "completion_tokens": 8}},
                {"text": f"done {session}", "usage": {"prompt_tokens": 40, "completion_tokens": 3}},
            ]
            if point in ("provider.request.inflight", "provider.response.midstream"):
                at_chunk = 0 if point == "provider.request.inflight" else 1
                steps[hit - 1]["faults"] = [{"kind": "hold", "at_chunk": at_chunk, "attempts": [1]}]
            # recovery points need a first crash: hold the first request in flight, the kit kills there
            if point in RECOVERY_POINTS:
                steps[0]["faults"] = [{"kind": "hold", "at_chunk": 0, "attempts": [1]}]
            scripts.append({"id": self.script_id(session), "cumulative_usage": True, "steps": steps})
        return {"scripts": scripts, "hold_timeout_s": 120.0}


def _chat_hits() -> dict[str, int]:
    twice = ("provider.request.before", "provider.request.after", "provider.request.inflight",
             "provider.response.midstream", "usage.persist.before", "usage.persist.after")
    out = {}
    for p in INTERRUPTION_POINTS:
        if p.profile is not Profile.CHAT_CORE:
            continue
        out[p.name] = _STEPS_TOOL_THEN_TEXT if p.name in twice else 1
    return out


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("chat_unknown_write", "one chat request whose first step calls an unknown-effect tool, then answers",
             sessions=("s1",), hits=_chat_hits(),
             clauses=("FA-01", "FA-03", "FA-04", "FA-05", "FA-06", "FA-09", "FA-10", "FA-11", "FA-15")),
    Scenario("sessions_together", "three sessions recover together: fair queueing, shared quota, one owner each",
             sessions=("a", "b", "c"), tool="probe_read",
             hits={"provider.request.inflight": 1, "tool.result.commit.before": 1, "recovery.claim.after": 1},
             kinds=(RestartKind.WORKER_KILL, RestartKind.TREE_KILL, RestartKind.NORMAL_EXIT), double_start=True,
             clauses=("FA-12", "FA-13", "REC-06")),
    Scenario("pause_then_restart", "the user pauses while a request is in flight or a result uncommitted, then "
             "the runtime restarts: paused work must stay paused", sessions=("s1",),
             hits={"provider.request.inflight": 1, "tool.result.commit.before": 1}, during="pause",
             kinds=(RestartKind.WORKER_KILL, RestartKind.TREE_KILL, RestartKind.NORMAL_EXIT,
                    RestartKind.GRACEFUL_WORKER_RESTART), clauses=("RI-03", "FA-01")),
    Scenario("pause_during_recovery", "the user pauses while recovery is held at a recovery phase",
             sessions=("s1",), hits={p: 1 for p in RECOVERY_POINTS}, during="pause",
             kinds=(RestartKind.FRONTEND_RELOAD, RestartKind.TREE_KILL), clauses=("FA-14", "RI-03")),
    Scenario("end_during_recovery", "the user ends the work while recovery is held at a recovery phase",
             sessions=("s1",), hits={"recovery.claim.after": 1}, during="end",
             kinds=(RestartKind.FRONTEND_RELOAD, RestartKind.TREE_KILL), clauses=("FA-14", "RI-03")),
    Scenario("input_during_recovery", "the user sends new input while recovery is held at a recovery phase",
             sessions=("s1",), hits={"recovery.claim.after": 1}, during="input",
             kinds=(RestartKind.FRONTEND_RELOAD, RestartKind.TREE_KILL), clauses=("FA-14", "INP-01")),
)
SCENARIOS_BY_NAME: dict[str, Scenario] = {s.name: s for s in SCENARIOS}


@dataclass(frozen=True, order=True)
class Case:
    """One systematic case. ``second`` is the recovery point of a crash during recovery."""

    scenario: str
    point: str
    hit: int
    kind: str
    second: str | None = None

    @property
    def id(self) -> str:
        kind = f"{self.kind}@{self.second}" if self.second else self.kind
        return f"{self.scenario}/{self.point}/{self.hit}/{kind}"

    @property
    def restart_kind(self) -> RestartKind:
        return RestartKind(self.kind)

    @property
    def reach(self) -> Reach:
        return POINTS_BY_NAME[self.point].reach

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "scenario": self.scenario, "point": self.point, "hit": self.hit, "kind": self.kind,
                "second": self.second}


def parse_case_id(case_id: str) -> Case:
    """The case a stable id names; InvalidArgument (with the nearest valid form) otherwise."""
    parts = case_id.strip().split("/")
    if len(parts) != 4:
        raise InvalidArgument(f"case id {case_id!r} is not <scenario>/<point>/<hit>/<kind>; "
                              "e.g. chat_unknown_write/tool.result.commit.before/1/tree_kill")
    scenario, point, hit_text, kind_text = parts
    if scenario not in SCENARIOS_BY_NAME:
        raise InvalidArgument(f"case id {case_id!r}: unknown scenario {scenario!r}; known: {sorted(SCENARIOS_BY_NAME)}")
    if point not in POINTS_BY_NAME:
        raise InvalidArgument(f"case id {case_id!r}: unknown interruption point {point!r} (model/catalogue.py)")
    if not hit_text.isdigit() or int(hit_text) < 1:
        raise InvalidArgument(f"case id {case_id!r}: the hit {hit_text!r} must be a positive whole number")
    kind, _, second = kind_text.partition("@")
    try:
        RestartKind(kind)
    except ValueError:
        raise InvalidArgument(f"case id {case_id!r}: unknown restart kind {kind!r}; known: "
                              f"{[k.value for k in RestartKind]}") from None
    if (kind == CRASH_DURING_RECOVERY) != bool(second) or (second and second not in RECOVERY_POINTS):
        raise InvalidArgument(f"case id {case_id!r}: crash_during_recovery names its recovery point "
                              f"(crash_during_recovery@<one of {list(RECOVERY_POINTS)}>), other kinds none")
    return Case(scenario, point, int(hit_text), kind, second or None)


def choose(names: str | Sequence[str] | None, universe: Sequence[str], what: str) -> list[str]:
    if names is None or names == "all" or names == ["all"]:
        return list(universe)
    wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    unknown = [n for n in wanted if n not in universe]
    if unknown:
        raise InvalidArgument(f"unknown {what} {unknown}; choose from: {', '.join(universe)} (or 'all')")
    return [n for n in universe if n in wanted]  # catalogue order, so ids and order never depend on the flag


def enumerate_cases(scenarios: str | Sequence[str] | None = None, points: str | Sequence[str] | None = None,
                    kinds: str | Sequence[str] | None = None) -> list[Case]:
    """Every systematic case, in a fixed order (scenario, catalogue point, hit, kind, recovery point)."""
    chosen_scenarios = choose(scenarios, [s.name for s in SCENARIOS], "scenarios")
    chosen_points = choose(points, [p.name for p in INTERRUPTION_POINTS], "interruption points")
    chosen_kinds = choose(kinds, [k.value for k in RestartKind], "restart kinds")
    out: list[Case] = []
    for name in chosen_scenarios:
        scenario = SCENARIOS_BY_NAME[name]
        allowed = {k.value for k in (scenario.kinds or tuple(RestartKind))}
        for point in chosen_points:
            for hit in range(1, scenario.hits.get(point, 0) + 1):
                for kind in chosen_kinds:
                    if kind not in allowed:
                        continue
                    if kind == CRASH_DURING_RECOVERY:
                        out += [Case(name, point, hit, kind, r) for r in RECOVERY_POINTS]
                    else:
                        out.append(Case(name, point, hit, kind))
    return out


def reachable_points(scenarios: Iterable[Scenario] = SCENARIOS) -> set[str]:
    return {p for s in scenarios for p, n in s.hits.items() if n > 0}


def not_implemented_reason(case: Case, failpoints: Iterable[str], restart_kinds: Iterable[str],
                           profiles: Iterable[str]) -> str | None:
    """Why an adapter cannot run ``case`` (None when it can), from its init_ok declaration."""
    declared_points, declared_kinds = set(failpoints), {str(k) for k in restart_kinds}
    scenario = SCENARIOS_BY_NAME[case.scenario]
    if scenario.profile.value not in {str(p) for p in profiles}:
        return f"profile {scenario.profile.value} not declared"
    if case.reach is Reach.RUNTIME and case.point not in declared_points:
        return f"failpoint {case.point} not declared"
    if case.point in RECOVERY_POINTS and case.point not in declared_points:
        return f"recovery point {case.point} not declared"
    if RestartKind(case.kind) in ADAPTER_KINDS and case.kind not in declared_kinds:
        return f"restart kind {case.kind} not declared"
    if case.kind == RestartKind.STOP_ALL_EXIT.value and "normal_exit" not in declared_kinds and \
            "stop_all_exit" not in declared_kinds:
        return "restart kind stop_all_exit not declared"
    if case.second and case.second not in declared_points:
        return f"recovery point {case.second} not declared (needed for the second crash)"
    return None


__all__ = [
    "ADAPTER_KINDS",
    "KILL_KINDS",
    "KIT_KINDS",
    "SCENARIOS",
    "SCENARIOS_BY_NAME",
    "Case",
    "Scenario",
    "choose",
    "enumerate_cases",
    "not_implemented_reason",
    "parse_case_id",
    "reachable_points",
]
