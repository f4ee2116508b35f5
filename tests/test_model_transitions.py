"""The concrete model: scenarios from the seeds, bad input, and Hypothesis runs of random event sequences."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recoverykit.model import (
    EventNotEnabled,
    MalformedRecord,
    ModelError,
    ModelState,
    RuntimePhase,
    StaleVersion,
    UnknownWorkItem,
    apply,
    successors,
)
from recoverykit.model import events as ev
from recoverykit.model.catalogue import (
    NEEDS_PERSON,
    ApprovalStatus,
    DesiredState,
    EffectClass,
    GoalState,
    ReasonCode,
    RestartKind,
    ToolStatus,
    TurnStatus,
    WorkKind,
)


def run(state, *events):
    for event in events:
        state = apply(state, event)
    return state


@pytest.fixture
def running():
    """One chat request with an open turn."""
    return run(ModelState(), ev.Submit(work_id="w1", text="hello"), ev.Admit(work_id="w1", turn_id="t1"))


@pytest.fixture
def goal():
    return run(ModelState(), ev.Submit(work_id="g", kind=WorkKind.GOAL, text="ship it"),
               ev.CreateGoal(goal_id="G", work_id="g", requirements=("tests", "docs"), budget_limit=100),
               ev.Admit(work_id="g", turn_id="t1"))


# --- recovery scenarios -----------------------------------------------------------------------------


def test_unknown_write_is_never_rerun_and_the_new_turn_needs_a_one_time_approval(running):
    state = run(running, ev.ToolDispatch(work_id="w1", call_id="c1"), ev.Restart(kind=RestartKind.TREE_KILL))
    assert state.tool_calls["c1"].status is ToolStatus.OUTCOME_UNKNOWN
    assert state.tool_calls["c1"].executions == 1
    old = state.turns["t1"]
    assert old.status is TurnStatus.INTERRUPTED and old.repair_key == "repair:t1"
    assert state.work["w1"].desired_state is DesiredState.RUN  # a restart is never a pause
    with pytest.raises(EventNotEnabled):
        apply(state, ev.ToolDispatch(work_id="w1", call_id="c1"))  # no open turn; and never dispatched twice
    state = apply(state, ev.Admit(work_id="w1", turn_id="t2"))
    assert state.turns["t2"].restricted
    assert state.turns["t2"].continuation_key != old.continuation_key
    assert state.work["w1"].inputs_appended == 1  # the user's input is not re-appended
    state = apply(state, ev.ToolDispatch(work_id="w1", call_id="c2"))
    (approval,) = state.approvals.values()
    assert approval.unknown_effect_set == {"c1"} and approval.tool_call_id == "c2"
    assert state.work["w1"].reason_code is ReasonCode.AWAITING_APPROVAL
    assert state.tool_calls["c2"].status is ToolStatus.NEVER_STARTED
    state = run(state, ev.Approve(approval_id=approval.approval_id),
                ev.ToolDispatch(work_id="w1", call_id="c2", approval_id=approval.approval_id))
    assert state.approvals[approval.approval_id].status is ApprovalStatus.CONSUMED
    assert state.tool_calls["c2"].status is ToolStatus.DISPATCHED
    with pytest.raises(EventNotEnabled):  # consumed once
        apply(state, ev.Approve(approval_id=approval.approval_id))


def test_read_only_tools_run_without_approval_in_a_restricted_turn(running):
    state = run(running, ev.ToolDispatch(work_id="w1", call_id="c1"), ev.Restart(kind=RestartKind.TREE_KILL),
                ev.Admit(work_id="w1", turn_id="t2"),
                ev.ToolDispatch(work_id="w1", call_id="c2", effect_class=EffectClass.READ_ONLY))
    assert state.tool_calls["c2"].status is ToolStatus.DISPATCHED and not state.approvals


def test_worker_kill_reattaches_the_live_tool_child(running):
    state = run(running, ev.ToolDispatch(work_id="w1", call_id="c1"), ev.Restart(kind=RestartKind.WORKER_KILL))
    assert state.tool_calls["c1"].status is ToolStatus.DISPATCHED and state.tool_calls["c1"].child_alive
    assert state.turns["t1"].status is TurnStatus.ACTIVE
    state = apply(state, ev.ToolCommit(call_id="c1"))
    assert state.tool_calls["c1"].executions == 1


def test_graceful_restart_continues_the_same_turn_as_a_new_attempt(running):
    state = apply(running, ev.Restart(kind=RestartKind.GRACEFUL_WORKER_RESTART))
    turn = state.turns["t1"]
    assert turn.status is TurnStatus.ACTIVE and turn.attempt == 2
    assert state.work["w1"].reason_code is ReasonCode.RUNNING
    assert state.leases["w1"].generation == 2


@pytest.mark.parametrize("kind", list(RestartKind))
def test_paused_work_stays_paused_across_every_restart_kind(running, kind):
    state = run(running, ev.Pause(work_id="w1"), ev.Restart(kind=kind))
    assert state.work["w1"].desired_state is DesiredState.PAUSED
    assert state.work["w1"].reason_code is ReasonCode.USER_PAUSED


@pytest.mark.parametrize("kind", sorted(set(RestartKind) - {RestartKind.STOP_ALL_EXIT}))
def test_restart_is_never_a_reason_for_manual_resume(running, kind):
    state = apply(running, ev.Restart(kind=kind))
    intent = state.work["w1"]
    assert intent.desired_state is DesiredState.RUN
    if kind is RestartKind.HOST_IDENTITY_CHANGE:
        assert intent.reason_code is ReasonCode.OWNER_ON_OTHER_HOST  # no silent cross-host takeover
    else:
        assert intent.reason_code not in NEEDS_PERSON


def test_stop_all_exit_persists_the_stop(running):
    state = apply(running, ev.Restart(kind=RestartKind.STOP_ALL_EXIT))
    assert state.work["w1"].desired_state is DesiredState.PAUSED
    assert state.work["w1"].reason_code is ReasonCode.USER_STOPPED_ALL


def test_long_downtime_has_no_hidden_expiry(running):
    state = apply(running, ev.Restart(kind=RestartKind.LONG_DOWNTIME))
    assert state.clock_ms > 2 * 3600 * 1000
    assert state.work["w1"].desired_state is DesiredState.RUN
    assert state.work["w1"].reason_code is ReasonCode.RUNNING


def test_crash_during_recovery_repairs_once(running):
    base = run(running, ev.ToolDispatch(work_id="w1", call_id="c1"), ev.Crash(point="tool.running"))
    once = apply(base, ev.Start())
    twice = run(base, ev.Start(crash_at="recovery.repair.after"), ev.Start())
    assert twice.turns == once.turns
    assert twice.work["w1"].last_committed_progress == once.work["w1"].last_committed_progress
    # the second start finds the turn already repaired; the next admission fences the dead claimant out
    admitted = apply(twice, ev.Admit(work_id="w1", turn_id="t2"))
    assert admitted.leases["w1"].generation > twice.leases["w1"].generation >= once.leases["w1"].generation
    assert admitted.leases["w1"].owner_alive


def test_host_change_holds_and_forbids_takeover(running):
    state = run(running, ev.Crash(point="tool.running"), ev.HostChange(host="host-b"), ev.Start())
    assert state.work["w1"].reason_code is ReasonCode.OWNER_ON_OTHER_HOST
    assert state.leases["w1"].owner.host == "host-a"


def test_stale_generation_write_is_rejected(running):
    state = apply(running, ev.Restart(kind=RestartKind.TREE_KILL))
    assert apply(state, ev.StaleWrite(work_id="w1", generation=2)) == state  # accepted: a current write
    with pytest.raises(StaleVersion):
        apply(state, ev.StaleWrite(work_id="w1", generation=1))


def test_usage_is_a_watermark_and_unknown_stays_unknown(goal):
    state = run(goal, ev.ProviderRequest(work_id="g", request_id="r1"),
                ev.ProviderUsage(request_id="r1", cumulative_tokens=5),
                ev.ProviderUsage(request_id="r1", cumulative_tokens=9),
                ev.ProviderUsage(request_id="r1", cumulative_tokens=7))
    assert state.receipts["r1"].tokens == 9 and not state.receipts["r1"].final
    assert state.receipts["r1"].goal_id == "G" and state.receipts["r1"].revision == 0
    state = apply(state, ev.Restart(kind=RestartKind.TREE_KILL))
    # the attempt died: its usage is unknown and, under a hard budget, unknown is not balance
    assert state.work["g"].reason_code is ReasonCode.BUDGET_UNKNOWN_COST
    late = apply(state, ev.ProviderResponse(request_id="r1", tokens=12, price_per_token=1))
    assert late.receipts["r1"].tokens == 12 and late.receipts["r1"].goal_id == "G"  # late keeps attribution


def test_budget_exhaustion_and_explicit_budget_change(goal):
    state = run(goal, ev.ProviderRequest(work_id="g", request_id="r1"),
                ev.ProviderResponse(request_id="r1", tokens=100, price_per_token=1))
    assert state.goals["G"].state is GoalState.BUDGET_EXHAUSTED
    with pytest.raises(EventNotEnabled):
        apply(state, ev.Admit(work_id="g", turn_id="t2"))
    state = apply(state, ev.BudgetChange(goal_id="G", limit=1000))
    assert state.goals["G"].state is GoalState.ACTIVE
    apply(state, ev.Admit(work_id="g", turn_id="t2"))


def test_achieved_only_for_the_current_revision_and_result(goal):
    state = apply(goal, ev.TodoComplete(goal_id="G"))
    version = state.goals["G"].result_version
    with pytest.raises(StaleVersion):
        apply(state, ev.Verification(goal_id="G", revision=1, result_version=version,
                                     verdicts={"tests": "met", "docs": "met"}))
    partial = apply(state, ev.Verification(goal_id="G", revision=0, result_version=version, verdicts={"tests": "met"}))
    assert partial.goals["G"].state is GoalState.ACTIVE  # missing evidence: another work turn
    stale = apply(state, ev.Verification(goal_id="G", revision=0, result_version=version + 1,
                                         verdicts={"tests": "met", "docs": "met"}))
    assert stale.goals["G"].state is GoalState.ACTIVE
    done = apply(state, ev.Verification(goal_id="G", revision=0, result_version=version,
                                        verdicts={"tests": "met", "docs": "met"}))
    assert done.goals["G"].state is GoalState.ACHIEVED and done.goals["G"].achieved_for == (0, version)
    assert done.work["g"].desired_state is DesiredState.DONE
    assert len(done.goals["G"].terminal_snapshots) == 1
    with pytest.raises(EventNotEnabled):
        apply(done, ev.UpdateGoal(goal_id="G", revision=1))


def test_revision_invalidates_acceptance(goal):
    state = run(goal, ev.UpdateGoal(goal_id="G", revision=1))
    assert all(r.acceptance == "unknown" and r.for_revision == 1 for r in state.goals["G"].requirements)
    with pytest.raises(StaleVersion):
        apply(state, ev.UpdateGoal(goal_id="G", revision=3))


def test_a_notification_admits_once_and_not_after_pause(goal):
    state = apply(goal, ev.WaitCreate(work_id="g", handle="h", consumption_key="k"))
    assert state.work["g"].reason_code is ReasonCode.WAITING_DEPENDENCY
    first = apply(state, ev.Notification(handle="h", observed_version=1))
    assert first.waits["h"].consumed and first.work["g"].reason_code is ReasonCode.QUEUED
    assert apply(first, ev.Notification(handle="h", observed_version=1)).work == first.work
    paused = run(state, ev.Pause(work_id="g"), ev.Notification(handle="h", observed_version=1, result="ok"))
    assert not paused.waits["h"].consumed and paused.waits["h"].result == "ok"  # saved, not admitted


def test_paperclip_retry_keys_and_generations(running):
    state = running
    for _ in range(6):
        state = apply(state, ev.TaskFailure(work_id="w1", jitter_permille=200))
        state = apply(state, ev.ClockAdvance(ms=600_000))
    assert state.retry_generations["w1"].exhausted
    assert state.work["w1"].reason_code is ReasonCode.RETRY_EXHAUSTED
    clicked = apply(state, ev.RetryRequest(company="c", idempotency_key="k1", work_id="w1"))
    assert clicked.retry_generations["w1"].generation == 2
    assert apply(clicked, ev.RetryRequest(company="c", idempotency_key="k1", work_id="w1")) == clicked
    restarted = apply(clicked, ev.Restart(kind=RestartKind.TREE_KILL))
    assert restarted.retry_generations == clicked.retry_generations  # restarts never replenish


def test_retry_keys_stay_taken_after_the_receipt_completes_or_fails(running):
    state = run(running, ev.RetryRequest(company="c", idempotency_key="k", work_id="w1"))
    assert state.retry_receipts["c/k"].status == "accepted"  # attached to the work already running
    failed = apply(state, ev.TaskFailure(work_id="w1"))
    assert failed.retry_receipts["c/k"].status == "failed"
    assert apply(failed, ev.RetryRequest(company="c", idempotency_key="k", work_id="w1")) == failed
    other = apply(failed, ev.RetryRequest(company="other", idempotency_key="k", work_id="w1"))
    assert other.retry_receipts["other/k"].generation == 1  # a new key, same generation: not exhausted
    done = run(state, ev.TurnComplete(work_id="w1"))
    assert done.retry_receipts["c/k"].status == "completed"


def test_disabled_automatic_recovery_stays_effective():
    state = run(ModelState(), ev.Submit(work_id="w", text="x", recovery_policy="disabled"),
                ev.Admit(work_id="w", turn_id="t1"))  # ordinary execution is not affected
    state = apply(state, ev.Restart(kind=RestartKind.TREE_KILL))
    assert state.work["w"].desired_state is DesiredState.PAUSED
    assert state.work["w"].reason_code is ReasonCode.AUTOMATIC_RECOVERY_DISABLED
    assert state.open_turn("w") is None
    resumed = run(state, ev.Resume(work_id="w"), ev.Admit(work_id="w", turn_id="t2"))
    assert resumed.open_turn("w").turn_id == "t2"


def test_wait_consumption_keys_are_unique(goal):
    state = apply(goal, ev.WaitCreate(work_id="g", handle="h1", consumption_key="k"))
    state = run(state, ev.Notification(handle="h1", observed_version=1), ev.Admit(work_id="g", turn_id="t2"))
    with pytest.raises(EventNotEnabled, match="consumption key"):
        apply(state, ev.WaitCreate(work_id="g", handle="h2", consumption_key="k"))


def test_retry_jitter_is_persisted_on_the_first_failure(running):
    state = run(running, ev.TaskFailure(work_id="w1", jitter_permille=-100),
                ev.TaskFailure(work_id="w1", jitter_permille=150))
    assert state.retry_generations["w1"].jitter_permille == -100


def test_child_result_is_delivered_to_the_parent_exactly_once(running):
    state = run(running, ev.Submit(work_id="child", text="sub", parent_id="w1"),
                ev.Admit(work_id="child", turn_id="tc"), ev.TurnComplete(work_id="child"))
    assert state.work["w1"].children == ("child",)
    deliver = ev.ChildDelivery(parent_id="w1", child_id="child")
    outcomes = successors(state, ev.InFlight(op=deliver, point="child.delivery.after"))
    for outcome in outcomes:  # whichever side of the crash the delivery fell on, recovery delivers once
        after = run(outcome, ev.Start(), deliver, deliver)
        assert after.work["w1"].delivered_children == ("child",)
        assert after.work["w1"].unconsumed_messages.count("result of child") == 1


# --- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize("event, error", [
    (ev.Pause(work_id="nope"), UnknownWorkItem),
    (ev.Approve(approval_id="nope"), UnknownWorkItem),
    (ev.ToolCommit(call_id="nope"), UnknownWorkItem),
    (ev.UpdateGoal(goal_id="G", revision=5), StaleVersion),
    (ev.Verification(goal_id="G", revision=7, result_version=0), StaleVersion),
    (ev.Resume(work_id="g"), EventNotEnabled),
    ({"type": "pause"}, MalformedRecord),
    ({"type": "warp", "work_id": "g"}, MalformedRecord),
    ({"type": "crash", "point": "not.a.point"}, MalformedRecord),
    ("pause g", MalformedRecord),
])
def test_bad_input_raises_a_typed_error_and_leaves_the_state_unchanged(goal, event, error):
    before = goal.model_dump()
    with pytest.raises(error) as info:
        apply(goal, event)
    assert isinstance(info.value, ModelError)
    assert goal.model_dump() == before


def test_unknown_work_item_is_also_a_key_error_with_a_readable_message(running):
    with pytest.raises(KeyError, match="'nope' is not a work item"):
        apply(running, ev.End(work_id="nope"))


def test_malformed_record_names_the_problem():
    with pytest.raises(MalformedRecord, match="RunIntent rejected"):
        from recoverykit.model import RunIntent

        RunIntent.parse({"work_id": "", "kind": "chat_request", "original_input": "x", "host_identity": "h"})


def test_a_state_that_is_not_a_model_state_is_rejected():
    with pytest.raises(MalformedRecord):
        apply({"work": {}}, ev.StopAll())


# --- indefinite outcomes ----------------------------------------------------------------------------


def test_in_flight_operation_has_both_outcomes(running):
    outcomes = successors(running, ev.InFlight(op=ev.Pause(work_id="w1"), point="input.accept.after"))
    assert {o.work["w1"].desired_state for o in outcomes} == {DesiredState.RUN, DesiredState.PAUSED}
    assert all(o.runtime is RuntimePhase.DOWN for o in outcomes)


def test_a_bracketing_point_fixes_the_outcome():
    state = ModelState()
    submit = ev.Submit(work_id="w9", text="draft")
    (before,) = successors(state, ev.InFlight(op=submit, point="input.accept.before"))
    assert "w9" not in before.work  # never acknowledged, never represented as submitted
    (after,) = successors(state, ev.InFlight(op=submit, point="input.accept.after"))
    assert after.work["w9"].original_input == "draft"  # saved; the client just never heard
    both = successors(state, ev.InFlight(op=submit, point="tool.running"))
    assert len(both) == 2


def test_an_after_point_for_an_impossible_operation_is_an_error(running):
    # "after" claims the operation took effect; one that cannot take effect is bad input
    with pytest.raises(UnknownWorkItem):
        successors(running, ev.InFlight(op=ev.ToolCommit(call_id="c-none"), point="tool.result.commit.after"))


def test_in_flight_operation_that_cannot_apply_has_one_outcome(running):
    (only,) = successors(running, ev.InFlight(op=ev.Resume(work_id="w1"), point="input.accept.before"))
    assert only.runtime is RuntimePhase.DOWN


def test_apply_refuses_an_indefinite_event(running):
    with pytest.raises(EventNotEnabled, match="successors"):
        apply(running, ev.InFlight(op=ev.Pause(work_id="w1"), point="input.accept.after"))


def test_event_json_round_trip():
    event = ev.ToolDispatch(work_id="w", call_id="c", effect_class=EffectClass.IDEMPOTENT)
    assert ev.parse_event(event.model_dump(mode="json")) == event


# --- random sequences -------------------------------------------------------------------------------

WORK = ("w1", "g")
event_strategy = st.one_of(
    st.builds(ev.Pause, work_id=st.sampled_from(WORK)), st.builds(ev.Resume, work_id=st.sampled_from(WORK)),
    st.builds(ev.End, work_id=st.sampled_from(WORK)), st.just(ev.StopAll()),
    st.builds(ev.Admit, work_id=st.sampled_from(WORK), turn_id=st.sampled_from(["t1", "t2", "t3", "t4"])),
    st.builds(ev.ProviderRequest, work_id=st.sampled_from(WORK), request_id=st.sampled_from(["r1", "r2"])),
    st.builds(ev.ProviderUsage, request_id=st.sampled_from(["r1", "r2"]), cumulative_tokens=st.integers(0, 20)),
    st.builds(ev.ProviderResponse, request_id=st.sampled_from(["r1", "r2"]),
              tokens=st.none() | st.integers(0, 30), price_per_token=st.none() | st.just(1)),
    st.builds(ev.ToolDispatch, work_id=st.sampled_from(WORK), call_id=st.sampled_from(["c1", "c2"]),
              effect_class=st.sampled_from(list(EffectClass))),
    st.builds(ev.ToolCommit, call_id=st.sampled_from(["c1", "c2"])),
    st.builds(ev.TurnComplete, work_id=st.sampled_from(WORK)),
    st.builds(ev.UpdateGoal, goal_id=st.just("G"), revision=st.integers(1, 3)),
    st.builds(ev.BudgetChange, goal_id=st.just("G"), limit=st.none() | st.integers(0, 50)),
    st.builds(ev.Restart, kind=st.sampled_from(list(RestartKind))),
    st.builds(ev.Crash, point=st.sampled_from(["tool.running", "provider.request.inflight"]),
              worker_only=st.booleans()),
    st.builds(ev.Start, crash_at=st.none() | st.sampled_from(["recovery.claim.after", "recovery.decide.after"])),
    st.builds(ev.StaleWrite, work_id=st.sampled_from(WORK), generation=st.integers(0, 4)),
)


def _start():
    return run(ModelState(), ev.Submit(work_id="w1", text="hi"), ev.Submit(work_id="g", kind=WorkKind.GOAL),
               ev.CreateGoal(goal_id="G", work_id="g", budget_limit=40))


@settings(max_examples=60)
@given(st.lists(event_strategy, max_size=25))
def test_random_sequences_keep_the_contract(events):
    state = _start()
    for event in events:
        before = state.model_dump()
        try:
            new = apply(state, event)
        except ModelError:
            assert state.model_dump() == before  # a rejected event changes nothing
            continue
        for work_id, old in state.work.items():
            now = new.work[work_id]
            if old.desired_state in (DesiredState.CANCELLED, DesiredState.DONE):
                assert now.desired_state is old.desired_state
            if old.desired_state is DesiredState.PAUSED and now.desired_state is not DesiredState.PAUSED:
                assert event.type in ("resume", "end")
            if now.desired_state is not DesiredState.RUN:
                assert new.open_turn(work_id) is None
        for call in new.tool_calls.values():
            assert call.executions <= 1
        for request_id, receipt in new.receipts.items():
            assert (receipt.tokens or 0) <= new.provider_billed[request_id]
        for work_id, lease in new.leases.items():
            assert lease.generation >= state.leases.get(work_id, lease).generation
        state = new
