"""Property tests of the model's pure decision functions (recoverykit.model.decisions)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from recoverykit.model import decisions as d
from recoverykit.model.catalogue import RETRY_DELAYS_S, RETRY_WINDOW_S, GoalState, RecoveryMode, RetryAdmission

ids = st.text(min_size=1, max_size=12)
nat = st.integers(min_value=0, max_value=10**6)


@given(ids, nat, nat)
def test_continuation_key_is_deterministic_and_invertible(work_id, cv, commit):
    key = d.continuation_key(work_id, cv, commit)
    assert key == d.continuation_key(work_id, cv, commit)
    assert d.parse_continuation_key(key) == (work_id, cv, commit)


@given(ids, nat, nat, st.integers(min_value=1, max_value=50))
def test_continuation_key_differs_across_control_versions_and_commits(work_id, cv, commit, step):
    key = d.continuation_key(work_id, cv, commit)
    assert key != d.continuation_key(work_id, cv + step, commit)
    assert key != d.continuation_key(work_id, cv, commit + step)


def test_continuation_key_cannot_be_forged_by_a_colon_in_the_work_id():
    assert d.continuation_key("a:1", 2, 3) != d.continuation_key("a", 1, 2)


@given(st.lists(nat, min_size=1, max_size=20))
def test_watermark_is_monotone_and_never_a_sum(snapshots):
    mark = 0
    for snap in snapshots:
        new = d.usage_watermark(mark, snap)
        assert new >= mark and new >= snap
        assert new in (mark, snap)
        mark = new
    assert mark == max(snapshots)  # cumulative snapshots: the last word is the largest, never their sum


@given(nat, nat)
def test_known_cost_keeps_unknown_unknown(tokens, price):
    assert d.known_cost(tokens, price) == tokens * price
    assert d.known_cost(-1, price) == -1
    assert d.known_cost(tokens, -1) == -1


@given(st.integers(1, 5), st.integers(-200, 200))
def test_jittered_delay_within_twenty_percent(n, jitter):
    base = RETRY_DELAYS_S[n - 1] * 1000
    assert base * 0.8 <= d.jittered_delay_ms(n, jitter) <= base * 1.2


@given(st.integers(1, 8), st.integers(0, 2_000_000), st.integers(0, 2_000_000), st.integers(-200, 200),
       st.integers(0, 4_000_000))
def test_retry_schedule_respects_budget_window_and_cooldown(failures, first, elapsed, jitter, cooldown):
    now = first + elapsed
    at = d.next_retry_at_ms(failures, first, now, jitter, cooldown)
    if failures > 5:
        assert at == -1  # an initial attempt and five retries, then nothing
    if at != -1:
        assert at >= cooldown and at > now
        assert at <= first + RETRY_WINDOW_S * 1000


def test_retry_schedule_nominal_sequence():
    times, now = [], 0
    for failures in range(1, 7):
        at = d.next_retry_at_ms(failures, 0, now, 0, 0)
        times.append(at)
        now = max(now, at)
    assert times == [30_000, 90_000, 210_000, 450_000, 930_000, -1]


def test_longer_provider_cooldown_wins():
    assert d.next_retry_at_ms(1, 0, 0, 0, 600_000) == 600_000
    assert d.next_retry_at_ms(1, 0, 0, 0, 40 * 60_000) == -1  # past the 30-minute window: none


@given(st.integers(0, 100), st.integers(0, 100))
def test_fencing_accepts_only_the_current_generation(write, current):
    assert d.fencing_accepts(write, current) == (write == current)
    assert not d.fencing_accepts(current, d.next_generation(current))


@given(st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.sampled_from([0, 1, 2, 3]), st.booleans(),
       st.booleans())
def test_first_gate_follows_the_contract_order(stop, disabled, approval, perm, budget, resources, unknown):
    gate = d.first_gate(stop, disabled, approval, perm, budget, resources, unknown)
    order = [(stop, d.GATE_USER_STOP), (disabled, d.GATE_RECOVERY_DISABLED), (approval, d.GATE_APPROVAL),
             (not perm, d.GATE_PERMISSION), (budget == d.BUDGET_EXHAUSTED, d.GATE_BUDGET_EXHAUSTED),
             (budget == d.BUDGET_UNKNOWN, d.GATE_BUDGET_UNKNOWN), (not resources, d.GATE_RESOURCE),
             (unknown, d.GATE_UNKNOWN_EFFECT)]
    expected = next((g for cond, g in order if cond), d.GATE_NONE)
    assert gate == expected


@given(st.integers(-1, 10), st.integers(0, 20), st.integers(0, 3))
def test_unknown_cost_is_never_available_balance(limit, spent, unknown):
    status = d.budget_status(limit, spent, unknown)
    if limit >= 0 and unknown:
        assert status in (d.BUDGET_EXHAUSTED, d.BUDGET_UNKNOWN)
    if limit < 0:
        assert status == d.BUDGET_NONE


@given(st.booleans(), st.booleans(), st.booleans(), st.booleans())
def test_exactly_one_recovery_mode(alive, same_host, dead, checkpoint):
    mode = d.recovery_mode(alive, same_host, dead, checkpoint)
    assert isinstance(mode, RecoveryMode)
    if not same_host:
        assert mode is RecoveryMode.HOLD  # never a silent cross-host takeover
    elif alive:
        assert mode is RecoveryMode.REATTACH
    elif dead:
        assert mode is (RecoveryMode.NEW_ATTEMPT if checkpoint else RecoveryMode.REPAIR)


@given(st.booleans(), st.booleans(), st.booleans())
def test_repeated_retry_request_never_opens_a_generation(active, exhausted, _):
    assert d.retry_admission(True, active, exhausted) is RetryAdmission.RETURN_EXISTING
    fresh = d.retry_admission(False, active, exhausted)
    if fresh is RetryAdmission.NEW_GENERATION:
        assert exhausted and not active


@given(st.sampled_from(list(GoalState)), st.sampled_from(list(d.GoalEvent)), st.booleans())
def test_goal_transitions(state, event, current):
    new = d.goal_transition(state, event, current)
    if state in (GoalState.ACHIEVED, GoalState.CANCELLED):
        assert new is state
    if new is GoalState.ACHIEVED and state is not GoalState.ACHIEVED:
        assert current and event is d.GoalEvent.VERIFIED_MET
    if state is GoalState.PAUSED and new is not state:
        assert event in (d.GoalEvent.RESUME, d.GoalEvent.END)
    if state is GoalState.BUDGET_EXHAUSTED and new is not state:
        assert event in (d.GoalEvent.BUDGET_CHANGE, d.GoalEvent.END)


@pytest.mark.parametrize("state", [GoalState.ACTIVE, GoalState.BLOCKED])
def test_stale_acceptance_never_achieves(state):
    assert d.goal_transition(state, d.GoalEvent.VERIFIED_MET, False) is not GoalState.ACHIEVED
    assert not d.achieved_allowed(2, 1, 5, 5, True)
    assert not d.achieved_allowed(2, 2, 4, 5, True)
    assert d.achieved_allowed(2, 2, 5, 5, True)


@given(st.booleans(), st.booleans(), st.booleans(), st.booleans())
def test_wait_admits_at_most_once(run, match, other, consumed):
    admits = d.wait_admits(run, match, other, consumed)
    assert not (admits and consumed)
    assert admits == (run and match and not other and not consumed)
