"""The observe snapshot: the only view the kit has of a runtime's state.

Every section is optional as a whole: a runtime that cannot know something (LangGraph has no leases,
DBOS no Goals) leaves the section out of ``init_ok.observes`` and sends it as null. Inside a section,
a field whose value the runtime cannot know is null, with the meaning its description gives; it is
never invented. Vocabulary comes from ``recoverykit.model.catalogue``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from recoverykit.conformance.protocol_envelope import finish_schema
from recoverykit.conformance.protocol_tasks import (
    TASK_SECTION_DOCS,
    TASK_SECTION_MODELS,
    RecoveryCoordinator,
    RetryScheduleEntry,
    Task,
    WakeupReceipt,
    Workspace,
)
from recoverykit.model.catalogue import (
    Acceptance,
    ApprovalStatus,
    DesiredState,
    EffectClass,
    GoalPhase,
    GoalState,
    ReasonCode,
    RecoveryPolicy,
    RunStatus,
    StorageAction,
    StorageState,
    ToolStatus,
    TurnStatus,
    UsageStatus,
    WorkKind,
    WorkStatus,
)

Id = str  # opaque identifiers chosen by the runtime; compared for equality only


class Record(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, json_schema_extra=finish_schema)


class Section(StrEnum):
    """Snapshot sections an adapter may declare in ``init_ok.observes``."""

    WORK_ITEMS = "work_items"
    GOALS = "goals"
    TURNS = "turns"
    TOOL_CALLS = "tool_calls"
    APPROVALS = "approvals"
    USAGE_RECEIPTS = "usage_receipts"
    LEASES = "leases"
    WAITS = "waits"
    FENCED_WRITES = "fenced_writes"
    RUNS = "runs"
    TASKS = "tasks"  # since 1.3, profile paperclip_retry (protocol_tasks)
    WAKEUP_RECEIPTS = "wakeup_receipts"
    WORKSPACES = "workspaces"
    RECOVERY_COORDINATORS = "recovery_coordinators"
    RETRY_SCHEDULE = "retry_schedule"
    RESERVATIONS = "reservations"  # since 1.4, profile goals (budget reservations, USG-19)


class AcceptedInput(Record):
    input_id: Id = Field(description="The id returned in `submit_ok`.")
    client_msg_id: str = Field(description="The client's id from `submit`, stored with the input.")
    text: str = Field(description="The text as durably saved.")


class WorkItem(Record):
    work_id: Id
    session_id: Id
    kind: WorkKind
    desired_state: DesiredState = Field(description="The durable run intent: what the user last asked for.")
    control_version: int = Field(ge=0, description="Increases with every accepted control (pause, resume, end, ...).")
    status: WorkStatus = Field(description="What the work item is doing now.")
    reason_code: ReasonCode | None = Field(
        description="Why it is where it is. Null only while running or finished; every waiting, paused, "
        "failed or queued-for-a-reason state carries one.")
    recovery_policy: RecoveryPolicy | None = Field(
        description="`automatic`, or `disabled` when automatic recovery was explicitly turned off; "
        "null if the runtime has no such policy.")
    host_id: str | None = Field(
        description="The execution host identity recorded in the run intent; null if not recorded.")
    parent_id: Id | None = Field(
        description="The parent work item for a child Job or subtask; null for top-level work.")
    inputs: list[AcceptedInput] = Field(description="Every accepted (acknowledged) input of this work item, in order.")
    last_progress: str | None = Field(
        description="An opaque id of the last committed progress point (checkpoint or turn commit); null if none yet.")
    provenance: Id | None = Field(
        None, description="Since 1.3, optional (profile jobs): for a Job or one of its subtasks, the work item of the "
        "real caller whose request started the Job, as saved at that admission (kept across sessions and restarts, "
        "unlike `parent_id`); null for other work or if not recorded.")


class Budget(Record):
    max_tokens: int | None = Field(ge=0, description="Hard token limit; null is unlimited (the default).")
    max_cost_usd: float | None = Field(ge=0, description="Hard cost limit in US dollars; null is unlimited.")
    spent_tokens_known: int | None = Field(
        ge=0, description="Tokens from receipts with known usage; null if the runtime does not track spend.")
    requests_usage_unknown: int | None = Field(
        ge=0, description="Requests whose usage is unknown or partial; null if not tracked.")
    max_active_s: float | None = Field(
        None, ge=0, description="Since 1.3, optional: the active-time limit in seconds; null is unlimited.")


class EvidenceRef(Record):
    ref: str = Field(description="The evidence as the acceptance cited it (a worker answer, an artifact, a query).")
    version: str | None = Field(
        description="The version number or content digest of that evidence as judged (a controlled artifact); "
        "null if the runtime recorded none.")


class GoalRequirement(Record):
    """Since 1.3, optional: one verifiable requirement of a Goal, kept for its whole life (seed 000, "Todo and
    acceptance")."""

    req_id: Id = Field(description="The requirement as extracted from the objective (`[[req:ID]]`, else `objective`).")
    waived_reason: str | None = Field(
        description="Null while required; the reason of the explicit objective revision that waived it.")
    verdict: Acceptance | None = Field(
        description="What the Goal's current acceptance (this revision) found for it; null if none ran.")
    evidence: list[EvidenceRef] = Field(description="The evidence that verdict cites (empty if none).")


class GoalTerminal(Record):
    """Since 1.3, optional: the record saved with a Goal's terminal state."""

    state: GoalState = Field(description="The terminal state it was saved with.")
    revision: int = Field(ge=0, description="The revision the terminal state was committed for.")
    transcript_anchor: str | None = Field(
        description="An opaque id of the last transcript entry the record covers; null if none.")
    digest: str | None = Field(description="A digest of the saved Goal snapshot, to tell it unchanged; null if none.")


class Goal(Record):
    goal_id: Id
    work_id: Id
    state: GoalState
    phase: GoalPhase | None = Field(description="Null when the state is terminal or paused.")
    revision: int = Field(ge=0, description="The objective revision; increases on every accepted `goal_update`.")
    can_resume: bool = Field(description="Computed by the backend: Resume is allowed now (the UI must not infer it).")
    can_verify: bool = Field(description="Computed by the backend: acceptance may be run now.")
    can_end: bool = Field(description="Computed by the backend: End is allowed now.")
    reason_code: ReasonCode | None = Field(description="Why the Goal is not working; null while working normally.")
    budget: Budget | None = Field(description="Null: the runtime has no budget for this Goal (unlimited).")
    acceptance: Acceptance | None = Field(description="The last acceptance result for this revision; null if none ran.")
    requirements: list[GoalRequirement] | None = Field(
        None, description="Since 1.3, optional: every requirement of the Goal, waived ones included, with the "
        "current acceptance's verdict and evidence for each; null or absent if not tracked (the clauses that need "
        "it are then unknown).")
    terminal: GoalTerminal | None = Field(
        None, description="Since 1.3, optional: the terminal record (snapshot and transcript anchor) saved with a "
        "terminal state; null while the Goal is not terminal or if not tracked.")
    active_time_s: float | None = Field(
        None, ge=0, description="Since 1.3, optional: the Goal's active time in seconds, from durable start/stop "
        "records (pauses and downtime excluded); null if not tracked.")


class Turn(Record):
    turn_id: Id
    work_id: Id
    continuation_key: str | None = Field(
        description="Stable key derived from work_id + control version + predecessor commit point; "
        "null for the first turn of a request.")
    predecessor: Id | None = Field(description="The turn this one continues; null for the first turn.")
    status: TurnStatus


class ToolCall(Record):
    call_id: Id
    work_id: Id
    turn_id: Id
    tool: str = Field(description="The probe tool's (or runtime tool's) registered name.")
    effect_class: EffectClass = Field(description="As registered and saved at execution, never inferred from the name.")
    status: ToolStatus
    pid: int | None = Field(description="The child process, if the call runs one and it was recorded; else null.")
    create_time: float | None = Field(description="The child's process start time (psutil create_time); null with pid.")
    repair_key: str | None = Field(
        description="The stable key of the placeholder result written by recovery; null if never repaired.")


class Approval(Record):
    approval_id: Id
    work_id: Id = Field(description="The work item waiting for the approval.")
    call_id: Id | None = Field(description="The tool call the approval binds to; null if it binds to the work item.")
    status: ApprovalStatus
    tool_call_id: str | None = Field(
        None, description="Since 1.3, optional: the id the model gave the tool call the approval binds to (the "
        "provider response's `tool_calls[].id`), so the kit can match the approval to the probe execution it "
        "allows; null or absent if unknown (the checks that need it are then unknown).")
    effect_set: list[Id] | None = Field(
        None, description="Since 1.3, optional: the unknown-effect set the approval was asked under (the call ids "
        "whose outcome was unknown then); a change to it needs a fresh approval. Null or absent if not recorded.")


class Quote(Record):
    """Since 1.4: the prices a receipt's attempt was quoted at, kept apart from its tokens."""

    input_usd_per_mtok: float = Field(ge=0, description="US dollars per million prompt tokens.")
    output_usd_per_mtok: float = Field(ge=0, description="US dollars per million completion tokens.")


class UsageReceipt(Record):
    receipt_id: Id
    work_id: Id
    request_id: Id = Field(description=(
        "The provider attempt this receipt is for, as the kit can match it: the X-Request-Id the runtime "
        "sent with that attempt (fixed before dispatch), or the response id (chatcmpl-...) the provider "
        "returned for it (what an OpenAI client keeps). Either works. A receipt with usage that names "
        "neither is fabricated if the runtime sends X-Request-Id, else the usage clauses stay unknown."))
    attempt: int = Field(ge=1, description="Provider attempt number of this request (retries are new attempts).")
    goal_id: Id | None = Field(description="The Goal the usage is attributed to; null for ordinary chat.")
    revision: int | None = Field(ge=0, description="The Goal revision attributed; null with goal_id.")
    prompt_tokens: int | None = Field(
        ge=0, description="Null when not known (status unknown); a lower bound if partial.")
    completion_tokens: int | None = Field(ge=0, description="Null when not known; a lower bound if partial.")
    usage: UsageStatus = Field(description="Whether the token counts are known, a lower bound, or unknown.")
    job_id: Id | None = Field(
        None, description="Since 1.3, optional (profile jobs): the Job whose reservation the attempt belongs to (the "
        "Job's own request, or one of its subtask's), saved with the receipt at dispatch; null for other work or if "
        "not recorded.")
    quote: Quote | None = Field(
        None, description="Since 1.4, optional (adapters declaring `init_ok.pricing`): the prices in the runtime's "
        "pricing table when the attempt was dispatched, stored with the receipt apart from its tokens; a later "
        "`pricing_set` never changes it. Null when no price was known then.")


class Reservation(Record):
    """Since 1.4: what one paid attempt holds of a Goal's hard budget, from before its dispatch until its receipt
    (seed 000, "Usage, cost and budget": reserve a maximum request amount when calculable; expired unstarted
    reservations cannot dispatch; started requests are not automatically released)."""

    reservation_id: Id = Field(description="Stable across observations and restarts.")
    work_id: Id
    goal_id: Id | None = Field(None, description="The Goal whose budget it holds; null if none.")
    request_id: Id = Field(description="The provider attempt it covers, named as its usage receipt names it (the "
                           "`X-Request-Id` the attempt is sent with).")
    max_tokens: int | None = Field(None, ge=0, description="The most the attempt may spend, in tokens, held from "
                                   "the budget; null when no maximum is calculable.")
    expires_at: float | None = Field(None, description="The runtime's clock (epoch seconds, with the kit's clock "
                                     "offset) after which, still unstarted, it may never dispatch; null: it "
                                     "never expires.")
    state: Literal["reserved", "started", "settled", "released", "expired"] = Field(
        description="`reserved` (held, the request not sent yet), `started` (the request may have been sent: only "
        "its receipt settles it, never recovery or time), `settled` (its receipt recorded known or partial usage), "
        "`released` (given back unstarted) or `expired` (unstarted past `expires_at`: its request is never sent).")


Generation = Annotated[int, Field(ge=0)] | Annotated[str, Field(min_length=1)]
GENERATION_DOC = ("The fencing generation; writes from older generations are rejected. An integer that only moves "
                  "forward, or, since 1.4, an opaque string token (a per-execution fencing token such as DBOS's "
                  "`owner_xid`), compared for identity only: the kit then judges stale writes from evidence (a token "
                  "that owned the item again after another replaced it, a write under a replaced token), never from "
                  "an order of the strings.")


class Owner(Record):
    host_id: str = Field(description="The owner's host identity.")
    pid: int | None = Field(description="The owner's process id. Since 1.4, null when the runtime records no "
                            "process for an owner (DBOS records an executor id, not a process).")
    create_time: float | None = Field(description="Process start time, to tell a reused pid apart; null if unknown.")


class Lease(Record):
    work_id: Id
    owner: Owner = Field(description="The process that owns execution of the work item.")
    generation: Generation = Field(description=GENERATION_DOC)
    expires_at: float | None = Field(description="Unix time the lease lapses; null for leases without expiry.")


class Wait(Record):
    handle: str = Field(description="The durable wait handle (external job, child work item, timer).")
    work_id: Id
    observed_version: str | None = Field(description="The version observed when waiting began; null if none.")
    consumption_key: str = Field(description="Unique key: a wakeup is admitted at most once per key.")
    consumed: bool = Field(description="True once a wakeup for this key was admitted.")


class FencedWrite(Record):
    work_id: Id
    generation: Generation = Field(description="The stale generation (or token) that attempted the write.")
    current_generation: Generation = Field(description="The generation (or token) in force when it was rejected.")
    what: str = Field(description="What the rejected write was (free text, for the report).")


class Run(Record):
    run_id: Id
    work_id: Id
    status: RunStatus
    retry_of: Id | None = Field(description="The run this one retries; null for the first run.")
    idempotency_key: str | None = Field(description="The Retry key that created this run; null if not a Retry.")
    generation: int | None = Field(None, ge=1, description="Since 1.3, optional: the task's recovery generation.")
    attempt: int | None = Field(None, ge=1, description="Since 1.3, optional: the attempt within the generation "
                                "(1 is the generation's first run).")
    error_code: str | None = Field(None, description="Since 1.3, optional: why the run failed; null otherwise.")
    workspace: str | None = Field(None, description="Since 1.3, optional: the directory the run bound, relative to "
                                  "`data_dir`; null before preparation.")
    dispatched: bool | None = Field(None, description="Since 1.3, optional: a provider dispatch started in this "
                                    "run (its physical work); null if not tracked.")


class StorageStatus(Record):
    """The runtime's durable store as the runtime sees it now: sent as ``snapshot.storage`` by an adapter that
    declares ``init_ok.storage`` (protocol 1.1), on every observe, also while the store cannot be read."""

    state: StorageState = Field(
        description="`ok`; `unreadable` when the store cannot be opened or read; `migration_failed` when a "
        "migration failed or the store is at a schema newer than the runtime knows.")
    reason_code: ReasonCode | None = Field(
        description="Null when `ok`; else the recovery failure, e.g. `recovery_failed_storage_unavailable` or "
        "`recovery_failed_migration`.")
    actions: list[StorageAction] = Field(
        description="The recoverable actions offered while not `ok` (empty when `ok`). The kit takes `retry` by "
        "sending `start` again once the store is back.")
    text: str = Field(description="What is wrong and what to do, for a person.")


class Snapshot(Record):
    """One consistent read of the runtime's durable state. A null section is declared absent."""

    work_items: list[WorkItem] | None = Field(None, description="Null (or omitted) unless declared in `observes`.")
    goals: list[Goal] | None = Field(None, description="Null (or omitted) unless declared in `observes`.")
    turns: list[Turn] | None = Field(None, description="Null (or omitted) unless declared in `observes`.")
    tool_calls: list[ToolCall] | None = Field(None, description="Null (or omitted) unless declared in `observes`.")
    approvals: list[Approval] | None = Field(None, description="Null (or omitted) unless declared in `observes`.")
    usage_receipts: list[UsageReceipt] | None = Field(
        None, description="Null (or omitted) unless declared in `observes`.")
    leases: list[Lease] | None = Field(None, description="Null (or omitted) unless declared in `observes`.")
    waits: list[Wait] | None = Field(None, description="Null (or omitted) unless declared in `observes`.")
    fenced_writes: list[FencedWrite] | None = Field(
        None, description="Null (or omitted) unless declared in `observes`.")
    runs: list[Run] | None = Field(None, description="Null (or omitted) unless declared in `observes`.")
    tasks: list[Task] | None = Field(None, description="Since 1.3. Null (or omitted) unless declared.")
    wakeup_receipts: list[WakeupReceipt] | None = Field(
        None, description="Since 1.3. Null (or omitted) unless declared.")
    workspaces: list[Workspace] | None = Field(None, description="Since 1.3. Null (or omitted) unless declared.")
    recovery_coordinators: list[RecoveryCoordinator] | None = Field(
        None, description="Since 1.3. Null (or omitted) unless declared.")
    retry_schedule: list[RetryScheduleEntry] | None = Field(
        None, description="Since 1.3. Null (or omitted) unless declared.")
    reservations: list[Reservation] | None = Field(
        None, description="Since 1.4 (profile goals). Null (or omitted) unless declared.")
    storage: StorageStatus | None = Field(
        None, description="Since 1.1. The store's state; sent (never null) by an adapter that declares "
        "`init_ok.storage`, null otherwise. While it is not `ok` the declared sections may be null: the store "
        "cannot be read, and nothing is invented.")


SECTION_MODELS: dict[Section, type[Record]] = {
    Section.WORK_ITEMS: WorkItem, Section.GOALS: Goal, Section.TURNS: Turn, Section.TOOL_CALLS: ToolCall,
    Section.APPROVALS: Approval, Section.USAGE_RECEIPTS: UsageReceipt, Section.LEASES: Lease,
    Section.WAITS: Wait, Section.FENCED_WRITES: FencedWrite, Section.RUNS: Run, Section.RESERVATIONS: Reservation,
    **{Section(name): model for name, model in TASK_SECTION_MODELS.items()},
}
SECTION_DOCS: dict[Section, str] = {
    Section.WORK_ITEMS: "Run intent and status of every chat request, Goal and Job.",
    Section.GOALS: "Goal state, phase, revision and the backend-computed button permissions.",
    Section.TURNS: "Turns with their continuation keys; an interrupted turn stays interrupted.",
    Section.TOOL_CALLS: "Tool calls with their registered effect class and status.",
    Section.APPROVALS: "Approvals and whether each was consumed once.",
    Section.USAGE_RECEIPTS: "One record per provider attempt: attribution fixed before dispatch; known/unknown usage.",
    Section.LEASES: "Execution ownership: one owner per work item, with its fencing generation.",
    Section.WAITS: "Durable waits with their unique consumption keys.",
    Section.FENCED_WRITES: "Writes the runtime rejected because they came from a stale generation.",
    Section.RUNS: "Paperclip-style runs and Retries (profile paperclip_retry).",
    Section.RESERVATIONS: "Since 1.4 (profile goals): budget reservations of paid attempts under a hard budget, "
    "their expiry and whether each was started, settled by its receipt, released or expired.",
    **{Section(name): doc for name, doc in TASK_SECTION_DOCS.items()},
}
