"""The systematic case list: stable ids, fixed order, selection, and what an adapter can run.

The list is enumerated from a dry-run trace; ``tests/fixtures/reference_trace.json`` is the trace of
the reference runtime (``recoverykit chaos --list --out DIR``), so these tests need no adapter.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from recoverykit.chaos.cases import (
    Case,
    enumerate_cases,
    not_implemented_reason,
    parse_case_id,
)
from recoverykit.chaos.dry_run import Trace
from recoverykit.chaos.shard import parse_shard, select, shard_of
from recoverykit.conformance.scenarios import all_scenarios, scenario_named
from recoverykit.model.catalogue import INTERRUPTION_POINTS, RECOVERY_POINTS, RestartKind
from recoverykit.model.errors import InvalidArgument

TRACE = Trace.read(Path(__file__).parent / "fixtures" / "reference_trace.json")
ALL = enumerate_cases(TRACE)


def test_ids_are_unique_and_round_trip():
    ids = [c.id for c in ALL]
    assert len(ids) == len(set(ids))
    assert all(parse_case_id(i) == c for i, c in zip(ids, ALL, strict=True))


def test_enumeration_is_deterministic_and_pinned():
    assert [c.id for c in enumerate_cases(TRACE)] == [c.id for c in ALL]
    # ids other machines and old bundles refer to: they must keep meaning the same case
    # the catalogue's order: the richest scenario first, so a systematic run meets most bugs early
    assert ALL[0].id == "chat_unknown_write/input.accept.before/1/frontend_reload"
    assert "chat_unknown_write/tool.result.commit.before/1/tree_kill" in {c.id for c in ALL}
    assert "chat_unknown_write/provider.request.before/2/worker_kill" in {c.id for c in ALL}
    assert ("chat_unknown_write/tool.dispatch.after/1/crash_during_recovery@recovery.decide.after"
            in {c.id for c in ALL})


def test_every_chat_point_every_kind_and_later_hits():
    chat = [c for c in ALL if c.scenario == "chat_unknown_write"]
    # opt-in points (durable writes) are in a trace only when chaos asked for them (--durable-writes)
    chat_points = {p.name for p in INTERRUPTION_POINTS if p.profile.value == "chat_core" and not p.opt_in}
    assert {c.point for c in chat} == chat_points
    assert {c.kind for c in chat} == {k.value for k in RestartKind}
    assert {c.hit for c in chat if c.point == "usage.persist.after"} == {1, 2}
    seconds = {c.second for c in chat if c.kind == "crash_during_recovery"}
    assert seconds == set(RECOVERY_POINTS)


def test_filters_keep_catalogue_order_and_ids():
    some = enumerate_cases(TRACE, "chat_unknown_write", "tool.running,input.accept.after", "tree_kill")
    assert [c.id for c in some] == ["chat_unknown_write/input.accept.after/1/tree_kill",
                                    "chat_unknown_write/tool.running/1/tree_kill"]
    assert all(c in ALL for c in some)


@pytest.mark.parametrize("bad", ["x", "chat_unknown_write/nope/1/tree_kill", "nope/tool.running/1/tree_kill",
                                 "chat_unknown_write/tool.running/0/tree_kill",
                                 "chat_unknown_write/tool.running/1/reboot",
                                 "chat_unknown_write/tool.running/1/crash_during_recovery",
                                 "chat_unknown_write/tool.running/1/tree_kill@recovery.claim.after"])
def test_bad_case_ids_are_refused_with_the_right_form(bad):
    with pytest.raises(InvalidArgument) as info:
        parse_case_id(bad)
    assert bad in str(info.value)


def test_unknown_selection_names_the_choices():
    with pytest.raises(InvalidArgument, match="unknown restart kinds"):
        enumerate_cases(TRACE, kinds="tree_kill,reboot")


def test_not_implemented_reasons():
    case = parse_case_id("chat_unknown_write/input.accept.after/1/tree_kill")
    assert not_implemented_reason(case, [], [], ["chat_core"]) == "failpoint input.accept.after not declared"
    assert not_implemented_reason(case, ["input.accept.after"], [], ["chat_core"]) is None
    env = parse_case_id("chat_unknown_write/tool.running/1/normal_exit")
    assert not_implemented_reason(env, [], [], ["chat_core"]) == "restart kind normal_exit not declared"
    assert not_implemented_reason(env, [], ["normal_exit"], ["chat_core"]) is None
    assert "profile" in not_implemented_reason(env, [], ["normal_exit"], ["goals"])
    cdr = parse_case_id("chat_unknown_write/tool.running/1/crash_during_recovery@recovery.claim.after")
    assert "recovery.claim.after" in not_implemented_reason(cdr, [], [], ["chat_core"])


def test_scenario_scripts_put_the_environment_hold_where_the_case_says():
    s = scenario_named("chat_unknown_write")
    script = s.provider_script("provider.response.midstream", 2)["scripts"][0]
    assert script["steps"][1]["faults"] == [{"kind": "hold", "at_chunk": 1, "attempts": [1]}]
    assert "faults" not in script["steps"][0]
    tool_args = s.provider_script("tool.finished.uncommitted")["scripts"][0]["steps"][0]["tool_calls"][0]["arguments"]
    assert tool_args == {"hold": True}
    assert all(len(sc.sessions) >= 1 for sc in all_scenarios())
    # the drive's own holds are not the case's: chaos removes them and puts its own where the case says
    certify_script = s.provider_script()["scripts"][0]
    assert certify_script["steps"][0]["tool_calls"][0]["arguments"] == {"hold": True}
    running = s.provider_script("tool.running")["scripts"][0]["steps"][0]["tool_calls"][0]["arguments"]
    assert running == {"sleep_s": 1.0}
    pause = scenario_named("pause_restart").provider_script("usage.persist.before")["scripts"][0]
    assert all("faults" not in step for step in pause["steps"])


@given(st.integers(min_value=1, max_value=9))
def test_shards_partition_the_cases(count):
    parts = [select(ALL, parse_shard(f"{k}/{count}")) for k in range(1, count + 1)]
    ids = [c.id for part in parts for c in part]
    assert sorted(ids) == sorted(c.id for c in ALL)  # complete and disjoint


def test_shard_of_a_case_does_not_depend_on_the_selection():
    case = Case("chat_unknown_write", "tool.running", 1, "tree_kill")
    small = enumerate_cases(TRACE, "chat_unknown_write", "tool.running", "tree_kill")
    assert small == [case]
    assert select(small, parse_shard(f"{shard_of(case.id, 4)}/4")) == [case]


@pytest.mark.parametrize("bad", ["0/3", "4/3", "3", "a/b", "1/0"])
def test_bad_shards(bad):
    with pytest.raises(InvalidArgument, match="shard"):
        parse_shard(bad)


def test_random_schedules_are_a_pure_function_of_seed_and_wave():
    from recoverykit.chaos.random_waves import WINDOW_S, schedule

    assert schedule(7, 3) == schedule(7, 3)
    assert len({tuple(schedule(7, w)) for w in range(20)}) > 10
    for delay, kind in schedule(7, 3):
        assert 0 <= delay <= WINDOW_S and kind in ("worker_kill", "tree_kill")
