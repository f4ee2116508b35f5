"""The model's whole state: every durable record plus the runtime's liveness and the clock.

``ModelState`` is frozen; its mappings are never mutated after construction (transitions build
new ones). Fields that only the kit's environment can know (a process really alive, how often a
tool really ran, what the provider really billed) are kept apart as ground truth so invariants can
compare a runtime's records against them.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field
from recoverykit.model.errors import UnknownWorkItem
from recoverykit.model.records import (
    Approval,
    DurableWait,
    Goal,
    Lease,
    Record,
    RetryGeneration,
    RetryReceipt,
    RunIntent,
    ToolCall,
    Turn,
    UsageReceipt,
)


class RuntimePhase(StrEnum):
    UP = "up"
    DOWN = "down"
    RECOVERING = "recovering"  # started, recovery not yet finished (a crash here is "during recovery")


class ModelState(Record):
    clock_ms: int = Field(default=0, ge=0)
    host: str = "host-a"
    runtime: RuntimePhase = RuntimePhase.UP
    pid: int = 100  # the current worker's pid; a restart gets a new one
    work: dict[str, RunIntent] = {}
    goals: dict[str, Goal] = {}
    leases: dict[str, Lease] = {}
    turns: dict[str, Turn] = {}
    tool_calls: dict[str, ToolCall] = {}
    approvals: dict[str, Approval] = {}
    receipts: dict[str, UsageReceipt] = {}
    waits: dict[str, DurableWait] = {}
    retry_receipts: dict[str, RetryReceipt] = {}  # key: "company/idempotency_key"
    retry_generations: dict[str, RetryGeneration] = {}
    admitted_keys: frozenset[str] = frozenset()  # continuation keys that already admitted a turn
    provider_billed: dict[str, int] = {}  # ground truth: tokens the provider really charged per request

    # --- lookups that raise the model's typed error --------------------------------------------------

    def intent(self, work_id: str) -> RunIntent:
        try:
            return self.work[work_id]
        except KeyError:
            raise UnknownWorkItem(
                f"work_id {work_id!r} is not a work item of this state (known: {sorted(self.work)}); "
                "submit it first or check the id"
            ) from None

    def goal(self, goal_id: str) -> Goal:
        try:
            return self.goals[goal_id]
        except KeyError:
            raise UnknownWorkItem(
                f"goal_id {goal_id!r} is unknown (known: {sorted(self.goals)}); create it first") from None

    def tool_call(self, call_id: str) -> ToolCall:
        try:
            return self.tool_calls[call_id]
        except KeyError:
            raise UnknownWorkItem(f"tool call {call_id!r} is unknown (known: {sorted(self.tool_calls)})") from None

    def approval(self, approval_id: str) -> Approval:
        try:
            return self.approvals[approval_id]
        except KeyError:
            raise UnknownWorkItem(f"approval {approval_id!r} is unknown (known: {sorted(self.approvals)})") from None

    def receipt(self, request_id: str) -> UsageReceipt:
        try:
            return self.receipts[request_id]
        except KeyError:
            raise UnknownWorkItem(
                f"provider request {request_id!r} is unknown (known: {sorted(self.receipts)})") from None

    def wait(self, handle: str) -> DurableWait:
        try:
            return self.waits[handle]
        except KeyError:
            raise UnknownWorkItem(f"wait handle {handle!r} is unknown (known: {sorted(self.waits)})") from None

    def open_turn(self, work_id: str) -> Turn | None:
        for turn in self.turns.values():
            if turn.work_id == work_id and turn.status == "active":
                return turn
        return None

    def with_(self, **changes: object) -> ModelState:
        """A copy with ``changes``; mappings passed here must be new objects, never mutated ones."""
        return self.model_copy(update=changes)


def put(mapping: dict, key: str, value: object) -> dict:
    """A new mapping with ``key`` set: states share no mutable structure with their successors."""
    new = dict(mapping)
    new[key] = value
    return new
