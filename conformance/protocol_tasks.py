"""The Paperclip task-retry part of the adapter protocol (profile ``paperclip_retry``, since 1.3).

Seed 001 (Paperclip's task recovery, with pull request #19759) speaks of tasks, their runs and run
generations, the durable wakeup receipt a Retry click records, the workspace a run binds, the native
recovery coordinator a restart claims, and the maintenance retry schedule. This module declares them once:
the snapshot records (sections ``tasks``, ``wakeup_receipts``, ``workspaces``, ``recovery_coordinators``,
``retry_schedule``; ``runs`` existed since 1.0 and gains optional fields) and the requests ``task_create``,
``task_fault`` and (since 1.4) ``task_message``. Kept apart from ``protocol_snapshot`` and ``protocol_rpcs`` so
the chat core's declarations stay readable; both import from here, never the other way round.

Everything here is additive: an adapter of 1.0 to 1.2 never receives these requests (they belong to a
profile it does not declare) and sends these sections as null.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from recoverykit.conformance.protocol_envelope import Reply, Request, finish_schema

Id = str

TaskStatus = Literal["working", "retry_scheduled", "retry_offered", "held", "succeeded", "cancelled"]
ReceiptStatus = Literal["pending", "completed", "failed", "deferred"]
WorkspaceStrategy = Literal["task_directory", "git_worktree", "project_checkout", "shared"]
CoordinatorState = Literal["observed", "running", "terminal_failure", "completed"]
ClaimKind = Literal["bootstrap_incomplete", "resume_dead_runner", "reattach"]
ScheduleState = Literal["scheduled", "fired", "cancelled"]
FaultKind = Literal["run_fails", "prepare_fails"]

ISOLATED_ATTEMPTS = "isolated-workspace-attempts"  # seed 001: the fresh-attempt namespace inside data_dir


class TaskRecord(BaseModel):
    """Same configuration as ``protocol_snapshot.Record`` (which imports this module, so it cannot be reused)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, json_schema_extra=finish_schema)


class Task(TaskRecord):
    task_id: Id
    company: str = Field(description="The company the task belongs to (Retry keys are unique per company).")
    project: str | None = Field(description="The project; null for a task with no project.")
    status: TaskStatus = Field(
        description="Exactly one of: `working` (a run is queued or running), `retry_scheduled` (one automatic "
        "retry is scheduled), `retry_offered` (the ordinary Retry action), `held` (a Retry is deferred or lineage "
        "is held), `succeeded`, `cancelled`.")
    current_run: Id | None = Field(description="The task's latest run; null before its first.")
    action: Literal["retry"] | None = Field(description="`retry` while the ordinary Retry action is offered.")
    reason: str | None = Field(description="Why the task is where it is: the failed run's error code, "
                               "`controller_settling` for a deferred Retry, ...; null while working or done.")


class WakeupReceipt(TaskRecord):
    company: str
    idempotency_key: str = Field(description="The Retry key; unique per company over every receipt status.")
    task_id: Id
    status: ReceiptStatus = Field(description="`pending` until its run ends (`completed` / `failed`); "
                                  "`deferred` while admission waits (see `defer_reason`).")
    run_id: Id | None = Field(description="The run the click created or attached to; null while deferred.")
    observed_run_id: Id = Field(description="The run the user saw fail when clicking.")
    defer_reason: str | None = Field(description="Why admission waits (e.g. `controller_settling`); null if not.")


class Workspace(TaskRecord):
    path: str = Field(description="The directory, relative to `data_dir`.")
    strategy: WorkspaceStrategy = Field(
        description="`task_directory` (a task-owned isolated directory), `git_worktree` (a new worktree of "
        "`base`), `project_checkout` (the project's shared checkout), `shared` (another shared directory).")
    task_id: Id | None = Field(description="The task that owns it; null for a shared workspace.")
    run_id: Id | None = Field(description="The run that created and bound it; null for a shared workspace.")
    base: str | None = Field(description="For `git_worktree`: the checkout it is a worktree of, relative to "
                             "`data_dir`; null otherwise.")
    isolated: bool = Field(description="True when the directory is under `isolated-workspace-attempts`.")


class RecoveryCoordinator(TaskRecord):
    run_id: Id = Field(description="The run whose native recovery this coordinator tracks.")
    state: CoordinatorState = Field(description="`observed` while a restart claim holds it open; "
                                    "`terminal_failure` / `completed` once settled.")
    claim_kind: ClaimKind | None = Field(
        description="The restart claim: `bootstrap_incomplete`, `resume_dead_runner` (the runner is verified "
        "gone) or `reattach` (a live runner); null when no restart claimed it.")
    lease_owner: str | None = Field(description="The owner of the claim (opaque); null when released.")
    error_code: str | None = Field(description="The failed run's error code once settled as a failure.")
    result: Literal["accepted", "succeeded", "failed"] | None = Field(
        None, description="The run's result as the coordinator holds it: `accepted` once a provider result is "
        "durably accepted and waiting for its finalizer (seed 001: an accepted native result goes back to its "
        "existing finalizer), `succeeded` / `failed` once finalized; null while there is none. Since 1.4, "
        "optional.")


class RetryScheduleEntry(TaskRecord):
    task_id: Id
    generation: int = Field(ge=1, description="The recovery generation the retry belongs to.")
    attempt: int = Field(ge=1, description="Which retry of the generation (1 to 5).")
    due_at: float = Field(description="When it runs, Unix time on the runtime's clock (the kit's offset applied).")
    jitter: float = Field(description="The jitter drawn when it was scheduled, a fraction (-0.2 to 0.2).")
    first_failure_at: float = Field(description="The generation's first failure, runtime clock.")
    window_end: float = Field(description="When scheduling stops (first failure + 30 minutes), runtime clock.")
    cooldown_until: float | None = Field(description="A provider cooldown the due time honours; null if none.")
    cooldown_source: str | None = Field(description="Who asked for the cooldown (e.g. the error code); null.")
    state: ScheduleState


class TaskCreate(Request):
    type: Literal["task_create"] = "task_create"
    project: str | None = Field(None, description="The project (its checkout becomes the git worktree base); "
                                "null or absent: a task with no project.")
    text: str = Field(description="The task's instruction; every run of the task sends it to the provider "
                      "(the kit tags it with a provider script).")
    retry_limit: int | None = Field(
        None, ge=0, le=5, description="A stricter execution retry limit of this task: the maintenance policy "
        "schedules no more retries per generation than this (seed 001: stricter limits remain separate); null or "
        "absent: only the policy's five.")


class TaskCreateOk(Reply):
    type: Literal["task_create_ok"] = "task_create_ok"
    task_id: Id
    run_id: Id = Field(description="The task's initial run.")


class TaskFault(Request):
    type: Literal["task_fault"] = "task_fault"
    task_id: Id
    fault: FaultKind = Field(
        description="`run_fails`: the task's next `count` runs fail at dispatch, before any provider request, "
        "with `error_code` (with `cooldown_s`: the provider asked for that cooldown). `prepare_fails`: the task's "
        "next `count` workspace preparations fail validation with `error_code`.")
    error_code: str = Field(min_length=1, description="E.g. `provider_unavailable`, `workspace_validation_failed`.")
    cooldown_s: float | None = Field(None, ge=0, description="For `run_fails`: the provider's cooldown; null: none.")
    count: int = Field(1, ge=1, description="How many runs or preparations the fault hits.")


class TaskMessage(Request):
    type: Literal["task_message"] = "task_message"
    task_id: Id
    text: str = Field(min_length=1, max_length=160, description="A message the user saves on the task for its next "
                      "execution (seed 001: a saved message is consumed once, when execution starts): the first run "
                      "of the task that starts execution after it sends it to the provider with the task's "
                      "instruction; no later run sends it again. Saving it starts no run by itself.")


class TaskMessageOk(Reply):
    type: Literal["task_message_ok"] = "task_message_ok"
    task_id: Id


class TaskFaultOk(Reply):
    type: Literal["task_fault_ok"] = "task_fault_ok"
    task_id: Id


TASK_SECTION_DOCS: dict[str, str] = {
    "tasks": "Paperclip tasks: status (one working state, one scheduled retry, or the Retry action), current run.",
    "wakeup_receipts": "Retry clicks' durable wakeup receipts, unique per company and key, whatever their status.",
    "workspaces": "Directories runs bound: strategy, owner, git worktree base, isolated-workspace-attempts or not.",
    "recovery_coordinators": "Native recovery coordinators: the restart claim, its kind and owner, settlement.",
    "retry_schedule": "The maintenance retry schedule: attempts, due times, persisted jitter, window, cooldown.",
}
TASK_SECTION_MODELS: dict[str, type[TaskRecord]] = {
    "tasks": Task, "wakeup_receipts": WakeupReceipt, "workspaces": Workspace,
    "recovery_coordinators": RecoveryCoordinator, "retry_schedule": RetryScheduleEntry,
}
