"""Everything that can happen to a runtime, as frozen records: client operations, runtime progress, faults.

Each event has a ``type`` tag so a history can be stored as JSON and parsed back with
``parse_event``. Client operations are what a person or client does; runtime progress is what
the runtime under test reports doing; faults are what the kit's environment does to it. An
operation whose outcome is indefinite (its process died before replying) is wrapped in
``InFlight``: ``successors`` then yields both outcomes.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, ValidationError, field_validator
from recoverykit.model.catalogue import POINTS_BY_NAME, EffectClass, RecoveryPolicy, RestartKind, WorkKind
from recoverykit.model.errors import MalformedRecord
from recoverykit.model.records import Record


def _check_point(point: str) -> str:
    if point not in POINTS_BY_NAME:
        raise ValueError(f"unknown interruption point {point!r}; use a name from catalogue.INTERRUPTION_POINTS")
    return point


# --- client operations -----------------------------------------------------------------------------


class Submit(Record):
    type: Literal["submit"] = "submit"
    work_id: str = Field(min_length=1)
    kind: WorkKind = WorkKind.CHAT_REQUEST
    text: str = ""
    permission_scope: frozenset[str] = frozenset()
    recovery_policy: RecoveryPolicy = RecoveryPolicy.AUTOMATIC
    parent_id: str | None = None


class CreateGoal(Record):
    type: Literal["create_goal"] = "create_goal"
    goal_id: str = Field(min_length=1)
    work_id: str = Field(min_length=1)
    requirements: tuple[str, ...] = ("r1",)
    budget_limit: int | None = Field(default=None, ge=0)


class UpdateGoal(Record):
    """An objective revision; ``revision`` must be exactly the next one (optimistic concurrency)."""

    type: Literal["update_goal"] = "update_goal"
    goal_id: str
    revision: int = Field(ge=1)
    requirements: tuple[str, ...] | None = None


class Pause(Record):
    type: Literal["pause"] = "pause"
    work_id: str


class Resume(Record):
    type: Literal["resume"] = "resume"
    work_id: str


class End(Record):
    type: Literal["end"] = "end"
    work_id: str


class StopAll(Record):
    """'Quit and stop all tasks': the user's stop intent is persisted for every running item."""

    type: Literal["stop_all"] = "stop_all"


class Approve(Record):
    type: Literal["approve"] = "approve"
    approval_id: str


class Deny(Record):
    type: Literal["deny"] = "deny"
    approval_id: str


class BudgetChange(Record):
    type: Literal["budget_change"] = "budget_change"
    goal_id: str
    limit: int | None = Field(default=None, ge=0)  # None removes the hard budget


class PermissionChange(Record):
    type: Literal["permission_change"] = "permission_change"
    work_id: str
    permission_ok: bool


class ResourceChange(Record):
    type: Literal["resource_change"] = "resource_change"
    work_id: str
    resources_ok: bool


class RetryRequest(Record):
    """Paperclip ``POST /api/issues/:id/retry`` with an idempotency key."""

    type: Literal["retry_request"] = "retry_request"
    company: str = Field(min_length=1)
    idempotency_key: str = Field(min_length=1)
    work_id: str


class FrontendReload(Record):
    type: Literal["frontend_reload"] = "frontend_reload"


# --- runtime progress ------------------------------------------------------------------------------


class Admit(Record):
    """The scheduler admits a queued work item: a turn opens under its continuation key."""

    type: Literal["admit"] = "admit"
    work_id: str
    turn_id: str = Field(min_length=1)


class ProviderRequest(Record):
    type: Literal["provider_request"] = "provider_request"
    work_id: str
    request_id: str = Field(min_length=1)


class ProviderUsage(Record):
    """A streamed cumulative usage snapshot for one attempt."""

    type: Literal["provider_usage"] = "provider_usage"
    request_id: str
    cumulative_tokens: int = Field(ge=0)


class ProviderResponse(Record):
    type: Literal["provider_response"] = "provider_response"
    request_id: str
    tokens: int | None = Field(default=None, ge=0)
    price_per_token: int | None = Field(default=None, ge=0)


class ToolDispatch(Record):
    type: Literal["tool_dispatch"] = "tool_dispatch"
    work_id: str
    call_id: str = Field(min_length=1)
    tool: str = "probe"
    effect_class: EffectClass = EffectClass.UNKNOWN  # the trusted registry's entry for ``tool``
    approval_id: str | None = None


class ToolCommit(Record):
    """The tool's result arrives and is committed (tool.result.commit.after)."""

    type: Literal["tool_commit"] = "tool_commit"
    call_id: str


class TurnComplete(Record):
    type: Literal["turn_complete"] = "turn_complete"
    work_id: str


class ChildDelivery(Record):
    """A finished child's result is delivered to its parent (child.delivery.before / .after)."""

    type: Literal["child_delivery"] = "child_delivery"
    parent_id: str
    child_id: str


class TodoComplete(Record):
    """All required Todo items finished: the Goal enters verifying."""

    type: Literal["todo_complete"] = "todo_complete"
    goal_id: str


class Verification(Record):
    type: Literal["verification"] = "verification"
    goal_id: str
    revision: int = Field(ge=0)
    result_version: int = Field(ge=0)
    verdicts: dict[str, str] = {}  # req_id -> met / unmet / unknown


class Blocker(Record):
    """A Goal's real blocker recurs with no independent work left (``present``), or it clears."""

    type: Literal["blocker"] = "blocker"
    goal_id: str
    present: bool = True


class WaitCreate(Record):
    type: Literal["wait_create"] = "wait_create"
    work_id: str
    handle: str = Field(min_length=1)
    consumption_key: str = Field(min_length=1)


class Notification(Record):
    type: Literal["notification"] = "notification"
    handle: str
    observed_version: int = Field(ge=0)
    result: str = "done"


class StaleWrite(Record):
    """A write stamped with a lease generation (the old owner's, if it is stale)."""

    type: Literal["stale_write"] = "stale_write"
    work_id: str
    generation: int = Field(ge=0)


class TaskFailure(Record):
    """A Paperclip run failed; maintenance schedules the next retry, if any is left."""

    type: Literal["task_failure"] = "task_failure"
    work_id: str
    cooldown_until_ms: int = Field(default=0, ge=0)
    jitter_permille: int = Field(default=0, ge=-200, le=200)  # persisted on the first failure only


class ClockAdvance(Record):
    type: Literal["clock_advance"] = "clock_advance"
    ms: int = Field(ge=0)


# --- faults ----------------------------------------------------------------------------------------


class Crash(Record):
    """The runtime's processes die at an interruption point (``worker_only`` spares tool children)."""

    type: Literal["crash"] = "crash"
    point: str
    worker_only: bool = False

    _point = field_validator("point")(classmethod(lambda cls, v: _check_point(v)))


class GracefulExit(Record):
    type: Literal["graceful_exit"] = "graceful_exit"


class Start(Record):
    """The runtime starts and runs recovery; ``crash_at`` kills it again at a recovery phase."""

    type: Literal["start"] = "start"
    crash_at: str | None = None

    @field_validator("crash_at")
    @classmethod
    def _recovery_point(cls, v: str | None) -> str | None:
        if v is not None and not _check_point(v).startswith("recovery."):
            raise ValueError(f"crash_at must be a recovery phase point, got {v!r}")
        return v


class Restart(Record):
    """One restart kind from the failure acceptance matrix, as a whole: exit or kill, then start."""

    type: Literal["restart"] = "restart"
    kind: RestartKind


class ClockJump(Record):
    type: Literal["clock_jump"] = "clock_jump"
    ms: int = Field(ge=0)


class HostChange(Record):
    type: Literal["host_change"] = "host_change"
    host: str = Field(min_length=1)


Event = Annotated[
    Submit | CreateGoal | UpdateGoal | Pause | Resume | End | StopAll | Approve | Deny | BudgetChange
    | PermissionChange | ResourceChange | RetryRequest | FrontendReload | Admit | ProviderRequest
    | ProviderUsage | ProviderResponse | ToolDispatch | ToolCommit | TurnComplete | ChildDelivery | TodoComplete
    | Verification | Blocker | WaitCreate | Notification | StaleWrite | TaskFailure | ClockAdvance | Crash
    | GracefulExit | Start | Restart | ClockJump | HostChange,
    Field(discriminator="type"),
]


class InFlight(Record):
    """``op`` was in flight when the runtime crashed at ``point``: it may or may not have happened."""

    type: Literal["in_flight"] = "in_flight"
    op: Event
    point: str

    _point = field_validator("point")(classmethod(lambda cls, v: _check_point(v)))


_EVENT = TypeAdapter(Event | InFlight)


def parse_event(data: object) -> Record:
    """An event from its JSON form (``{"type": "pause", "work_id": "w1"}``); malformed -> MalformedRecord."""
    try:
        return _EVENT.validate_python(data)
    except ValidationError as exc:
        raise MalformedRecord(
            f"event {data!r} is malformed: {'; '.join(e['msg'] for e in exc.errors())}. "
            "An event needs a known 'type' and that type's fields (see recoverykit.model.events)."
        ) from None


CLIENT_OPS = (Submit, CreateGoal, UpdateGoal, Pause, Resume, End, StopAll, Approve, Deny, BudgetChange,
              PermissionChange, ResourceChange, RetryRequest, FrontendReload)
FAULTS = (Crash, GracefulExit, Start, Restart, ClockJump, HostChange, InFlight)
