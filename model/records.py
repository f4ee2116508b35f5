"""The durable records of the recovery contract, as frozen pydantic models.

These are the facts a runtime must have persisted for recovery to be decidable after any crash:
run intent, Goals, leases, receipts (usage, approval, Retry), tool calls, durable waits and turns.
They are frozen: the model never mutates a record, it builds a new one (``model_copy``), so a
rejected event cannot leave a half-applied state behind.

Names follow the seeds: run_intent, desired_state, control_version, generation, receipt,
continuation_key, effect_class, reason_code, work_id, goal_id, revision.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from recoverykit.model.catalogue import (
    Acceptance,
    ApprovalStatus,
    DesiredState,
    EffectClass,
    GoalPhase,
    GoalState,
    ReasonCode,
    RecoveryPolicy,
    RetryReceiptStatus,
    ToolStatus,
    TurnStatus,
    WorkKind,
)
from recoverykit.model.errors import MalformedRecord

Id = str
NonNeg = int


class Record(BaseModel):
    """Base of every record: frozen, no unknown fields, validated on construction."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    @classmethod
    def parse(cls, data: object):
        """Validate ``data`` into this record, raising the model's typed ``MalformedRecord``."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise MalformedRecord(
                f"{cls.__name__} rejected {data!r}: {exc.error_count()} problem(s): "
                f"{'; '.join(e['msg'] + ' at ' + '.'.join(map(str, e['loc'])) for e in exc.errors())}. "
                f"Pass the fields documented on recoverykit.model.{cls.__name__}."
            ) from None


class OwnerIdentity(Record):
    """Who runs a work item: a pid alone is reused, so host and process start time are part of it."""

    host: str = Field(min_length=1)
    pid: int = Field(ge=1)
    start_time_ms: NonNeg = Field(ge=0)


class Lease(Record):
    work_id: Id = Field(min_length=1)
    owner: OwnerIdentity
    generation: int = Field(ge=0)
    expires_at_ms: NonNeg = Field(ge=0)
    owner_alive: bool = True  # ground truth the model keeps; a runtime learns it by probing, not by disconnect


class RunIntent(Record):
    """What the user asked for, durable before the acknowledgement (seed 000, run intent)."""

    work_id: Id = Field(min_length=1)
    kind: WorkKind
    original_input: str
    unconsumed_messages: tuple[str, ...] = ()
    desired_state: DesiredState = DesiredState.RUN
    control_version: int = Field(default=0, ge=0)
    permission_scope: frozenset[str] = frozenset()
    objective_revision: int = Field(default=0, ge=0)
    host_identity: str = Field(min_length=1)
    parent_id: Id | None = None
    children: tuple[Id, ...] = ()
    delivered_children: tuple[Id, ...] = ()  # children whose result reached this parent (exactly once each)
    last_committed_progress: int = Field(default=0, ge=0)
    recovery_policy: RecoveryPolicy = RecoveryPolicy.AUTOMATIC
    reason_code: ReasonCode = ReasonCode.QUEUED
    goal_id: Id | None = None
    inputs_appended: int = Field(default=1, ge=0)  # how many times the original input entered a request
    resources_ok: bool = True
    permission_ok: bool = True


class Requirement(Record):
    req_id: Id = Field(min_length=1)
    acceptance: Acceptance = Acceptance.UNKNOWN
    evidence_version: int | None = None
    for_revision: int = Field(default=0, ge=0)


class TerminalSnapshot(Record):
    """The compact record a terminal Goal leaves at its transcript anchor; never replaced later."""

    goal_id: Id
    revision: int
    state: GoalState
    anchor_turn: Id | None


class Budget(Record):
    """An explicit hard budget; absent means unlimited. Unknown cost is never available balance."""

    limit: int = Field(ge=0)
    spent_known: int = Field(default=0, ge=0)
    unknown_requests: int = Field(default=0, ge=0)


class Goal(Record):
    goal_id: Id = Field(min_length=1)
    work_id: Id = Field(min_length=1)
    state: GoalState = GoalState.ACTIVE
    phase: GoalPhase = GoalPhase.WORKING
    revision: int = Field(default=0, ge=0)
    control_version: int = Field(default=0, ge=0)
    requirements: tuple[Requirement, ...] = ()
    budget: Budget | None = None
    result_version: int = Field(default=0, ge=0)
    achieved_for: tuple[int, int] | None = None  # (revision, verified result version)
    terminal_snapshots: tuple[TerminalSnapshot, ...] = ()

    @model_validator(mode="after")
    def _achieved_needs_acceptance(self) -> Goal:
        if self.state is GoalState.ACHIEVED and self.achieved_for is None:
            raise ValueError("an achieved Goal must name the revision and result version it was verified for")
        return self


class UsageReceipt(Record):
    """One provider attempt's usage, attributed before dispatch and kept so after pause or edit."""

    request_id: Id = Field(min_length=1)
    work_id: Id
    turn_id: Id
    goal_id: Id | None = None
    revision: int | None = None
    attempt: int = Field(default=1, ge=1)
    tokens: int | None = Field(default=None, ge=0)  # watermark of cumulative usage; None = unknown
    final: bool = False  # the provider's last word for this attempt arrived
    price_per_token: int | None = Field(default=None, ge=0)  # known price kept apart from known tokens
    durable: bool = True
    lost: bool = False  # the process waiting for the response died: tokens are a lower bound, the rest unknown


class Approval(Record):
    """A one-time approval bound to one tool call and the unknown-effect set it was asked about."""

    approval_id: Id = Field(min_length=1)
    work_id: Id
    tool_call_id: Id
    unknown_effect_set: frozenset[Id] = frozenset()
    status: ApprovalStatus = ApprovalStatus.PENDING


class ToolCall(Record):
    call_id: Id = Field(min_length=1)
    work_id: Id
    turn_id: Id
    tool: str
    effect_class: EffectClass  # from the trusted registry, never the tool's name or the model's claim
    status: ToolStatus = ToolStatus.NEVER_STARTED
    approval_id: Id | None = None
    child_alive: bool = False
    executions: int = Field(default=0, ge=0)  # ground truth (the kit's witness log), not a runtime fact


class DurableWait(Record):
    handle: Id = Field(min_length=1)
    work_id: Id
    goal_revision: int = Field(default=0, ge=0)
    observed_version: int = Field(ge=0)
    consumption_key: Id
    consumed: bool = False
    result: str | None = None  # results arriving while paused or restarting are saved, not discarded


class Turn(Record):
    turn_id: Id = Field(min_length=1)
    work_id: Id
    continuation_key: str
    status: TurnStatus = TurnStatus.ACTIVE
    attempt: int = Field(default=1, ge=1)
    predecessor_commit: int = Field(default=0, ge=0)
    safe_checkpoint: bool = True  # a checkpoint covering every committed effect exists
    repair_key: str | None = None
    restricted: bool = False  # recovery turn after unknown effects: trusted reads and state probes only


class RetryReceipt(Record):
    """Paperclip agent_wakeup_requests receipt, unique per (company, idempotency_key)."""

    company: Id = Field(min_length=1)
    idempotency_key: Id = Field(min_length=1)
    work_id: Id
    generation: int = Field(ge=1)
    status: RetryReceiptStatus = RetryReceiptStatus.ACCEPTED


class RetryGeneration(Record):
    """The persisted maintenance retry budget of one work item's current generation."""

    work_id: Id
    generation: int = Field(default=1, ge=1)
    failures: int = Field(default=0, ge=0)
    first_failure_ms: int | None = None
    jitter_permille: int = Field(default=0, ge=-200, le=200)  # drawn once, persisted
    next_at_ms: int | None = None
    exhausted: bool = False
