"""The recovery contract's pure decisions, in one place, each with a CrossHair-checked contract.

Both the concrete model (``transitions``) and the compact explorer (``explore``) call these
functions, so what exploration proves about the abstraction holds for the records too. Every
function takes and returns plain values (ints, bools, strings, the catalogue's enums) so that
CrossHair can reason about it symbolically and the explorer's hot loop stays cheap.

The contracts are PEP 316 docstring conditions; ``crosshair check --analysis_kind=PEP316`` on this
module must find no counterexample (tests/test_model_crosshair.py runs it under a time bound).

Sources: seed 000 "Automatic recovery contract" (decision order, continuation key), "Interruption
recovery" (fencing, exactly one recovery mode), "Cost" (watermark, unknown is not balance), Goal
states; seed 001 "Retry policy" and "Admission and execution".
"""

from __future__ import annotations

from enum import StrEnum

from recoverykit.model.catalogue import (
    RETRY_DELAYS_S,
    RETRY_WINDOW_S,
    GoalState,
    ReasonCode,
    RecoveryMode,
    RetryAdmission,
)

# --- Decision order -------------------------------------------------------------------------------
# Gates in the order seed 000 fixes: user stop, then approval, permissions, budget, resources,
# unknown effects. A disabled recovery policy is a user decision too and ranks right after a stop.
GATE_NONE = 0
GATE_USER_STOP = 1
GATE_RECOVERY_DISABLED = 2
GATE_APPROVAL = 3
GATE_PERMISSION = 4
GATE_BUDGET_EXHAUSTED = 5
GATE_BUDGET_UNKNOWN = 6
GATE_RESOURCE = 7
GATE_UNKNOWN_EFFECT = 8

GATE_REASON: dict[int, ReasonCode] = {
    GATE_NONE: ReasonCode.QUEUED,
    GATE_USER_STOP: ReasonCode.USER_PAUSED,
    GATE_RECOVERY_DISABLED: ReasonCode.AUTOMATIC_RECOVERY_DISABLED,
    GATE_APPROVAL: ReasonCode.AWAITING_APPROVAL,
    GATE_PERMISSION: ReasonCode.PERMISSION_REVOKED,
    GATE_BUDGET_EXHAUSTED: ReasonCode.BUDGET_EXHAUSTED,
    GATE_BUDGET_UNKNOWN: ReasonCode.BUDGET_UNKNOWN_COST,
    GATE_RESOURCE: ReasonCode.RESOURCE_MISSING_DIRECTORY,
    GATE_UNKNOWN_EFFECT: ReasonCode.UNKNOWN_EFFECT_RECONCILE,
}

BUDGET_NONE = 0  # no hard budget: unlimited by default
BUDGET_OK = 1
BUDGET_EXHAUSTED = 2
BUDGET_UNKNOWN = 3  # a hard budget and unknown cost: unknown is not available balance


def first_gate(user_stopped: bool, recovery_disabled: bool, approval_pending: bool, permission_ok: bool,
               budget: int, resources_ok: bool, unknown_effects: bool) -> int:
    """The first gate that holds the work, in the contract's order; GATE_NONE when it may run.

    pre: budget in (0, 1, 2, 3)
    post: (__return__ == 1) == user_stopped
    post: __return__ != 0 or (not user_stopped and not recovery_disabled and not approval_pending)
    post: __return__ != 0 or (permission_ok and budget in (0, 1) and resources_ok and not unknown_effects)
    post: __return__ != 3 or (approval_pending and not user_stopped)
    post: __return__ != 8 or (unknown_effects and permission_ok and resources_ok and budget in (0, 1))
    """
    if user_stopped:
        return GATE_USER_STOP
    if recovery_disabled:
        return GATE_RECOVERY_DISABLED
    if approval_pending:
        return GATE_APPROVAL
    if not permission_ok:
        return GATE_PERMISSION
    if budget == BUDGET_EXHAUSTED:
        return GATE_BUDGET_EXHAUSTED
    if budget == BUDGET_UNKNOWN:
        return GATE_BUDGET_UNKNOWN
    if not resources_ok:
        return GATE_RESOURCE
    if unknown_effects:
        return GATE_UNKNOWN_EFFECT
    return GATE_NONE


def budget_status(limit: int, spent_known: int, unknown_requests: int) -> int:
    """A hard budget's standing; ``limit < 0`` means no budget. Unknown cost is never balance.

    pre: spent_known >= 0 and unknown_requests >= 0
    post: limit >= 0 or __return__ == 0
    post: not (limit >= 0 and unknown_requests > 0) or __return__ in (2, 3)
    post: __return__ != 1 or spent_known < limit
    """
    if limit < 0:
        return BUDGET_NONE
    if spent_known >= limit:
        return BUDGET_EXHAUSTED
    if unknown_requests > 0:
        return BUDGET_UNKNOWN
    return BUDGET_OK


# --- Ownership and recovery mode --------------------------------------------------------------------


def fencing_accepts(write_generation: int, current_generation: int) -> bool:
    """A write is accepted only from the current lease generation; a stale generation's is rejected.

    post: __return__ == (write_generation == current_generation)
    """
    return write_generation == current_generation


def next_generation(current_generation: int) -> int:
    """The generation a new owner takes: strictly newer, so every older writer is fenced.

    pre: current_generation >= 0
    post: __return__ > current_generation
    post: not fencing_accepts(current_generation, __return__)
    """
    return current_generation + 1


def recovery_mode(owner_alive: bool, same_host: bool, death_confirmed: bool, safe_checkpoint: bool) -> RecoveryMode:
    """Exactly one recovery mode for a work item whose run was interrupted.

    A disconnected connection alone is not death; another host's owner is never silently taken
    over; a checkpoint is resumed only when it is verified safe, otherwise the turn is repaired.

    post: (__return__ == RecoveryMode.REATTACH) == (owner_alive and same_host)
    post: __return__ != RecoveryMode.NEW_ATTEMPT or (safe_checkpoint and death_confirmed and same_host)
    post: __return__ != RecoveryMode.REPAIR or (not safe_checkpoint and death_confirmed and same_host)
    post: same_host or __return__ == RecoveryMode.HOLD
    """
    if not same_host:
        return RecoveryMode.HOLD
    if owner_alive:
        return RecoveryMode.REATTACH
    if not death_confirmed:
        return RecoveryMode.HOLD
    if safe_checkpoint:
        return RecoveryMode.NEW_ATTEMPT
    return RecoveryMode.REPAIR


# --- Continuations ---------------------------------------------------------------------------------


def continuation_key(work_id: str, control_version: int, predecessor_commit: int) -> str:
    """The stable key that admits one continuation: work_id + control version + predecessor commit.

    The work_id's length prefixes it, so no two distinct triples share a key.

    pre: control_version >= 0 and predecessor_commit >= 0
    post: parse_continuation_key(__return__) == (work_id, control_version, predecessor_commit)
    """
    return f"{len(work_id)}:{work_id}:{control_version}:{predecessor_commit}"


def parse_continuation_key(key: str) -> tuple[str, int, int]:
    """The inverse of ``continuation_key`` (used by its contract and by the suite's diagnostics)."""
    length, _, rest = key.partition(":")
    size = int(length)
    work_id, tail = rest[:size], rest[size + 1:]
    control_version, _, commit = tail.partition(":")
    return work_id, int(control_version), int(commit)


def wait_admits(intent_run: bool, versions_match: bool, other_execution: bool, already_consumed: bool) -> bool:
    """A durable wait's notification admits at most once, and only for the current, running intent.

    post: __return__ == (intent_run and versions_match and not other_execution and not already_consumed)
    """
    return intent_run and versions_match and not other_execution and not already_consumed


# --- Usage -----------------------------------------------------------------------------------------


def usage_watermark(current: int, snapshot: int) -> int:
    """Fold a streamed cumulative usage snapshot into the attempt's watermark: a maximum, never a sum.

    pre: current >= 0 and snapshot >= 0
    post: __return__ >= current and __return__ >= snapshot
    post: __return__ in (current, snapshot)
    """
    return snapshot if snapshot > current else current


def known_cost(tokens: int, price_per_token: int) -> int:
    """Cost of known tokens at a known price; a negative argument means unknown, and unknown stays -1.

    post: __return__ == -1 or (tokens >= 0 and price_per_token >= 0)
    post: not (tokens >= 0 and price_per_token >= 0) or __return__ == tokens * price_per_token
    """
    if tokens < 0 or price_per_token < 0:
        return -1
    return tokens * price_per_token


# --- Paperclip Retry -------------------------------------------------------------------------------


def jittered_delay_ms(retry_number: int, jitter_permille: int) -> int:
    """The delay before retry ``retry_number`` (1..5) with the persisted jitter in [-200, 200] permille.

    pre: 1 <= retry_number <= 5
    pre: -200 <= jitter_permille <= 200
    post: __return__ * 10 >= 8 * 1000 * (30, 60, 120, 240, 480)[retry_number - 1]
    post: __return__ * 10 <= 12 * 1000 * (30, 60, 120, 240, 480)[retry_number - 1]
    """
    base_ms = RETRY_DELAYS_S[retry_number - 1] * 1000
    return base_ms + base_ms * jitter_permille // 1000


def next_retry_at_ms(failures: int, first_failure_ms: int, now_ms: int, jitter_permille: int,
                     cooldown_until_ms: int) -> int:
    """When the next maintenance retry may run, or -1 when none may be scheduled.

    ``failures`` counts failed attempts of this generation, the initial one included; restarts
    never reset it. A longer provider cooldown wins; nothing is scheduled past the window.

    pre: failures >= 1
    pre: 0 <= first_failure_ms <= now_ms
    pre: -200 <= jitter_permille <= 200
    post: failures <= 5 or __return__ == -1
    post: __return__ == -1 or __return__ >= cooldown_until_ms
    post: __return__ == -1 or __return__ <= first_failure_ms + 1800000
    post: __return__ == -1 or __return__ > now_ms
    """
    if failures > len(RETRY_DELAYS_S):
        return -1
    at = now_ms + jittered_delay_ms(failures, jitter_permille)
    if cooldown_until_ms > at:
        at = cooldown_until_ms
    if at > first_failure_ms + RETRY_WINDOW_S * 1000:
        return -1
    return at


def retry_admission(key_seen: bool, active_work: bool, generation_exhausted: bool) -> RetryAdmission:
    """A Retry request with (company, idempotency_key): what it is allowed to do.

    Key uniqueness covers completed and failed receipts too, so a repeated HTTP request always
    gets its earlier receipt back and can never open a generation.

    post: (__return__ == RetryAdmission.RETURN_EXISTING) == key_seen
    post: __return__ != RetryAdmission.NEW_GENERATION or (generation_exhausted and not key_seen and not active_work)
    post: __return__ != RetryAdmission.ATTACH_ACTIVE or active_work
    """
    if key_seen:
        return RetryAdmission.RETURN_EXISTING
    if active_work:
        return RetryAdmission.ATTACH_ACTIVE
    if generation_exhausted:
        return RetryAdmission.NEW_GENERATION
    return RetryAdmission.SAME_GENERATION


# --- Goal transitions ------------------------------------------------------------------------------


class GoalEvent(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    END = "end"
    BUDGET_SPENT = "budget_spent"  # a settled receipt reaches the hard budget
    BUDGET_CHANGE = "budget_change"  # the user raises or removes the hard budget
    VERIFIED_MET = "verified_met"  # every requirement met for the current revision and result version
    BLOCKED = "blocked"  # the same real blocker recurs and no independent work is left
    UNBLOCKED = "unblocked"
    REVISION = "revision"  # objective revised (or permissions changed)


_TERMINAL = (GoalState.ACHIEVED, GoalState.CANCELLED)
PAUSED_EXITS = (GoalEvent.RESUME, GoalEvent.END)  # a person's decision, never a restart
BUDGET_EXHAUSTED_EXITS = (GoalEvent.BUDGET_CHANGE, GoalEvent.END)


def goal_transition(state: GoalState, event: GoalEvent, acceptance_current: bool) -> GoalState:
    """The Goal state after ``event``; an event that does not apply leaves the state as it is.

    ``acceptance_current`` says the verdict is for the current goal_id + revision + verified
    result version; only then may the Goal be achieved.

    post: state not in (GoalState.ACHIEVED, GoalState.CANCELLED) or __return__ == state
    post: __return__ != GoalState.ACHIEVED or state == GoalState.ACHIEVED or acceptance_current
    post: state != GoalState.PAUSED or __return__ == state or event in PAUSED_EXITS
    post: state != GoalState.BUDGET_EXHAUSTED or __return__ == state or event in BUDGET_EXHAUSTED_EXITS
    """
    if state in _TERMINAL:
        return state
    if event is GoalEvent.END:
        return GoalState.CANCELLED
    if state is GoalState.PAUSED:
        return GoalState.ACTIVE if event is GoalEvent.RESUME else state
    if state is GoalState.BUDGET_EXHAUSTED:
        return GoalState.ACTIVE if event is GoalEvent.BUDGET_CHANGE else state
    if event is GoalEvent.PAUSE:
        return GoalState.PAUSED
    if event is GoalEvent.BUDGET_SPENT:
        return GoalState.BUDGET_EXHAUSTED
    if event is GoalEvent.VERIFIED_MET:
        return GoalState.ACHIEVED if acceptance_current else state
    if event is GoalEvent.BLOCKED:
        return GoalState.BLOCKED
    if event in (GoalEvent.UNBLOCKED, GoalEvent.REVISION) and state is GoalState.BLOCKED:
        return GoalState.ACTIVE
    return state


def achieved_allowed(goal_revision: int, verdict_revision: int, result_version: int, verified_version: int,
                     all_met: bool) -> bool:
    """Only the current revision's verified result version, with every requirement met, is achieved.

    post: __return__ == (all_met and goal_revision == verdict_revision and result_version == verified_version)
    """
    return all_met and goal_revision == verdict_revision and result_version == verified_version
