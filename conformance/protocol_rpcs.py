"""Every RPC of the adapter protocol, declared once: name, doc, request model, reply model.

The registry ``RPCS`` drives validation in both directions (``recoverykit.conformance.protocol``), the
JSON Schema (``recoverykit protocol schema``) and the generated docs/protocol.md. Add an RPC here and
everything else follows; never change an existing one except additively (see the changelog in the docs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ConfigDict, Field, model_validator
from recoverykit.conformance.protocol_envelope import Reply, Request, finish_schema
from recoverykit.conformance.protocol_snapshot import Id, Record, Section, Snapshot
from recoverykit.conformance.protocol_tasks import (
    ReceiptStatus,
    TaskCreate,
    TaskCreateOk,
    TaskFault,
    TaskFaultOk,
    TaskMessage,
    TaskMessageOk,
)
from recoverykit.model.catalogue import (
    INTERRUPTION_POINTS,
    EffectClass,
    ProcessRole,
    Profile,
    RestartKind,
    WorkStatus,
)

SchemaVersionKind = Literal["sqlite_user_version"]

PointName = Literal[tuple(p.name for p in INTERRUPTION_POINTS)]  # type: ignore[valid-type]
# Resources the kit can change during downtime (between a stop or kill and the next start), since 1.1. An
# adapter declares in ``init_ok.resources`` the ones its runtime rechecks; the kit changes only those.
ResourceKind = Literal["model", "credentials", "working_dir", "tool_version"]


class ProbeTool(Record):
    name: str = Field(description="The tool name the runtime registers.")
    argv: list[str] = Field(min_length=1, description="The command to execute (no shell); append arguments after it.")
    effect_class: EffectClass | None = Field(
        description="Register the tool with exactly this effect class. Since 1.2, sent only to adapters that speak "
        "1.2 or later: null, a tool the kit registers without a trusted class, as a general shell, a third-party MCP "
        "tool or a custom tool comes; register it as your runtime registers those (they default to `unknown`).")
    version: str = Field(description="The tool version; a change after restart is a resource change.")
    plugin_hints: dict[str, bool] | None = Field(
        None, description="Since 1.2, optional, sent only to adapters that speak 1.2 or later: what the tool's own "
        "plugin declares about it, as an MCP server's tool annotations do (e.g. `{\"readOnlyHint\": true}`). A "
        "declaration, not a registration: it never gives the tool an effect class.")
    external_operation: bool = Field(
        False, description="Since 1.3, optional, sent only by scenarios of the profile `waits`: the tool starts an "
        "external operation. Its result (one JSON line) carries `\"wait\": {\"handle\", \"version\"}`: the runtime "
        "waits on that operation durably, for a `notify` or, when none comes, by reconciliation: running the tool "
        "again with the single argument `{\"query\": HANDLE}`, whose answer (`state`: `running`, `completed` or "
        "`failed`) it reads. A query that does not answer has timed out; the operation has not stopped.")


class BudgetLimit(Record):
    max_tokens: int | None = Field(ge=0, description="Hard token limit; null is unlimited.")
    max_cost_usd: float | None = Field(ge=0, description="Hard cost limit in US dollars; null is unlimited.")
    max_active_s: float | None = Field(
        None, ge=0, description="Since 1.3, optional: hard limit of the Goal's active time in seconds; null or "
        "absent is unlimited. A runtime that cannot verify it stops new paid admission, with a reason, rather than "
        "ignore it (USG-14).")


class ProcessInfo(Record):
    role: ProcessRole
    pid: int = Field(ge=1)
    create_time: float = Field(description="psutil.Process(pid).create_time(): tells a reused pid apart.")


class Pending(Record):
    work_id: Id
    status: WorkStatus = Field(description="Why it keeps the runtime from being quiescent (queued, running, ...).")


def _lack_schema(schema: dict, cls: type) -> None:
    """The JSON Schema says what the validator does: a lack names at least one feature or clause (so a schema-driven
    generator, and an adapter checking its replies against the shipped schema, never meet a refusal it did not
    describe)."""
    finish_schema(schema, cls)
    schema["anyOf"] = [{"required": [name], "properties": {name: {"minItems": 1}}} for name in ("features", "clauses")]


class Lack(Record):
    """Optional: a feature the framework does not have, so the clauses that need it stay unknown for that reason."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, json_schema_extra=_lack_schema)

    features: list[str] = Field(default_factory=list, description="What the framework has no counterpart of, by "
                                "its protocol name: an observe section (`turns`), an interruption point "
                                "(`input.accept.before`) or an optional `init_ok` field (`resources`). An unknown "
                                "that needs only lacked features is reported `framework_lacks`.")
    clauses: list[str] = Field(default_factory=list, description="Contract clauses (`OWN-02`) that rest on a "
                               "feature the framework lacks; each stays unknown (never valid), reported "
                               "`framework_lacks`.")
    why: str = Field(min_length=1, description="What the framework lacks, naming its source or documentation.")

    @model_validator(mode="after")
    def _names_something(self) -> Lack:
        if not self.features and not self.clauses:
            raise ValueError("a lack names at least one feature or clause")
        return self


class StorageDecl(Record):
    """Optional (protocol 1.1): where the runtime keeps its durable facts, so the kit can fault the store itself."""

    files: list[str] = Field(
        min_length=1, description="The store's files, as paths relative to `data_dir` (no `..`). During downtime "
        "the kit inverts the first 100 bytes of each that exists (and of its `-wal` sibling), keeping a copy and a "
        "hash of the original, and later restores them byte for byte.")
    schema_version: SchemaVersionKind | None = Field(
        description="`sqlite_user_version`: the first file is SQLite and its `PRAGMA user_version` is the schema "
        "version the runtime checks; the kit raises it by one (a newer schema) during downtime. Null: the kit "
        "cannot put the store at a newer schema, and that case is not applicable.")


# --- handshake ----------------------------------------------------------------------------------


class Init(Request):
    type: Literal["init"] = "init"
    protocol_version: str = Field(description="The kit's protocol version, MAJOR.MINOR (e.g. `1.0`).")
    data_dir: str = Field(description="A private, initially empty directory for the runtime's durable storage.")
    provider_base_url: str = Field(description="The scripted OpenAI-compatible provider, e.g. http://127.0.0.1:PORT/v1.")
    probe_tools: list[ProbeTool] = Field(description="Tools the runtime must register, with their effect classes.")
    failpoint_socket: str = Field(description="Unix socket path of the failpoint broker (docs/failpoints.md).")
    run_marker: str = Field(
        description="Put this in the environment of every process you start as RECOVERYKIT_RUN_MARKER, so the kit "
        "can find and reap leftovers.")
    model: str | None = Field(None, description="Since 1.1, optional: the model every provider request must name; "
                              "never another one (absent: the runtime's own choice).")
    api_key: str | None = Field(None, description="Since 1.1, optional: the provider credential, sent as "
                                "`Authorization: Bearer <api_key>`; never another one (absent: any).")


class InitOk(Reply):
    type: Literal["init_ok"] = "init_ok"
    name: str = Field(min_length=1, description="The runtime's name.")
    version: str = Field(min_length=1, description="The runtime's (and adapter's) version.")
    protocol_version: str = Field(description="The version the adapter speaks, MAJOR.MINOR; same MAJOR as the kit's.")
    profiles: list[Profile] = Field(description="Parts of the contract implemented; the rest are not applicable.")
    failpoints: list[PointName] = Field(description="Interruption points the runtime calls (runtime reach).")
    restart_kinds: list[RestartKind] = Field(description="Kinds `restart` can perform.")
    observes: list[Section] = Field(description="Snapshot sections `observe` fills; the others are sent as null.")
    resources: list[ResourceKind] = Field(
        default_factory=list, description="Since 1.1, optional: resources the runtime rechecks after a restart "
        "(docs/adapter-guide.md); the kit changes only these during downtime, the others' clauses stay unknown.")
    storage: StorageDecl | None = Field(
        None, description="Since 1.1, optional: the durable store the kit may fault (an unreadable store, a newer "
        "schema). Absent or null: the storage scenarios are not applicable, never passed.")
    legacy_paused_record: bool = Field(
        False, description="Since 1.2, optional: the adapter can write a paused record as an older version of the "
        "runtime left it (`plant_paused_record`). False or absent: the scenario that needs one is not applicable, "
        "never passed.")
    automatic_recovery_setting: bool = Field(
        False, description="Since 1.2, optional: the runtime has an explicit setting that disables automatic "
        "recovery and honours `start.automatic_recovery`. False or absent: the scenario that disables it is not "
        "applicable, never passed.")
    pricing: bool = Field(
        False, description="Since 1.4, optional: the runtime keeps a pricing table the kit can change (`pricing_set`) "
        "and stores with each usage receipt the price it was quoted at (`usage_receipts[].quote`), apart from its "
        "tokens. False or absent: the scenario that changes prices is not applicable, never passed.")
    lacks: list[Lack] = Field(
        default_factory=list, description="Optional: features the framework does not have (docs/adapter-guide.md "
        "section 20). Their clauses stay unknown, reported as `framework_lacks`, never valid; evidence still "
        "judges them.")


# --- user operations ----------------------------------------------------------------------------


class Submit(Request):
    type: Literal["submit"] = "submit"
    session_id: Id = Field(description="The chat session; created on first use.")
    text: str = Field(description="The user's text.")
    client_msg_id: str = Field(
        description="The client's id for this input; a resubmission with the same id is one input.")
    working_dir: str | None = Field(
        None, description="Since 1.1, optional, set only for adapters declaring `working_dir`: the session's working "
        "directory; its tools run there and nowhere else (absent or null: the runtime's own).")


class SubmitOk(Reply):
    type: Literal["submit_ok"] = "submit_ok"
    work_id: Id = Field(description="The work item that owns the input.")
    input_id: Id = Field(description="The durable id of the saved input.")


class GoalCreate(Request):
    type: Literal["goal_create"] = "goal_create"
    session_id: Id = Field(description="The chat session the Goal belongs to.")
    objective: str = Field(description="The original objective and completion conditions, verbatim.")
    budget: BudgetLimit | None = Field(description="Null: no budget (unlimited).")


class GoalCreateOk(Reply):
    type: Literal["goal_create_ok"] = "goal_create_ok"
    goal_id: Id
    work_id: Id
    revision: int = Field(ge=0, description="The Goal's first revision.")


class GoalUpdate(Request):
    type: Literal["goal_update"] = "goal_update"
    goal_id: Id
    revision: int = Field(ge=0, description="The revision the user edited; stale: precondition_failed.")
    objective: str = Field(description="The revised objective, verbatim.")
    reason: str | None = Field(description="Why the objective changed (a waiver must say why); null if not given.")


class GoalUpdateOk(Reply):
    type: Literal["goal_update_ok"] = "goal_update_ok"
    goal_id: Id
    revision: int = Field(ge=0, description="The new revision.")


class WorkControl(Request):
    work_id: Id


class ControlOk(Reply):
    work_id: Id
    control_version: int = Field(ge=0, description="The control version after this control was accepted.")


class Pause(WorkControl):
    type: Literal["pause"] = "pause"


class PauseOk(ControlOk):
    type: Literal["pause_ok"] = "pause_ok"


class Resume(WorkControl):
    type: Literal["resume"] = "resume"


class ResumeOk(ControlOk):
    type: Literal["resume_ok"] = "resume_ok"


class End(WorkControl):
    type: Literal["end"] = "end"


class EndOk(ControlOk):
    type: Literal["end_ok"] = "end_ok"


class StopAll(Request):
    type: Literal["stop_all"] = "stop_all"


class StopAllOk(Reply):
    type: Literal["stop_all_ok"] = "stop_all_ok"
    stopped: list[Id] = Field(description="Work items whose durable stop intent was saved.")


class ApprovalDecision(Request):
    approval_id: Id


class Approve(ApprovalDecision):
    type: Literal["approve"] = "approve"


class ApproveOk(Reply):
    type: Literal["approve_ok"] = "approve_ok"
    approval_id: Id


class Deny(ApprovalDecision):
    type: Literal["deny"] = "deny"


class DenyOk(Reply):
    type: Literal["deny_ok"] = "deny_ok"
    approval_id: Id


class Notify(Request):
    type: Literal["notify"] = "notify"
    notification_id: str = Field(min_length=1, description="The notification's own id; the same id again is a "
                                 "duplicate delivery of it.")
    handle: str = Field(min_length=1, description="The external operation's handle, as the tool's result named it.")
    version: str = Field(min_length=1, description="The operation's version this notification is about.")
    outcome: Literal["completed", "failed", "timeout"] = Field(
        description="What happened to the operation: it completed, failed, or reached its own deadline.")


class NotifyOk(Reply):
    type: Literal["notify_ok"] = "notify_ok"


class JobStart(Request):
    type: Literal["job_start"] = "job_start"
    caller_work_id: Id = Field(description="The real active caller: the work item whose request starts the Job. Its "
                               "identity (and Goal, if any) is saved at this admission boundary and restored when the "
                               "Job and its subtasks start.")
    session_id: Id = Field(description="The session the Job runs in; created on first use. Another session than the "
                           "caller's is a cross-session call: it keeps the caller's provenance without making the "
                           "caller its canonical parent.")
    text: str = Field(description="The Job's own instruction; once every subtask's result is delivered to it, the Job "
                      "asks the model once with them.")
    subtasks: list[str] = Field(min_length=1, max_length=16, description="The subtasks this Job is authorized to "
                                "run, one instruction each: each runs as a child work item, and its result is "
                                "delivered to the Job once. A restart authorizes no other.")
    concurrency: int = Field(ge=1, description="The Job's concurrency quota: at most this many of its subtasks run "
                             "at once, also across a restart.")
    client_job_id: str = Field(min_length=1, description="The client's id for this Job; the same id again is the "
                               "same Job.")


class JobStartOk(Reply):
    type: Literal["job_start_ok"] = "job_start_ok"
    job_id: Id = Field(description="The Job's work item (kind `job`).")


class BudgetSet(Request):
    type: Literal["budget_set"] = "budget_set"
    work_id: Id = Field(description="The work item (a Goal's work_id for a Goal budget).")
    limit: BudgetLimit = Field(description="The new hard limits; nulls remove a limit.")


class BudgetSetOk(Reply):
    type: Literal["budget_set_ok"] = "budget_set_ok"
    work_id: Id


class Retry(Request):
    type: Literal["retry"] = "retry"
    work_id: Id
    idempotency_key: str = Field(description="A repeated request with this key attaches to the same run.")
    observed_run_id: Id = Field(description="The run the user saw fail; not the latest: precondition_failed.")
    authority: Literal["board", "none"] = Field(
        "board", description="Since 1.3: who clicks. `board` (the default): an authenticated board member with task "
        "mutation authority, every ordinary click. `none`: a caller without it (unauthenticated, or an agent); the "
        "runtime refuses it with `forbidden` and records nothing (seed 001, RTY-03).")


class RetryOk(Reply):
    type: Literal["retry_ok"] = "retry_ok"
    run_id: Id | None = Field(description="The run created or attached to. Since 1.3 it may be null: the receipt is "
                              "saved but admission waits (`receipt_status` `deferred`).")
    created: bool = Field(description="False when the key attached to an already accepted Retry.")
    receipt_status: ReceiptStatus | None = Field(
        None, description="Since 1.3, optional: the status of the click's wakeup receipt after this request.")


class Reload(Request):
    type: Literal["reload"] = "reload"


class ReloadOk(Reply):
    type: Literal["reload_ok"] = "reload_ok"


class PlantPausedRecord(Request):
    type: Literal["plant_paused_record"] = "plant_paused_record"
    session_id: Id = Field(description="The chat session of the record; created if needed.")
    text: str = Field(description="The record's one accepted input, verbatim.")
    client_msg_id: str = Field(description="The client's id stored with that input.")
    reason: str = Field(min_length=1, description="The pause reason the older version stored: one the current "
                        "runtime does not know (not one of the vocabulary's ReasonCodes).")


class PlantPausedRecordOk(Reply):
    type: Literal["plant_paused_record_ok"] = "plant_paused_record_ok"
    work_id: Id = Field(description="The work item of the planted record.")
    input_id: Id = Field(description="The id of its accepted input.")


class PricingSet(Request):
    """Since 1.4: the operator changes the runtime's pricing table (seed 000, "Usage, cost and budget": known
    tokens and known prices are stored apart, and a pricing-table change never rewrites a historical quote)."""

    type: Literal["pricing_set"] = "pricing_set"
    model: str | None = Field(None, description="The model the prices are for; null or absent: every model.")
    input_usd_per_mtok: float = Field(ge=0, description="US dollars per million prompt tokens.")
    output_usd_per_mtok: float = Field(ge=0, description="US dollars per million completion tokens.")


class PricingSetOk(Reply):
    type: Literal["pricing_set_ok"] = "pricing_set_ok"


# --- lifecycle ----------------------------------------------------------------------------------


class Start(Request):
    type: Literal["start"] = "start"
    failpoints: str = Field(description="Put in the runtime's environment as RECOVERYKIT_FAILPOINTS ('' disarms all).")
    clock_offset_s: float = Field(description="Seconds the runtime must add to its wall clock (long downtime).")
    host_id: str = Field(description="The host identity the runtime must record and compare for ownership.")
    probe_tools: list[ProbeTool] | None = Field(
        None, description="Since 1.1, optional: the probe tools as they are now, replacing those of `init` (a "
        "changed `version` is a resource change during downtime); absent or null: unchanged.")
    automatic_recovery: bool | None = Field(
        None, description="Since 1.2, optional, sent only to adapters declaring `automatic_recovery_setting`: the "
        "operator's explicit automatic-recovery setting from this start on. False disables it: work interrupted "
        "before this start is not continued until the user resumes it (or ends it); true enables it again. Absent "
        "or null: unchanged.")


class StartOk(Reply):
    type: Literal["start_ok"] = "start_ok"


class Stop(Request):
    type: Literal["stop"] = "stop"
    graceful: Literal[True] = Field(description="Always true: stop admission, save, exit. Never a user Pause.")


class StopOk(Reply):
    type: Literal["stop_ok"] = "stop_ok"


class Restart(Request):
    type: Literal["restart"] = "restart"
    kind: RestartKind = Field(description="One of the kinds declared in `init_ok.restart_kinds`.")
    failpoints: str | None = Field(
        description="New RECOVERYKIT_FAILPOINTS for the restarted processes; null keeps them.")
    clock_offset_s: float | None = Field(description="New clock offset; null keeps the current one.")
    host_id: str | None = Field(description="New host identity; null keeps the current one.")


class RestartOk(Reply):
    type: Literal["restart_ok"] = "restart_ok"


class Processes(Request):
    type: Literal["processes"] = "processes"


class ProcessesOk(Reply):
    type: Literal["processes_ok"] = "processes_ok"
    processes: list[ProcessInfo] = Field(description="Every live runtime process (not the adapter itself).")


class Quiesce(Request):
    type: Literal["quiesce"] = "quiesce"
    timeout_s: float = Field(gt=0, description="Answer within this many seconds, quiescent or not.")


class QuiesceOk(Reply):
    type: Literal["quiesce_ok"] = "quiesce_ok"
    quiescent: bool = Field(description="True when no work item is running or runnable.")
    pending: list[Pending] = Field(description="Work items still running or runnable (empty when quiescent).")


class Observe(Request):
    type: Literal["observe"] = "observe"


class ObserveOk(Reply):
    type: Literal["observe_ok"] = "observe_ok"
    snapshot: Snapshot = Field(description="One consistent read of the durable state (see Observe snapshot).")


class Shutdown(Request):
    type: Literal["shutdown"] = "shutdown"


class ShutdownOk(Reply):
    type: Literal["shutdown_ok"] = "shutdown_ok"


@dataclass(frozen=True, slots=True)
class RPC:
    name: str
    doc: str
    request: type[Request]
    reply: type[Reply]
    profile: Profile | None = None  # None: every adapter must answer it (perhaps with not_supported)
    slow: bool = False  # may start or stop processes: the client allows its slow timeout
    since: str = "1.0"


RPCS: tuple[RPC, ...] = (
    RPC("init", "The handshake. The first message; answered once. The runtime is not started yet.", Init, InitOk),
    RPC("submit", "Submit user input to a session. The reply IS the acknowledgement: send it only after the input "
        "is durably saved; never acknowledge unsaved input. `work_id` is the work item that will answer it (a new "
        "chat request, or the session's running one when the input is queued or steered into it). Submitting the "
        "same `client_msg_id` again returns the same `input_id` and adds nothing.", Submit, SubmitOk,
        Profile.CHAT_CORE),
    RPC("goal_create", "Create and activate a Goal.", GoalCreate, GoalCreateOk, Profile.GOALS),
    RPC("goal_update", "Revise a Goal's objective; invalidates old acceptance and continuation reservations.",
        GoalUpdate, GoalUpdateOk, Profile.GOALS),
    RPC("pause", "User Pause: persist desired_state paused.", Pause, PauseOk, Profile.CHAT_CORE),
    RPC("resume", "User Resume: persist desired_state run.", Resume, ResumeOk, Profile.CHAT_CORE),
    RPC("end", "User End: persist desired_state cancelled.", End, EndOk, Profile.CHAT_CORE),
    RPC("stop_all", "'Quit and stop all tasks': persist a stop intent for every running work item.",
        StopAll, StopAllOk, Profile.CHAT_CORE),
    RPC("approve", "Approve a pending approval (consumed once).", Approve, ApproveOk, Profile.APPROVALS),
    RPC("deny", "Deny a pending approval.", Deny, DenyOk, Profile.APPROVALS),
    RPC("notify", "An external operation's notification (completion, failure or timeout) reaching the runtime, as "
        "a webhook or a message would. Answer once it is durably saved, also while the runtime is down (the "
        "adapter saves it for the next start: a result arriving during a restart is saved, then admitted). It "
        "admits the waiting work's continuation at most once per consumption key, only while the user's intent "
        "is run and the versions match; a duplicate, or one for another version, admits nothing.",
        Notify, NotifyOk, Profile.WAITS, since="1.3"),
    RPC("job_start", "Start a background Job for a caller: durably save the Job, its authorized subtasks, its "
        "concurrency quota and the caller's provenance, then answer. Its subtasks run as child work items "
        "(`parent_id` the Job), at most `concurrency` at once; each child's result is delivered to the Job once; "
        "the Job then asks the model once with them and finishes.", JobStart, JobStartOk, Profile.JOBS,
        since="1.3"),
    RPC("budget_set", "Set or change a hard budget.", BudgetSet, BudgetSetOk, Profile.GOALS),
    RPC("retry", "A deliberate Retry (Paperclip): idempotent per key, bound to the observed run. For a task "
        "(since 1.3) `work_id` is its `task_id`; a key already used in the company, whatever its receipt's status, "
        "answers with that receipt's run and `created` false; an `observed_run_id` that is not the task's current "
        "run is `precondition_failed`.", Retry, RetryOk, Profile.PAPERCLIP_RETRY),
    RPC("task_create", "Create a Paperclip task and its initial run (seed 001).", TaskCreate, TaskCreateOk,
        Profile.PAPERCLIP_RETRY, since="1.3"),
    RPC("task_message", "Save a user message on a Paperclip task: the first run that starts execution after it "
        "sends it to the provider, once (seed 001: a saved message is consumed once, when execution starts; a "
        "rejected, unadmitted Retry releases it for another deliberate Retry).", TaskMessage, TaskMessageOk,
        Profile.PAPERCLIP_RETRY, since="1.4"),
    RPC("task_fault", "Environment fault the kit injects (test instrumentation, like a failpoint): the task's next "
        "runs or workspace preparations fail with the given error code. A restart during bootstrap needs no "
        "request: the kit kills at `bootstrap.before_dispatch`.", TaskFault, TaskFaultOk, Profile.PAPERCLIP_RETRY,
        since="1.3"),
    RPC("pricing_set", "Change the runtime's pricing table; answer once the new prices are durable. Requests "
        "dispatched from then on are quoted at them; a receipt's quote, once stored, never changes. Sent only to "
        "adapters declaring `init_ok.pricing`.", PricingSet, PricingSetOk, Profile.CHAT_CORE, since="1.4"),
    RPC("reload", "Frontend reload: disconnect the client and reconnect; changes no intent.",
        Reload, ReloadOk, Profile.CHAT_CORE),
    RPC("plant_paused_record", "Sent only to adapters declaring `init_ok.legacy_paused_record`, and only while the "
        "runtime is down (after a kill, before `start`): write into the runtime's durable store a work item as an "
        "older version of the runtime would have left it: paused by the user or the runtime for `reason`, a reason "
        "this version does not know, with one accepted input. Test instrumentation, like a failpoint: the kit then "
        "starts the runtime, which must keep the record paused with an explanation and never guess it was running.",
        PlantPausedRecord, PlantPausedRecordOk, Profile.CHAT_CORE, since="1.2"),
    RPC("start", "Start the runtime's processes with this environment. Answer once it admits requests.",
        Start, StartOk, slow=True),
    RPC("stop", "Graceful shutdown: stop admission, save accepted controls and checkpoints, exit. "
        "Answer once every runtime process has exited.", Stop, StopOk, slow=True),
    RPC("restart", "Perform a restart of the named kind (one the adapter declared) and answer once the runtime "
        "admits requests again. Kills the kit does itself (psutil) never come through here.",
        Restart, RestartOk, slow=True),
    RPC("processes", "List the live runtime processes so the kit can kill them (by pid and create_time).",
        Processes, ProcessesOk),
    RPC("quiesce", "Wait, at most timeout_s, until no work is running or runnable; say what is still pending.",
        Quiesce, QuiesceOk, slow=True),
    RPC("observe", "Return one consistent snapshot of the durable state (see Observe snapshot).", Observe, ObserveOk),
    RPC("shutdown", "End the session: the adapter stops any runtime processes it started, replies, then exits 0.",
        Shutdown, ShutdownOk, slow=True),
)

RPCS_BY_NAME: dict[str, RPC] = {r.name: r for r in RPCS}
REQUEST_TYPES: dict[str, type[Request]] = {r.name: r.request for r in RPCS}
REPLY_TYPES: dict[str, type[Reply]] = {f"{r.name}_ok": r.reply for r in RPCS}
