"""The transition function: ``apply`` for definite events, ``successors`` for the set of allowed outcomes.

An event that cannot apply (unknown work item, stale revision or generation, not enabled in this
state) raises a typed ``ModelError`` and, since states are frozen, leaves the state unchanged. An
operation in flight at a crash (``InFlight``) has two allowed outcomes: it did not happen, or it
did; a lockstep checker must accept whichever the runtime shows.
"""

from __future__ import annotations

from collections.abc import Callable

from recoverykit.model import recovery as rec
from recoverykit.model.catalogue import (
    SAFE_FOR_RECOVERY,
    Acceptance,
    ApprovalStatus,
    DesiredState,
    GoalPhase,
    GoalState,
    ReasonCode,
    RetryAdmission,
    RetryReceiptStatus,
    ToolStatus,
    TurnStatus,
    WorkKind,
)
from recoverykit.model.decisions import (
    GATE_NONE,
    GATE_REASON,
    GATE_UNKNOWN_EFFECT,
    GoalEvent,
    achieved_allowed,
    budget_status,
    continuation_key,
    fencing_accepts,
    goal_transition,
    known_cost,
    next_generation,
    next_retry_at_ms,
    retry_admission,
    usage_watermark,
    wait_admits,
)
from recoverykit.model.errors import EventNotEnabled, MalformedRecord, ModelError, StaleVersion, UnknownWorkItem
from recoverykit.model.events import InFlight, parse_event
from recoverykit.model.records import (
    Approval,
    Budget,
    DurableWait,
    Goal,
    Lease,
    OwnerIdentity,
    Record,
    Requirement,
    RetryGeneration,
    RetryReceipt,
    RunIntent,
    TerminalSnapshot,
    ToolCall,
    Turn,
    UsageReceipt,
)
from recoverykit.model.state import ModelState, RuntimePhase, put

S = ModelState


def _up(state: S, what: str) -> None:
    if state.runtime is not RuntimePhase.UP:
        raise EventNotEnabled(f"{what} needs a running runtime; it is {state.runtime.value} (send start first)")


def _set_intent(state: S, intent: RunIntent) -> S:
    return state.with_(work=put(state.work, intent.work_id, intent))


# --- client operations -----------------------------------------------------------------------------


def _submit(state: S, ev) -> S:
    _up(state, "submit")
    old = state.work.get(ev.work_id)
    if old is not None:
        if old.desired_state in (DesiredState.CANCELLED, DesiredState.DONE):
            raise EventNotEnabled(
                f"work item {ev.work_id!r} is {old.desired_state.value}; a new request needs a new work_id")
        # New input is saved before the acknowledgement; it never resumes paused work by itself.
        return _set_intent(state, old.model_copy(update={"unconsumed_messages": (*old.unconsumed_messages, ev.text)}))
    if ev.parent_id is not None:
        state.intent(ev.parent_id)
    intent = RunIntent(work_id=ev.work_id, kind=ev.kind, original_input=ev.text, control_version=1,
                       permission_scope=ev.permission_scope, host_identity=state.host, parent_id=ev.parent_id,
                       recovery_policy=ev.recovery_policy, reason_code=ReasonCode.QUEUED)
    state = _set_intent(state, intent)
    if ev.parent_id is not None:
        parent = state.work[ev.parent_id]
        state = _set_intent(state, parent.model_copy(update={"children": (*parent.children, ev.work_id)}))
    return state


def _create_goal(state: S, ev) -> S:
    intent = state.intent(ev.work_id)
    if intent.kind is not WorkKind.GOAL:
        raise EventNotEnabled(f"work item {ev.work_id!r} is a {intent.kind.value}; submit it with kind='goal'")
    if ev.goal_id in state.goals or intent.goal_id is not None:
        raise EventNotEnabled(f"goal {ev.goal_id!r} or a Goal for {ev.work_id!r} already exists; use update_goal")
    goal = Goal(goal_id=ev.goal_id, work_id=ev.work_id, control_version=intent.control_version,
                requirements=tuple(Requirement(req_id=r) for r in ev.requirements),
                budget=None if ev.budget_limit is None else Budget(limit=ev.budget_limit))
    state = state.with_(goals=put(state.goals, goal.goal_id, goal))
    return _set_intent(state, intent.model_copy(update={"goal_id": goal.goal_id}))


def _update_goal(state: S, ev) -> S:
    goal = state.goal(ev.goal_id)
    if ev.revision != goal.revision + 1:
        raise StaleVersion(f"update_goal revision {ev.revision} for {ev.goal_id!r}: the current revision is "
                           f"{goal.revision}, so the next must be {goal.revision + 1}; re-read the Goal and retry")
    if goal.state in (GoalState.ACHIEVED, GoalState.CANCELLED):
        raise EventNotEnabled(f"goal {ev.goal_id!r} is {goal.state.value}; a terminal Goal is never reopened")
    names = ev.requirements if ev.requirements is not None else tuple(r.req_id for r in goal.requirements)
    # A revision invalidates old acceptance and continuation reservations (the control version moves).
    goal = goal.model_copy(update={
        "revision": ev.revision, "phase": GoalPhase.WORKING, "control_version": goal.control_version + 1,
        "state": goal_transition(goal.state, GoalEvent.REVISION, False),
        "requirements": tuple(Requirement(req_id=r, for_revision=ev.revision) for r in names)})
    intent = state.work[goal.work_id]
    intent = intent.model_copy(update={"control_version": intent.control_version + 1,
                                       "objective_revision": ev.revision})
    state = _set_intent(state.with_(goals=put(state.goals, goal.goal_id, goal)), intent)
    return _set_intent(state, intent.model_copy(update={"reason_code": _reason(state, intent)}))


def _apply_stop(state: S, work_id: str, desired: DesiredState, reason: ReasonCode) -> S:
    work, turns, goals = rec.stop_item(state, work_id, desired, reason)
    return state.with_(work=work, turns=turns, goals=goals)


def _pause(state: S, ev) -> S:
    intent = state.intent(ev.work_id)
    if intent.desired_state is DesiredState.PAUSED:
        return state  # pausing paused work is a no-op, not an error
    if intent.desired_state is not DesiredState.RUN:
        raise EventNotEnabled(f"cannot pause {ev.work_id!r}: it is {intent.desired_state.value}")
    return _apply_stop(state, ev.work_id, DesiredState.PAUSED, ReasonCode.USER_PAUSED)


def _resume(state: S, ev) -> S:
    intent = state.intent(ev.work_id)
    if intent.desired_state is not DesiredState.PAUSED:
        raise EventNotEnabled(f"cannot resume {ev.work_id!r}: it is {intent.desired_state.value}, not paused")
    intent = intent.model_copy(update={"desired_state": DesiredState.RUN,
                                       "control_version": intent.control_version + 1})
    state = _set_intent(state, intent)
    goal = state.goals.get(intent.goal_id) if intent.goal_id else None
    if goal is not None:
        # the old wakeup is void (the control version moved); its saved result feeds the next turn
        phase = GoalPhase.WORKING if goal.phase is GoalPhase.WAITING else goal.phase
        goal = goal.model_copy(update={"state": goal_transition(goal.state, GoalEvent.RESUME, False),
                                       "control_version": goal.control_version + 1, "phase": phase})
        state = state.with_(goals=put(state.goals, goal.goal_id, goal))
    return _set_intent(state, intent.model_copy(update={"reason_code": _reason(state, intent)}))


def _end(state: S, ev) -> S:
    intent = state.intent(ev.work_id)
    if intent.desired_state in (DesiredState.CANCELLED, DesiredState.DONE):
        return state
    return _apply_stop(state, ev.work_id, DesiredState.CANCELLED, ReasonCode.USER_CANCELLED)


def _stop_all(state: S, ev) -> S:
    return rec.stop_all(state)


def _approve(state: S, ev, granted: bool = True) -> S:
    approval = state.approval(ev.approval_id)
    if approval.status is not ApprovalStatus.PENDING:
        raise EventNotEnabled(
            f"approval {ev.approval_id!r} is {approval.status.value}; only a pending one can be answered")
    status = ApprovalStatus.APPROVED if granted else ApprovalStatus.DENIED
    approval = approval.model_copy(update={"status": status})
    state = state.with_(approvals=put(state.approvals, approval.approval_id, approval))
    intent = state.work[approval.work_id]
    return _set_intent(state, intent.model_copy(update={"reason_code": _reason(state, intent)}))


def _budget_change(state: S, ev) -> S:
    goal = state.goal(ev.goal_id)
    spent, unknown = (goal.budget.spent_known, goal.budget.unknown_requests) if goal.budget else (0, 0)
    budget = None if ev.limit is None else Budget(limit=ev.limit, spent_known=spent, unknown_requests=unknown)
    status = budget_status(budget.limit, budget.spent_known, budget.unknown_requests) if budget else 0
    new_state = goal.state
    if status in (0, 1):
        new_state = goal_transition(goal.state, GoalEvent.BUDGET_CHANGE, False)
        if state.work[goal.work_id].desired_state is DesiredState.PAUSED:
            new_state = goal_transition(new_state, GoalEvent.PAUSE, False)  # the user's pause still stands
    goal = goal.model_copy(update={"budget": budget, "state": new_state})
    state = state.with_(goals=put(state.goals, goal.goal_id, goal))
    intent = state.work[goal.work_id]
    return _set_intent(state, intent.model_copy(update={"reason_code": _reason(state, intent)}))


def _permission_change(state: S, ev) -> S:
    """A permission change takes priority: the old version's turn stops and old acceptance is void."""
    intent = state.intent(ev.work_id)
    intent = intent.model_copy(update={"permission_ok": ev.permission_ok,
                                       "control_version": intent.control_version + 1})
    state = _set_intent(state, intent)
    turn = state.open_turn(ev.work_id)
    if turn is not None:
        state = state.with_(turns=put(state.turns, turn.turn_id, turn.model_copy(update={
            "status": TurnStatus.INTERRUPTED})))
    goal = state.goals.get(intent.goal_id) if intent.goal_id else None
    if goal is not None:
        goal = goal.model_copy(update={"requirements": tuple(r.model_copy(update={"acceptance": Acceptance.UNKNOWN})
                                                             for r in goal.requirements)})
        state = state.with_(goals=put(state.goals, goal.goal_id, goal))
    return _set_intent(state, intent.model_copy(update={"reason_code": _reason(state, intent)}))


def _resource_change(state: S, ev) -> S:
    intent = state.intent(ev.work_id).model_copy(update={"resources_ok": ev.resources_ok})
    state = _set_intent(state, intent)
    return _set_intent(state, intent.model_copy(update={"reason_code": _reason(state, intent)}))


def _retry_request(state: S, ev) -> S:
    intent = state.intent(ev.work_id)
    key = f"{ev.company}/{ev.idempotency_key}"
    gen = state.retry_generations.get(ev.work_id) or RetryGeneration(work_id=ev.work_id)
    active = state.open_turn(ev.work_id) is not None or intent.reason_code in (
        ReasonCode.QUEUED, ReasonCode.RUNNING, ReasonCode.RETRY_SCHEDULED)
    admission = retry_admission(key in state.retry_receipts, active, gen.exhausted)
    if admission is RetryAdmission.RETURN_EXISTING:
        return state  # a repeated HTTP request gets its receipt back and changes nothing
    if admission is RetryAdmission.NEW_GENERATION:
        gen = RetryGeneration(work_id=ev.work_id, generation=gen.generation + 1)
    receipt = RetryReceipt(company=ev.company, idempotency_key=ev.idempotency_key, work_id=ev.work_id,
                           generation=gen.generation, status=RetryReceiptStatus.ACCEPTED)
    state = state.with_(retry_receipts=put(state.retry_receipts, key, receipt),
                        retry_generations=put(state.retry_generations, ev.work_id, gen))
    if admission is RetryAdmission.ATTACH_ACTIVE or intent.desired_state is not DesiredState.RUN:
        return state
    return _set_intent(state, intent.model_copy(update={"reason_code": _reason(state, intent)}))


def _reload(state: S, ev) -> S:
    return state


# --- runtime progress ------------------------------------------------------------------------------


def _reason(state: S, intent: RunIntent) -> ReasonCode:
    if intent.desired_state is not DesiredState.RUN:
        return intent.reason_code
    return rec.reason_for(state, intent)


def _admit(state: S, ev) -> S:
    _up(state, "admit")
    intent = state.intent(ev.work_id)
    if ev.turn_id in state.turns:
        raise EventNotEnabled(f"turn {ev.turn_id!r} already exists")
    if state.open_turn(ev.work_id) is not None:
        raise EventNotEnabled(f"{ev.work_id!r} already has an open turn; one current execution per work item")
    gate = rec.gate_for(state, intent)
    if gate not in (GATE_NONE, GATE_UNKNOWN_EFFECT):
        raise EventNotEnabled(f"{ev.work_id!r} is held: {GATE_REASON[gate].value}")
    goal = state.goals.get(intent.goal_id) if intent.goal_id else None
    if goal is not None and (goal.state is GoalState.BLOCKED or goal.phase is GoalPhase.WAITING):
        raise EventNotEnabled(f"goal {goal.goal_id!r} is {goal.state.value}/{goal.phase.value}; nothing to admit")
    key = continuation_key(intent.work_id, intent.control_version, intent.last_committed_progress)
    if key in state.admitted_keys:
        raise EventNotEnabled(f"continuation key {key!r} already admitted a turn; no duplicate execution")
    turn = Turn(turn_id=ev.turn_id, work_id=ev.work_id, continuation_key=key,
                predecessor_commit=intent.last_committed_progress, restricted=gate == GATE_UNKNOWN_EFFECT)
    lease = state.leases.get(ev.work_id)
    owner = OwnerIdentity(host=state.host, pid=state.pid, start_time_ms=state.clock_ms)
    if lease is None:
        lease = Lease(work_id=ev.work_id, owner=owner, generation=1, expires_at_ms=state.clock_ms + 60_000)
    elif lease.owner.host != state.host:
        raise EventNotEnabled(f"{ev.work_id!r} is owned on host {lease.owner.host!r}; no silent cross-host takeover")
    elif not lease.owner_alive:
        # the previous owner is dead (confirmed by pid + start time): a new generation fences it out
        lease = lease.model_copy(update={"owner": owner, "owner_alive": True,
                                         "generation": next_generation(lease.generation)})
    state = state.with_(turns=put(state.turns, turn.turn_id, turn), admitted_keys=state.admitted_keys | {key},
                        leases=put(state.leases, ev.work_id, lease))
    return _set_intent(state, intent.model_copy(update={"reason_code": ReasonCode.RUNNING}))


def _open_turn(state: S, work_id: str) -> Turn:
    turn = state.open_turn(state.intent(work_id).work_id)
    if turn is None:
        raise EventNotEnabled(f"{work_id!r} has no open turn; admit it first")
    return turn


def _provider_request(state: S, ev) -> S:
    _up(state, "provider_request")
    turn = _open_turn(state, ev.work_id)
    if ev.request_id in state.receipts:
        raise EventNotEnabled(f"request {ev.request_id!r} exists; a retry is a new provider attempt with a new id")
    intent = state.work[ev.work_id]
    goal = state.goals.get(intent.goal_id) if intent.goal_id else None
    receipt = UsageReceipt(request_id=ev.request_id, work_id=ev.work_id, turn_id=turn.turn_id,
                           goal_id=goal.goal_id if goal else None, revision=goal.revision if goal else None)
    return state.with_(receipts=put(state.receipts, ev.request_id, receipt),
                       provider_billed=put(state.provider_billed, ev.request_id, 0))


def _provider_usage(state: S, ev) -> S:
    receipt = state.receipt(ev.request_id)
    if receipt.final:
        raise EventNotEnabled(f"request {ev.request_id!r} is settled; later snapshots cannot change it")
    tokens = usage_watermark(receipt.tokens or 0, ev.cumulative_tokens)
    billed = usage_watermark(state.provider_billed.get(ev.request_id, 0), ev.cumulative_tokens)
    return state.with_(receipts=put(state.receipts, ev.request_id, receipt.model_copy(update={"tokens": tokens})),
                       provider_billed=put(state.provider_billed, ev.request_id, billed))


def _provider_response(state: S, ev) -> S:
    _up(state, "provider_response")
    receipt = state.receipt(ev.request_id)
    if receipt.final:
        return state  # a duplicate delivery of the same receipt counts once
    final = ev.tokens is not None
    tokens = usage_watermark(receipt.tokens or 0, ev.tokens) if final else receipt.tokens
    receipt = receipt.model_copy(update={"tokens": tokens, "final": final, "price_per_token": ev.price_per_token})
    billed = usage_watermark(state.provider_billed.get(ev.request_id, 0), ev.tokens or 0)
    state = state.with_(receipts=put(state.receipts, ev.request_id, receipt),
                        provider_billed=put(state.provider_billed, ev.request_id, billed))
    return _settle_budget(state, receipt)


def _settle_budget(state: S, receipt: UsageReceipt) -> S:
    """Projections follow the durable receipt; a late receipt keeps its original Goal attribution."""
    goal = state.goals.get(receipt.goal_id) if receipt.goal_id else None
    if goal is None or goal.budget is None:
        return state
    cost = known_cost(receipt.tokens if receipt.final and receipt.tokens is not None else -1,
                      receipt.price_per_token if receipt.price_per_token is not None else -1)
    budget = goal.budget
    if cost < 0:
        budget = budget.model_copy(update={"unknown_requests": budget.unknown_requests + 1})
    else:
        budget = budget.model_copy(update={"spent_known": budget.spent_known + cost})
    new_state = goal.state
    intent = state.work[goal.work_id]
    if budget_status(budget.limit, budget.spent_known, budget.unknown_requests) == 2:
        new_state = goal_transition(goal.state, GoalEvent.BUDGET_SPENT, False)
        turn = state.open_turn(goal.work_id)
        if turn is not None and new_state is GoalState.BUDGET_EXHAUSTED:
            # no new paid request: the turn ends at this committed receipt
            state = state.with_(turns=put(state.turns, turn.turn_id, turn.model_copy(update={
                "status": TurnStatus.COMPLETED})))
            intent = intent.model_copy(update={"last_committed_progress": intent.last_committed_progress + 1})
            state = _set_intent(state, intent)
    goal = goal.model_copy(update={"budget": budget, "state": new_state})
    state = state.with_(goals=put(state.goals, goal.goal_id, goal))
    return _set_intent(state, intent.model_copy(update={"reason_code": _reason(state, intent)}))


def _tool_dispatch(state: S, ev) -> S:
    _up(state, "tool_dispatch")
    turn = _open_turn(state, ev.work_id)
    call = state.tool_calls.get(ev.call_id) or ToolCall(call_id=ev.call_id, work_id=ev.work_id, turn_id=turn.turn_id,
                                                        tool=ev.tool, effect_class=ev.effect_class)
    if call.status is not ToolStatus.NEVER_STARTED:
        raise EventNotEnabled(f"tool call {ev.call_id!r} is {call.status.value}; a call is dispatched at most once")
    if turn.restricted and call.effect_class not in SAFE_FOR_RECOVERY:
        unknown = rec._unknown_effects(state, ev.work_id)
        approval = state.approvals.get(ev.approval_id) if ev.approval_id else None
        usable = (approval is not None and approval.status is ApprovalStatus.APPROVED
                  and approval.tool_call_id == call.call_id and approval.unknown_effect_set == unknown)
        if not usable:
            # One-time approval bound to this call and the current unknown-effect set; the call waits.
            approval_id = f"approval:{call.call_id}:{len(state.approvals)}"
            pending = Approval(approval_id=approval_id, work_id=ev.work_id, tool_call_id=call.call_id,
                               unknown_effect_set=unknown)
            state = state.with_(approvals=put(state.approvals, approval_id, pending),
                                tool_calls=put(state.tool_calls, call.call_id, call))
            intent = state.work[ev.work_id]
            return _set_intent(state, intent.model_copy(update={"reason_code": ReasonCode.AWAITING_APPROVAL}))
        state = state.with_(approvals=put(state.approvals, approval.approval_id,
                                          approval.model_copy(update={"status": ApprovalStatus.CONSUMED})))
    call = call.model_copy(update={"status": ToolStatus.DISPATCHED, "child_alive": True,
                                   "executions": call.executions + 1, "approval_id": ev.approval_id})
    state = state.with_(tool_calls=put(state.tool_calls, call.call_id, call))
    intent = state.work[ev.work_id]
    return _set_intent(state, intent.model_copy(update={"reason_code": ReasonCode.RUNNING}))


def _tool_commit(state: S, ev) -> S:
    _up(state, "tool_commit")
    call = state.tool_call(ev.call_id)
    if call.status not in (ToolStatus.DISPATCHED, ToolStatus.OUTCOME_UNKNOWN):
        raise EventNotEnabled(f"tool call {ev.call_id!r} is {call.status.value}; only a dispatched call commits")
    # A late verifiable result reconciles an unknown outcome; the real result replaces the placeholder.
    call = call.model_copy(update={"status": ToolStatus.RESULT_COMMITTED, "child_alive": False})
    intent = state.work[call.work_id]
    state = state.with_(tool_calls=put(state.tool_calls, call.call_id, call))
    intent = intent.model_copy(update={"last_committed_progress": intent.last_committed_progress + 1})
    state = _set_intent(state, intent)
    return _set_intent(state, intent.model_copy(update={"reason_code": _reason(state, intent)}))


def _turn_complete(state: S, ev) -> S:
    _up(state, "turn_complete")
    turn = _open_turn(state, ev.work_id)
    if any(c.turn_id == turn.turn_id and c.status is ToolStatus.DISPATCHED for c in state.tool_calls.values()):
        raise EventNotEnabled(f"turn {turn.turn_id!r} still has a dispatched tool; commit its result first")
    intent = state.work[ev.work_id]
    done = intent.kind is not WorkKind.GOAL
    intent = intent.model_copy(update={
        "last_committed_progress": intent.last_committed_progress + 1,
        "desired_state": DesiredState.DONE if done else intent.desired_state,
        "reason_code": ReasonCode.FINISHED if done else ReasonCode.QUEUED})
    state = state.with_(turns=put(state.turns, turn.turn_id, turn.model_copy(update={"status": TurnStatus.COMPLETED})))
    if done:
        state = state.with_(retry_receipts=_settle_receipts(state, ev.work_id, RetryReceiptStatus.COMPLETED))
    return _set_intent(state, intent)


def _child_delivery(state: S, ev) -> S:
    _up(state, "child_delivery")
    parent, child = state.intent(ev.parent_id), state.intent(ev.child_id)
    if child.parent_id != parent.work_id:
        raise EventNotEnabled(f"{ev.child_id!r} is not a child of {ev.parent_id!r} (its parent: {child.parent_id!r})")
    if child.desired_state is not DesiredState.DONE:
        raise EventNotEnabled(
            f"child {ev.child_id!r} is {child.desired_state.value}; only a finished result is delivered")
    if ev.child_id in parent.delivered_children:
        return state  # delivered already: a repeated delivery after a restart changes nothing
    parent = parent.model_copy(update={
        "delivered_children": (*parent.delivered_children, ev.child_id),
        "unconsumed_messages": (*parent.unconsumed_messages, f"result of {ev.child_id}")})
    state = _set_intent(state, parent)
    return _set_intent(state, parent.model_copy(update={"reason_code": _reason(state, parent)}))


def _todo_complete(state: S, ev) -> S:
    goal = state.goal(ev.goal_id)
    if goal.state is not GoalState.ACTIVE:
        raise EventNotEnabled(f"goal {ev.goal_id!r} is {goal.state.value}; only an active Goal is verified")
    progress = state.work[goal.work_id].last_committed_progress
    goal = goal.model_copy(update={"phase": GoalPhase.VERIFYING, "result_version": progress})
    return state.with_(goals=put(state.goals, goal.goal_id, goal))


def _verification(state: S, ev) -> S:
    goal = state.goal(ev.goal_id)
    if ev.revision != goal.revision:
        raise StaleVersion(f"verdict for revision {ev.revision} of {ev.goal_id!r}; the Goal is at revision "
                           f"{goal.revision}; old acceptance is void, verify again")
    if goal.phase is not GoalPhase.VERIFYING or goal.state is not GoalState.ACTIVE:
        raise EventNotEnabled(f"goal {ev.goal_id!r} is {goal.state.value}/{goal.phase.value}, not verifying")
    bad = [v for v in ev.verdicts.values() if v not in set(Acceptance)]
    if bad:
        raise MalformedRecord(f"verdicts must be met/unmet/unknown, got {bad!r}")
    reqs = tuple(r.model_copy(update={"acceptance": Acceptance(ev.verdicts.get(r.req_id, "unknown")),
                                      "evidence_version": ev.result_version, "for_revision": ev.revision})
                 for r in goal.requirements)
    all_met = bool(reqs) and all(r.acceptance is Acceptance.MET for r in reqs)
    # the verdict must be about the result as it is now: later commits make it stale
    progress = state.work[goal.work_id].last_committed_progress
    current = achieved_allowed(goal.revision, ev.revision, ev.result_version, progress, all_met)
    new_state = goal_transition(goal.state, GoalEvent.VERIFIED_MET, current) if current else goal.state
    update: dict = {"requirements": reqs, "state": new_state,
                    "phase": GoalPhase.VERIFYING if current else GoalPhase.WORKING}
    intent = state.work[goal.work_id]
    if new_state is GoalState.ACHIEVED:
        turn = state.open_turn(goal.work_id)
        if turn is not None:  # achieved work runs no further turn
            state = state.with_(turns=put(state.turns, turn.turn_id, turn.model_copy(update={
                "status": TurnStatus.COMPLETED})))
        update["achieved_for"] = (ev.revision, ev.result_version)
        update["terminal_snapshots"] = (*goal.terminal_snapshots, TerminalSnapshot(
            goal_id=goal.goal_id, revision=goal.revision, state=new_state, anchor_turn=turn.turn_id if turn else None))
        intent = intent.model_copy(update={"desired_state": DesiredState.DONE, "reason_code": ReasonCode.FINISHED})
    state = state.with_(goals=put(state.goals, goal.goal_id, goal.model_copy(update=update)))
    return _set_intent(state, intent)


def _blocker(state: S, ev) -> S:
    """The same real blocker recurs with no independent work left (blocked), or it clears (active)."""
    goal = state.goal(ev.goal_id)
    if state.open_turn(goal.work_id) is not None:
        raise EventNotEnabled(f"goal {ev.goal_id!r} has a turn running; blocked is decided between turns")
    new_state = goal_transition(goal.state, GoalEvent.BLOCKED if ev.present else GoalEvent.UNBLOCKED, False)
    goal = goal.model_copy(update={"state": new_state})
    state = state.with_(goals=put(state.goals, goal.goal_id, goal))
    intent = state.work[goal.work_id]
    return _set_intent(state, intent.model_copy(update={"reason_code": _reason(state, intent)}))


def _wait_create(state: S, ev) -> S:
    _up(state, "wait_create")
    turn = _open_turn(state, ev.work_id)
    if ev.handle in state.waits:
        raise EventNotEnabled(f"wait handle {ev.handle!r} exists")
    if any(w.consumption_key == ev.consumption_key for w in state.waits.values()):
        raise EventNotEnabled(f"consumption key {ev.consumption_key!r} is taken; each wait needs a unique one")
    intent = state.work[ev.work_id]
    goal = state.goals.get(intent.goal_id) if intent.goal_id else None
    wait = DurableWait(handle=ev.handle, work_id=ev.work_id, goal_revision=goal.revision if goal else 0,
                       observed_version=intent.control_version, consumption_key=ev.consumption_key)
    # Waiting with a live handle ends the turn: no idle model turns while waiting.
    state = state.with_(waits=put(state.waits, ev.handle, wait),
                        turns=put(state.turns, turn.turn_id, turn.model_copy(update={"status": TurnStatus.COMPLETED})))
    if goal is not None:
        state = state.with_(goals=put(state.goals, goal.goal_id, goal.model_copy(update={"phase": GoalPhase.WAITING})))
    intent = intent.model_copy(update={"last_committed_progress": intent.last_committed_progress + 1,
                                       "reason_code": ReasonCode.WAITING_DEPENDENCY})
    return _set_intent(state, intent)


def _notification(state: S, ev) -> S:
    wait = state.wait(ev.handle)
    intent = state.work[wait.work_id]
    admits = wait_admits(intent.desired_state is DesiredState.RUN, wait.observed_version == intent.control_version,
                         state.open_turn(wait.work_id) is not None, wait.consumed)
    wait = wait.model_copy(update={"result": ev.result, "consumed": wait.consumed or admits})
    state = state.with_(waits=put(state.waits, wait.handle, wait))  # the result is saved either way
    if not admits:
        return state
    goal = state.goals.get(intent.goal_id) if intent.goal_id else None
    if goal is not None:
        state = state.with_(goals=put(state.goals, goal.goal_id, goal.model_copy(update={"phase": GoalPhase.WORKING})))
    return _set_intent(state, intent.model_copy(update={"reason_code": _reason(state, intent)}))


def _stale_write(state: S, ev) -> S:
    state.intent(ev.work_id)
    lease = state.leases.get(ev.work_id)
    if lease is None:
        raise UnknownWorkItem(f"{ev.work_id!r} has no lease yet; nothing can write for it")
    if not fencing_accepts(ev.generation, lease.generation):
        raise StaleVersion(f"write from generation {ev.generation} rejected: {ev.work_id!r} is at generation "
                           f"{lease.generation}; a stale owner's writes are fenced out")
    return state


def _settle_receipts(state: S, work_id: str, status: RetryReceiptStatus) -> dict:
    """Accepted Retry receipts of a work item end with its run; they stay, so their keys stay taken."""
    return {k: (r.model_copy(update={"status": status})
                if r.work_id == work_id and r.status is RetryReceiptStatus.ACCEPTED else r)
            for k, r in state.retry_receipts.items()}


def _task_failure(state: S, ev) -> S:
    intent = state.intent(ev.work_id)
    gen = state.retry_generations.get(ev.work_id) or RetryGeneration(work_id=ev.work_id)
    first = gen.first_failure_ms if gen.first_failure_ms is not None else state.clock_ms
    jitter = gen.jitter_permille if gen.first_failure_ms is not None else ev.jitter_permille  # persisted once
    failures = gen.failures + 1
    at = -1 if gen.exhausted else next_retry_at_ms(failures, first, state.clock_ms, jitter, ev.cooldown_until_ms)
    gen = gen.model_copy(update={"failures": failures, "first_failure_ms": first, "jitter_permille": jitter,
                                 "next_at_ms": None if at < 0 else at, "exhausted": at < 0})
    state = state.with_(retry_generations=put(state.retry_generations, ev.work_id, gen),
                        retry_receipts=_settle_receipts(state, ev.work_id, RetryReceiptStatus.FAILED))
    turn = state.open_turn(ev.work_id)
    if turn is not None:
        turn = turn.model_copy(update={"status": TurnStatus.INTERRUPTED})
        state = state.with_(turns=put(state.turns, turn.turn_id, turn))
    if intent.desired_state is not DesiredState.RUN:
        return state
    reason = ReasonCode.RETRY_EXHAUSTED if at < 0 else ReasonCode.RETRY_SCHEDULED
    return _set_intent(state, intent.model_copy(update={"reason_code": reason}))


def _clock_advance(state: S, ev) -> S:
    state = state.with_(clock_ms=state.clock_ms + ev.ms)
    for work_id, gen in state.retry_generations.items():
        intent = state.work.get(work_id)
        due = gen.next_at_ms is not None and gen.next_at_ms <= state.clock_ms
        if due and intent is not None and intent.reason_code is ReasonCode.RETRY_SCHEDULED:
            state = _set_intent(state, intent.model_copy(update={"reason_code": ReasonCode.QUEUED}))
    return state


# --- faults ----------------------------------------------------------------------------------------


def _host_change(state: S, ev) -> S:
    if state.runtime is not RuntimePhase.DOWN:
        raise EventNotEnabled("the host identity changes only while the runtime is down (a machine restart)")
    return state.with_(host=ev.host)


HANDLERS: dict[str, Callable[[S, Record], S]] = {
    "submit": _submit, "create_goal": _create_goal, "update_goal": _update_goal, "pause": _pause,
    "resume": _resume, "end": _end, "stop_all": _stop_all, "approve": _approve,
    "deny": lambda s, e: _approve(s, e, granted=False), "budget_change": _budget_change,
    "permission_change": _permission_change, "resource_change": _resource_change,
    "retry_request": _retry_request, "frontend_reload": _reload, "admit": _admit,
    "provider_request": _provider_request, "provider_usage": _provider_usage,
    "provider_response": _provider_response, "tool_dispatch": _tool_dispatch, "tool_commit": _tool_commit,
    "turn_complete": _turn_complete, "child_delivery": _child_delivery, "todo_complete": _todo_complete,
    "verification": _verification,
    "blocker": _blocker, "wait_create": _wait_create, "notification": _notification, "stale_write": _stale_write,
    "task_failure": _task_failure, "clock_advance": _clock_advance,
    "crash": lambda s, e: rec.crash(s, worker_only=e.worker_only),
    "graceful_exit": lambda s, e: rec.graceful_exit(s),
    "start": lambda s, e: rec.start(s, e.crash_at),
    "restart": lambda s, e: rec.restart(s, e.kind),
    "clock_jump": lambda s, e: s.with_(clock_ms=s.clock_ms + e.ms),
    "host_change": _host_change,
}


def _coerce(state: object, event: object) -> tuple[S, Record]:
    if not isinstance(state, ModelState):
        raise MalformedRecord(f"state must be a ModelState, got {type(state).__name__}: {state!r:.80}")
    if isinstance(event, dict):
        event = parse_event(event)
    if not isinstance(event, Record) or getattr(event, "type", None) not in {*HANDLERS, "in_flight"}:
        raise MalformedRecord(f"not a model event: {event!r:.80} (type {type(event).__name__}); "
                              "build one from recoverykit.model.events or pass its JSON dict")
    return state, event


def apply(state: ModelState, event: Record | dict) -> ModelState:
    """The state after a definite ``event``; a bad event raises a ``ModelError`` and changes nothing."""
    state, event = _coerce(state, event)
    if isinstance(event, InFlight):
        raise EventNotEnabled("an InFlight event has more than one outcome; use successors(state, event)")
    return HANDLERS[event.type](state, event)


# The operation each before/after pair brackets: at ``<pair>.before`` the operation has not taken
# effect (nothing durable yet), at ``<pair>.after`` it has (durable, reply not yet sent).
POINT_OPS: dict[str, frozenset[str]] = {
    "input.accept": frozenset({"submit"}),
    "provider.request": frozenset({"provider_request"}),
    "usage.persist": frozenset({"provider_response"}),
    "tool.dispatch": frozenset({"tool_dispatch"}),
    "tool.result.commit": frozenset({"tool_commit"}),
    "child.delivery": frozenset({"child_delivery"}),
}


def _bracket(point: str, op_type: str) -> str | None:
    """"before" or "after" when ``point`` brackets ``op_type``; None when the point says nothing of it."""
    pair, _, side = point.rpartition(".")
    if side in ("before", "after") and op_type in POINT_OPS.get(pair, ()):
        return side
    return None


def successors(state: ModelState, event: Record | dict) -> tuple[ModelState, ...]:
    """Every state the contract allows after ``event``: one for a definite event, up to two for ``InFlight``.

    ``InFlight(op, point)``: ``op`` was in flight when every runtime process died at ``point``.
    When the point brackets the operation (``input.accept.before`` for a submit, ``.after`` ...),
    the outcome is fixed: before means it never took effect, after means it did (though the client
    never heard). Otherwise it either never took effect or took effect just before the crash. If
    ``op`` itself is not enabled, only "never took effect" remains.
    """
    state, event = _coerce(state, event)
    if not isinstance(event, InFlight):
        return (apply(state, event),)
    side = _bracket(event.point, event.op.type)
    not_done = rec.crash(state) if state.runtime is not RuntimePhase.DOWN else state
    outcomes = [] if side == "after" else [not_done]
    if side != "before":
        try:
            done = apply(state, event.op)
        except ModelError:
            if side == "after":
                raise
        else:
            outcomes.append(rec.crash(done) if done.runtime is not RuntimePhase.DOWN else done)
    return tuple(outcomes)
