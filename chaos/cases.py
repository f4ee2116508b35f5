"""The systematic case list: scenario x interruption point x hit x restart kind, each with a stable id.

Random restart waves miss timing races (Paperclip's #19759 was only reproduced by unit tests, never
by its restart-chaos waves). So the chaos runner enumerates instead: every point a scenario passes
through, every time it passes through it, every restart kind its chaos spec names. The scenarios are
the one catalogue certify runs too (``conformance.scenarios``); which points each reaches, and how
often, comes from a dry run against the adapter (``dry_run``), stored as a trace so every shard and
every later run enumerates the same list. A case id means the same case on every machine:

    <scenario>/<point>/<hit>/<kind>            e.g. chat_unknown_write/tool.result.commit.before/1/tree_kill
    <scenario>/<point>/<hit>/crash_during_recovery@<recovery point>

Which cases an adapter can run (its declared failpoints and restart kinds) is decided later
(``not_implemented_reason``); a case it cannot run is reported as not implemented, never dropped.
A declared point that no scenario's dry run reached is "declared, never reached" in the coverage.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recoverykit.conformance.scenarios import TOOL_SLEEP_S, Scenario, all_scenarios, scenario_named
from recoverykit.model.catalogue import (
    INTERRUPTION_POINTS,
    OPT_IN_POINTS,
    POINTS_BY_NAME,
    RECOVERY_POINTS,
    Reach,
    RestartKind,
)
from recoverykit.model.errors import InvalidArgument

if TYPE_CHECKING:
    from recoverykit.chaos.dry_run import Trace

CRASH_DURING_RECOVERY = RestartKind.CRASH_DURING_RECOVERY.value
# Restart kinds the adapter performs itself (it declares them); the others the kit does with psutil.
ADAPTER_KINDS = frozenset({RestartKind.FRONTEND_RELOAD, RestartKind.NORMAL_EXIT, RestartKind.GRACEFUL_WORKER_RESTART,
                           RestartKind.STOP_ALL_EXIT})
KIT_KINDS = frozenset(RestartKind) - ADAPTER_KINDS
KILL_KINDS = (RestartKind.WORKER_KILL, RestartKind.TREE_KILL)


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
    known = [s.id for s in all_scenarios() if s.has_chaos]
    if scenario not in known:
        raise InvalidArgument(f"case id {case_id!r}: unknown scenario {scenario!r}; known: {sorted(known)}")
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


def enumerate_cases(trace: Trace, scenarios: str | Sequence[str] | None = None,
                    points: str | Sequence[str] | None = None,
                    kinds: str | Sequence[str] | None = None,
                    catalogue: Sequence[Scenario] | None = None) -> list[Case]:
    """Every systematic case the trace shows, in a fixed order (scenario, catalogue point, hit, kind, second)."""
    catalogue = all_scenarios() if catalogue is None else catalogue
    by_name = {s.id: s for s in catalogue}
    chosen_scenarios = choose(scenarios, [s.id for s in catalogue], "scenarios")
    chosen_points = choose(points, [p.name for p in INTERRUPTION_POINTS], "interruption points")
    chosen_kinds = choose(kinds, [k.value for k in RestartKind], "restart kinds")
    out: list[Case] = []
    for name in chosen_scenarios:
        scenario = by_name[name]
        hits = scenario.chaos_points(trace.hits(name))
        allowed = {k.value for k in (scenario.kinds or tuple(RestartKind))}
        for point in chosen_points:
            first = trace.first_hit(name, point) if point in OPT_IN_POINTS else 1
            for hit in range(first, hits.get(point, 0) + 1):
                for kind in chosen_kinds:
                    if kind not in allowed:
                        continue
                    if kind == CRASH_DURING_RECOVERY:
                        out += [Case(name, point, hit, kind, r) for r in RECOVERY_POINTS]
                    else:
                        out.append(Case(name, point, hit, kind))
    return out


def reachable_points(trace: Trace, scenarios: Sequence[Scenario] | None = None) -> set[str]:
    chosen = all_scenarios() if scenarios is None else scenarios
    return {p for s in chosen for p, n in s.chaos_points(trace.hits(s.id)).items() if n > 0}


def not_implemented_reason(case: Case, failpoints: Iterable[str], restart_kinds: Iterable[str],
                           profiles: Iterable[str]) -> str | None:
    """Why an adapter cannot run ``case`` (None when it can), from its init_ok declaration."""
    declared_points, declared_kinds = set(failpoints), {str(k) for k in restart_kinds}
    scenario = scenario_named(case.scenario)
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
    "TOOL_SLEEP_S",
    "Case",
    "Scenario",
    "choose",
    "enumerate_cases",
    "not_implemented_reason",
    "parse_case_id",
    "reachable_points",
]
