"""The shared vocabulary: interruption points, restart kinds, profiles, effect classes, reason codes.

Everything that names a moment or a state across layers comes from here: the failpoint names a
runtime arms, the restart kinds the chaos runner performs, the profiles an adapter declares, the
reason codes an observation carries. A runtime in another language copies these strings; the
generated docs (docs/contract.md, docs/failpoints.md) list them.

Sources: seed 000 "Restart failure acceptance" (interruption points, restart kinds), "Automatic
recovery contract" (recovery phases), "Safety boundary" (effect classes); seed 001 "Retry policy".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Profile(StrEnum):
    """Parts of the contract an adapter may declare it implements."""

    CHAT_CORE = "chat_core"
    GOALS = "goals"
    JOBS = "jobs"
    APPROVALS = "approvals"
    PAPERCLIP_RETRY = "paperclip_retry"
    WAITS = "waits"  # durable waits and their notifications (seed 000, Todo and acceptance); see D18


class Reach(StrEnum):
    """Who can stop a run at a point."""

    ENVIRONMENT = "environment"  # the kit's provider or probe tools hold it; no runtime cooperation
    RUNTIME = "runtime"  # the runtime must call the failpoint protocol


@dataclass(frozen=True, slots=True)
class InterruptionPoint:
    name: str
    reach: Reach
    profile: Profile
    description: str
    seed_section: str = "000 / Restart failure acceptance"
    # an opt-in point: chaos arms it only when asked (``recoverykit chaos --durable-writes``), so an adapter that
    # does not declare it is not "not implemented" there, and one that declares it costs nothing without the flag
    opt_in: bool = False


_P = InterruptionPoint
_E, _R = Reach.ENVIRONMENT, Reach.RUNTIME
_CHAT = Profile.CHAT_CORE

INTERRUPTION_POINTS: tuple[InterruptionPoint, ...] = (
    _P("input.accept.before", _R, _CHAT, "user input received, not yet durably saved (must not be acknowledged)"),
    _P("input.accept.after", _R, _CHAT, "user input durably saved, acknowledgement not yet sent"),
    _P("provider.request.before", _R, _CHAT, "request id and attribution fixed, request not yet sent"),
    _P("provider.request.after", _R, _CHAT, "request sent to the provider, response not yet consumed"),
    _P("provider.request.inflight", _E, _CHAT, "the scripted provider holds the request open"),
    _P("provider.response.midstream", _E, _CHAT, "the provider stopped mid-stream after some usage chunks"),
    _P("usage.persist.before", _R, _CHAT, "usage known to the runtime, receipt not yet durable"),
    _P("usage.persist.after", _R, _CHAT, "usage receipt durable, projections not yet updated"),
    _P("tool.dispatch.before", _R, _CHAT, "tool call decided and recorded, child not yet started"),
    _P("tool.dispatch.after", _R, _CHAT, "tool child started and its pid recorded"),
    _P("tool.running", _E, _CHAT, "a probe tool is running (long-running child)"),
    _P("tool.finished.uncommitted", _E, _CHAT, "the probe finished its effect and holds before exiting"),
    _P("tool.result.commit.before", _R, _CHAT, "tool result received, not yet committed"),
    _P("tool.result.commit.after", _R, _CHAT, "tool result committed, turn not yet continued"),
    _P("completion.commit.before_projection", _R, _CHAT,
       "completion committed, projection/event delivery not yet done"),
    _P("child.delivery.before", _R, Profile.JOBS, "a child's result is ready, not yet delivered to the parent"),
    _P("child.delivery.after", _R, Profile.JOBS, "a child's result is delivered, parent not yet admitted"),
    _P("approval.consume.before", _R, Profile.APPROVALS,
       "a granted approval is about to be consumed by its tool call, not yet marked consumed"),
    _P("approval.consume.after", _R, Profile.APPROVALS,
       "the approval is durably consumed by its tool call, the call not yet dispatched"),
    _P("wait.notify.before_admit", _R, Profile.WAITS,
       "a wait's notification (completion, failure or timeout) is known, its continuation not yet admitted"),
    _P("wait.notify.after", _R, Profile.WAITS,
       "the notification is durably consumed under its key, the continuation not yet run"),
    _P("todo.complete.before_acceptance", _R, Profile.GOALS,
       "all required Todo items complete, acceptance not yet run"),
    _P("acceptance.verifier.before", _R, Profile.GOALS,
       "acceptance prechecks passed, the independent verifier request not yet sent", "000 / Todo and acceptance"),
    _P("acceptance.verifier.after", _R, Profile.GOALS,
       "the verifier's answer received and its usage settled, the acceptance not yet recorded",
       "000 / Todo and acceptance"),
    _P("acceptance.achieve.before", _R, Profile.GOALS,
       "every requirement met with evidence and recorded, achieved not yet committed", "000 / Todo and acceptance"),
    _P("recovery.claim.after", _R, _CHAT, "recovery claimed ownership, context not yet repaired",
       "000 / Automatic recovery contract, step 2"),
    _P("recovery.repair.after", _R, _CHAT, "context repaired, decision not yet persisted",
       "000 / Automatic recovery contract, step 3"),
    _P("recovery.decide.after", _R, _CHAT, "recovery decision persisted, work not yet admitted",
       "000 / Automatic recovery contract, step 4-5"),
    # Paperclip task retry (seed 001, Admission and execution; #19759 What Changed)
    _P("retry.receipt.before", _R, Profile.PAPERCLIP_RETRY, "a Retry click received, its wakeup receipt not yet "
       "durable (must not be acknowledged)", "001 / Admission and execution"),
    _P("retry.receipt.after", _R, Profile.PAPERCLIP_RETRY, "the wakeup receipt durable, the click not yet answered",
       "001 / Admission and execution"),
    _P("workspace.prepare.before", _R, Profile.PAPERCLIP_RETRY, "a run's workspace chosen, not yet prepared or "
       "bound", "001 / Admission and execution"),
    _P("workspace.prepare.after", _R, Profile.PAPERCLIP_RETRY, "the workspace prepared and durably bound to the run, "
       "bootstrap not yet begun", "001 / Admission and execution"),
    _P("bootstrap.before_dispatch", _R, Profile.PAPERCLIP_RETRY, "the run bootstraps: workspace bound, provider "
       "dispatch not yet started (#19759's restart window)", "001 / #19759 Steps to reproduce"),
    _P("coordinator.settle.before", _R, Profile.PAPERCLIP_RETRY, "a failed re-preparation decided, its coordinator "
       "not yet settled", "001 / #19759 What Changed"),
    _P("coordinator.settle.after", _R, Profile.PAPERCLIP_RETRY, "the coordinator settled as terminal_failure, "
       "deferred work not yet woken", "001 / #19759 What Changed"),
    _P("run.finalize.before", _R, Profile.PAPERCLIP_RETRY, "a run's provider result accepted (durable), its "
       "finalization not yet done", "001 / Admission and execution (an accepted native result)"),
    # Every durable write of a Python runtime, with no code of its own: the kit's startup hook
    # (recoverykit.adapter.durable_writes, docs/failpoints.md section 7) reports each SQLite commit and each
    # os.fsync / os.replace. Opt-in (chaos --durable-writes); judged by every safety clause (FA-01).
    _P("durable.write.before", _R, _CHAT, "a durable write (an SQLite commit, an fsync, an atomic rename) is about "
       "to happen, not yet made", opt_in=True),
    _P("durable.write.after", _R, _CHAT, "the durable write is made, the runtime not yet gone on",
       opt_in=True),
)

POINTS_BY_NAME: dict[str, InterruptionPoint] = {p.name: p for p in INTERRUPTION_POINTS}
RECOVERY_POINTS: tuple[str, ...] = tuple(p.name for p in INTERRUPTION_POINTS if p.name.startswith("recovery."))
OPT_IN_POINTS: tuple[str, ...] = tuple(p.name for p in INTERRUPTION_POINTS if p.opt_in)
DURABLE_WRITE_POINTS: tuple[str, ...] = ("durable.write.before", "durable.write.after")


class RestartKind(StrEnum):
    """How a run is interrupted and brought back (seed 000, Restart failure acceptance)."""

    FRONTEND_RELOAD = "frontend_reload"  # client only: disconnects, changes no intent
    NORMAL_EXIT = "normal_exit"  # ordinary App exit, then start
    GRACEFUL_WORKER_RESTART = "graceful_worker_restart"
    WORKER_KILL = "worker_kill"  # SIGKILL of the worker alone; tool children live on
    TREE_KILL = "tree_kill"  # SIGKILL of the whole process tree
    LONG_DOWNTIME = "long_downtime"  # tree kill, then the clock jumps past two hours
    CRASH_DURING_RECOVERY = "crash_during_recovery"  # a second kill at a recovery-phase point
    HOST_IDENTITY_CHANGE = "host_identity_change"  # process identity changes; no silent takeover
    STOP_ALL_EXIT = "stop_all_exit"  # "quit and stop all tasks", then start


# Restart kinds after which nothing the user asked for may be taken as a Pause.
NOT_A_PAUSE: frozenset[RestartKind] = frozenset(RestartKind) - {RestartKind.STOP_ALL_EXIT}


class EffectClass(StrEnum):
    """From the trusted tool registry only; never from a tool's name or a model's claim."""

    READ_ONLY = "read_only"
    IDEMPOTENT = "idempotent"
    STATE_PROBE = "state_probe"
    UNKNOWN = "unknown"


SAFE_FOR_RECOVERY: frozenset[EffectClass] = frozenset({EffectClass.READ_ONLY, EffectClass.STATE_PROBE})


class ToolStatus(StrEnum):
    NEVER_STARTED = "never_started"
    DISPATCHED = "dispatched"
    RESULT_COMMITTED = "result_committed"
    OUTCOME_UNKNOWN = "outcome_unknown"


class DesiredState(StrEnum):
    RUN = "run"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    DONE = "done"


class WorkKind(StrEnum):
    CHAT_REQUEST = "chat_request"
    GOAL = "goal"
    JOB = "job"


class GoalState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    BLOCKED = "blocked"
    ACHIEVED = "achieved"
    CANCELLED = "cancelled"
    BUDGET_EXHAUSTED = "budget_exhausted"


class GoalPhase(StrEnum):
    WORKING = "working"
    WAITING = "waiting"
    VERIFYING = "verifying"


class Acceptance(StrEnum):
    MET = "met"
    UNMET = "unmet"
    UNKNOWN = "unknown"


class ReasonCode(StrEnum):
    """Why a work item is where it is. Every non-running, non-finished state carries one."""

    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    USER_PAUSED = "user_paused"
    USER_CANCELLED = "user_cancelled"
    USER_STOPPED_ALL = "user_stopped_all"
    AWAITING_APPROVAL = "awaiting_approval"
    PERMISSION_REVOKED = "permission_revoked"
    BUDGET_EXHAUSTED = "budget_exhausted"
    BUDGET_UNKNOWN_COST = "budget_unknown_cost"
    RESOURCE_MISSING_DIRECTORY = "resource_missing_directory"
    RESOURCE_MISSING_CREDENTIALS = "resource_missing_credentials"
    RESOURCE_TOOL_VERSION_CHANGED = "resource_tool_version_changed"
    RESOURCE_MODEL_UNAVAILABLE = "resource_model_unavailable"
    UNKNOWN_EFFECT_RECONCILE = "unknown_effect_reconcile"
    WAITING_DEPENDENCY = "waiting_dependency"
    WAITING_CHILD = "waiting_child"
    RETRY_SCHEDULED = "retry_scheduled"
    RETRY_EXHAUSTED = "retry_exhausted"
    OWNER_ON_OTHER_HOST = "owner_on_other_host"
    OWNER_ALIVE = "owner_alive"
    RECOVERY_FAILED_STORAGE_UNAVAILABLE = "recovery_failed_storage_unavailable"
    RECOVERY_FAILED_MIGRATION = "recovery_failed_migration"
    PROJECTION_EVENTS_LOST = "projection_events_lost"
    AUTOMATIC_RECOVERY_DISABLED = "automatic_recovery_disabled"
    PAUSED_UNKNOWN_REASON = "paused_unknown_reason"
    SHUTTING_DOWN = "shutting_down"


# Reason codes that mean "a person must act"; everything else the runtime resolves by itself.
NEEDS_PERSON: frozenset[ReasonCode] = frozenset({
    ReasonCode.USER_PAUSED, ReasonCode.AWAITING_APPROVAL, ReasonCode.PERMISSION_REVOKED,
    ReasonCode.BUDGET_EXHAUSTED, ReasonCode.BUDGET_UNKNOWN_COST,
    ReasonCode.RESOURCE_MISSING_DIRECTORY, ReasonCode.RESOURCE_MISSING_CREDENTIALS,
    ReasonCode.RESOURCE_TOOL_VERSION_CHANGED, ReasonCode.UNKNOWN_EFFECT_RECONCILE,
    ReasonCode.OWNER_ON_OTHER_HOST, ReasonCode.RETRY_EXHAUSTED,
    ReasonCode.RECOVERY_FAILED_STORAGE_UNAVAILABLE, ReasonCode.RECOVERY_FAILED_MIGRATION,
    ReasonCode.AUTOMATIC_RECOVERY_DISABLED, ReasonCode.PAUSED_UNKNOWN_REASON,
})

# Paperclip maintenance retry policy (seed 001, "Retry policy and historical adoption").
RETRY_DELAYS_S: tuple[int, ...] = (30, 60, 120, 240, 480)
RETRY_JITTER: float = 0.20
RETRY_WINDOW_S: int = 30 * 60
OLD_HIDDEN_EXPIRY_S: int = 2 * 60 * 60  # the removed two-hour window; downtime past it must not matter


class Verdict(StrEnum):
    """Every check ends in one of these; missing evidence is UNKNOWN, never VALID."""

    VALID = "valid"
    INVALID = "invalid"
    UNKNOWN = "unknown"
    NOT_APPLICABLE = "not_applicable"  # the adapter did not declare the profile; never counted as a pass

    @property
    def exit_code(self) -> int:
        return {"valid": 0, "invalid": 1, "unknown": 2, "not_applicable": 0}[self.value]


def combine(verdicts: list[Verdict] | tuple[Verdict, ...]) -> Verdict:
    """The verdict of a whole run: any invalid wins, then any unknown; nothing applicable is unknown."""
    applicable = [v for v in verdicts if v is not Verdict.NOT_APPLICABLE]
    if Verdict.INVALID in applicable:
        return Verdict.INVALID
    if not applicable or Verdict.UNKNOWN in applicable:
        return Verdict.UNKNOWN
    return Verdict.VALID


# --- Observation vocabulary (added for the adapter protocol's observe snapshot) ---------------------


class WorkStatus(StrEnum):
    """What a work item is doing now; the why is its reason_code, the user's wish its desired_state."""

    QUEUED = "queued"  # runnable, waiting for admission
    RUNNING = "running"
    WAITING = "waiting"  # a durable wait, an approval, a child, a resource, a scheduled retry
    PAUSED = "paused"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    FAILED = "failed"  # a terminal fault the user can Retry


class TurnStatus(StrEnum):
    ACTIVE = "active"
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    CONSUMED = "consumed"  # approved and used by exactly one execution
    INVALIDATED = "invalidated"  # superseded (revision, permission or unknown-effect set changed)


class UsageStatus(StrEnum):
    """Whether a receipt's token counts are known (seed 000, Cost)."""

    KNOWN = "known"
    PARTIAL = "partial"  # a lower bound only (e.g. cumulative stream chunks before the loss)
    UNKNOWN = "unknown"  # the request was sent; what it consumed is not known


class RunStatus(StrEnum):
    """A Paperclip-style run of a task (seed 001): one attempt that a Retry may follow."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ProcessRole(StrEnum):
    """What a runtime process is, so the killer can pick the worker, the tree, or spare tool children."""

    CONTROL = "control"
    WORKER = "worker"
    TOOL = "tool"
    OTHER = "other"


# --- Added by the model (issue 2): names the executable model and the lockstep suite share. ---


class RecoveryPolicy(StrEnum):
    """A run intent's recovery policy (seed 000: explicit disabling remains effective)."""

    AUTOMATIC = "automatic"
    DISABLED = "disabled"


class StorageState(StrEnum):
    """What the runtime can do with its durable store (seed 000, Interruption recovery step 1, and Restart
    failure acceptance: "unavailable databases, broken migrations ... need explicit states")."""

    OK = "ok"
    UNREADABLE = "unreadable"  # the store cannot be opened or read
    MIGRATION_FAILED = "migration_failed"  # a migration failed, or the store is at a schema newer than the runtime


class StorageAction(StrEnum):
    """The recoverable actions a storage failure offers (seed 000: "explicit states and recoverable actions")."""

    RETRY = "retry"  # read the store again; the kit takes it by sending ``start`` once the store is back
    RESTORE_BACKUP = "restore_backup"  # a person puts a good copy of the store back
    UPGRADE_RUNTIME = "upgrade_runtime"  # run the runtime version that wrote the newer schema


class StorageFault(StrEnum):
    """Storage faults the kit applies itself, during downtime, to a store the adapter declared."""

    UNREADABLE = "unreadable"  # the first bytes of every declared file inverted (kept, restored exactly)
    NEWER_SCHEMA = "newer_schema"  # PRAGMA user_version of the first declared file raised by one


class RecoveryMode(StrEnum):
    """Exactly one per recovery decision (seed 000, Interruption recovery step 3)."""

    NONE = "none"  # nothing to recover: idle, finished or held by a gate
    REATTACH = "reattach"  # the owner is alive: reconnect, never re-run
    NEW_ATTEMPT = "new_attempt"  # owner dead, verified safe checkpoint: new attempt, same execution
    REPAIR = "repair"  # owner dead, no safe checkpoint: stable repair key, old turn interrupted, new turn
    HOLD = "hold"  # ownership uncertain (other host, unreadable lease): no repair writes


class RetryReceiptStatus(StrEnum):
    """Paperclip agent_wakeup_requests receipt (seed 001, Admission and execution)."""

    PENDING = "pending"
    ACCEPTED = "accepted"
    COMPLETED = "completed"
    FAILED = "failed"


class RetryAdmission(StrEnum):
    """What a Retry request with an idempotency key does (seed 001)."""

    RETURN_EXISTING = "return_existing"  # same (company, key): the earlier receipt, whatever its status
    ATTACH_ACTIVE = "attach_active"  # a new key while accepted work runs: attach to it
    SAME_GENERATION = "same_generation"  # a new key, the generation still has attempts: continue in it
    NEW_GENERATION = "new_generation"  # a deliberate click after exhaustion
