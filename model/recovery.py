"""Faults and the automatic recovery procedure: crash, graceful exit, start, and each restart kind.

Recovery follows seed 000's steps: load facts, confirm ownership (generation fencing; a live owner
is reattached; another host's owner is held, never taken over), repair context (unknown outcomes
recorded, the old turn ended interrupted under a stable repair key, or a new attempt from a
verified safe checkpoint), decide (``decisions.first_gate``), admit. ``Start(crash_at=...)``
stops after a recovery phase to model a crash during recovery; every phase is idempotent, so a
second start finishes the job without repeating a side effect.
"""

from __future__ import annotations

from recoverykit.model.catalogue import (
    OLD_HIDDEN_EXPIRY_S,
    DesiredState,
    EffectClass,
    GoalPhase,
    GoalState,
    ReasonCode,
    RecoveryMode,
    RecoveryPolicy,
    RestartKind,
    ToolStatus,
    TurnStatus,
)
from recoverykit.model.decisions import (
    GATE_NONE,
    GATE_REASON,
    GATE_RECOVERY_DISABLED,
    GATE_UNKNOWN_EFFECT,
    GoalEvent,
    budget_status,
    first_gate,
    goal_transition,
    next_generation,
    recovery_mode,
)
from recoverykit.model.errors import EventNotEnabled
from recoverykit.model.records import OwnerIdentity, RunIntent, TerminalSnapshot
from recoverykit.model.state import ModelState, RuntimePhase


def crash(state: ModelState, *, worker_only: bool = False) -> ModelState:
    """Every runtime process dies; with ``worker_only`` the tool children live on."""
    if state.runtime is RuntimePhase.DOWN:
        raise EventNotEnabled("the runtime is already down; start it before crashing it again")
    leases = {k: v.model_copy(update={"owner_alive": False}) if v.owner.host == state.host else v
              for k, v in state.leases.items()}
    tools = state.tool_calls if worker_only else {
        k: (v.model_copy(update={"child_alive": False}) if v.child_alive else v) for k, v in state.tool_calls.items()}
    return state.with_(runtime=RuntimePhase.DOWN, leases=leases, tool_calls=tools)


def graceful_exit(state: ModelState) -> ModelState:
    """Stop admission, save controls and checkpoints, then exit; nothing here is a user Pause."""
    if state.runtime is RuntimePhase.DOWN:
        raise EventNotEnabled("the runtime is already down")
    turns = {}
    for k, turn in state.turns.items():
        if turn.status is TurnStatus.ACTIVE:
            pending = any(c.turn_id == k and c.status is ToolStatus.DISPATCHED for c in state.tool_calls.values())
            turn = turn.model_copy(update={"safe_checkpoint": not pending})
        turns[k] = turn
    return crash(state.with_(turns=turns))


def _unknown_effects(state: ModelState, work_id: str) -> frozenset[str]:
    return frozenset(c.call_id for c in state.tool_calls.values()
                     if c.work_id == work_id and c.status is ToolStatus.OUTCOME_UNKNOWN
                     and c.effect_class is EffectClass.UNKNOWN)


def gate_for(state: ModelState, intent: RunIntent, *, recovering: bool = False) -> int:
    """The decision-order gate for one work item, from its durable facts.

    A disabled recovery policy holds work only in a recovery decision: it disables automatic
    recovery, not ordinary execution.
    """
    goal = state.goals.get(intent.goal_id) if intent.goal_id else None
    budget = goal.budget if goal else None
    status = 0
    if budget is not None:
        # A receipt whose turn is over without a final count is unknown cost: never available balance.
        open_unknown = sum(1 for r in state.receipts.values() if r.goal_id == goal.goal_id and not r.final
                           and (r.lost or state.turns[r.turn_id].status is not TurnStatus.ACTIVE))
        status = budget_status(budget.limit, budget.spent_known, budget.unknown_requests + open_unknown)
    pending = any(a.work_id == intent.work_id and a.status == "pending" for a in state.approvals.values())
    return first_gate(intent.desired_state is not DesiredState.RUN,
                      recovering and intent.recovery_policy is RecoveryPolicy.DISABLED, pending, intent.permission_ok,
                      status, intent.resources_ok, bool(_unknown_effects(state, intent.work_id)))


def reason_for(state: ModelState, intent: RunIntent) -> ReasonCode:
    """The reason code of a work item that wants to run, from the decision order and its facts."""
    if intent.desired_state is not DesiredState.RUN:
        return intent.reason_code
    lease = state.leases.get(intent.work_id)
    if lease is not None and lease.owner.host != state.host:
        return ReasonCode.OWNER_ON_OTHER_HOST
    gate = gate_for(state, intent)
    if gate not in (GATE_NONE, GATE_UNKNOWN_EFFECT):
        return GATE_REASON[gate]
    if state.open_turn(intent.work_id) is not None:
        return ReasonCode.RUNNING
    goal = state.goals.get(intent.goal_id) if intent.goal_id else None
    if goal is not None and (goal.state is GoalState.BLOCKED or goal.phase is GoalPhase.WAITING):
        return ReasonCode.WAITING_DEPENDENCY
    return ReasonCode.QUEUED


def _claim(state: ModelState) -> tuple[ModelState, dict[str, RecoveryMode]]:
    leases, modes = dict(state.leases), {}
    work = dict(state.work)
    for work_id, lease in state.leases.items():
        intent = state.work[work_id]
        turn = state.open_turn(work_id)
        if lease.owner.host != state.host and intent.desired_state is DesiredState.RUN:
            modes[work_id] = RecoveryMode.HOLD  # another host's lease is never taken over silently
            work[work_id] = intent.model_copy(update={"reason_code": ReasonCode.OWNER_ON_OTHER_HOST})
            continue
        if turn is None:
            continue
        live_child = any(c.turn_id == turn.turn_id and c.child_alive for c in state.tool_calls.values())
        same_host = lease.owner.host == state.host
        checkpoint = turn.safe_checkpoint and not any(
            c.turn_id == turn.turn_id and c.status in (ToolStatus.DISPATCHED, ToolStatus.OUTCOME_UNKNOWN)
            and not c.child_alive for c in state.tool_calls.values())
        mode = recovery_mode(lease.owner_alive or live_child, same_host, not lease.owner_alive, checkpoint)
        modes[work_id] = mode
        if mode is RecoveryMode.HOLD:
            work[work_id] = intent.model_copy(update={"reason_code": ReasonCode.OWNER_ON_OTHER_HOST})
            continue
        if not lease.owner_alive:  # death confirmed (pid + start time): fence the old generation out
            owner = OwnerIdentity(host=state.host, pid=state.pid, start_time_ms=state.clock_ms)
            leases[work_id] = lease.model_copy(update={
                "generation": next_generation(lease.generation), "owner": owner, "owner_alive": True})
    return state.with_(leases=leases, work=work), modes


def _repair(state: ModelState, modes: dict[str, RecoveryMode]) -> ModelState:
    tools, turns, work = dict(state.tool_calls), dict(state.turns), dict(state.work)
    for call_id, call in state.tool_calls.items():
        if call.status is ToolStatus.DISPATCHED and not call.child_alive and modes.get(call.work_id):
            tools[call_id] = call.model_copy(update={"status": ToolStatus.OUTCOME_UNKNOWN})
    receipts = dict(state.receipts)
    for request_id, receipt in state.receipts.items():
        if not receipt.final and modes.get(receipt.work_id) in (RecoveryMode.REPAIR, RecoveryMode.NEW_ATTEMPT):
            receipts[request_id] = receipt.model_copy(update={"lost": True})  # reported lost, never fabricated
    state = state.with_(receipts=receipts)
    for work_id, mode in modes.items():
        turn = state.open_turn(work_id)
        if turn is not None and mode is RecoveryMode.REPAIR:
            # A stable repair key: repeating the repair after another crash finds it done.
            turns[turn.turn_id] = turn.model_copy(update={
                "status": TurnStatus.INTERRUPTED, "repair_key": f"repair:{turn.turn_id}"})
            # The repair (placeholders + interruption marker) is a commit point of its own, so the
            # new turn's continuation key differs from the interrupted one's.
            intent = work[work_id]
            work[work_id] = intent.model_copy(update={"last_committed_progress": intent.last_committed_progress + 1})
    return state.with_(tool_calls=tools, turns=turns, work=work)


def _decide(state: ModelState, modes: dict[str, RecoveryMode]) -> ModelState:
    work, turns = dict(state.work), dict(state.turns)
    for work_id, intent in state.work.items():
        if intent.desired_state is not DesiredState.RUN or modes.get(work_id) is RecoveryMode.HOLD:
            continue  # stops, pauses and finished work keep their reason; a held owner keeps its own
        gate = gate_for(state, intent, recovering=True)
        turn = state.open_turn(work_id)
        if gate == GATE_RECOVERY_DISABLED:
            # explicitly disabled automatic recovery stays effective: the work waits for the user's
            # Resume, with the reason saying so (the only restart after which a person must act)
            if turn is not None:
                turns[turn.turn_id] = turn.model_copy(update={"status": TurnStatus.INTERRUPTED})
            work[work_id] = intent.model_copy(update={
                "desired_state": DesiredState.PAUSED, "reason_code": ReasonCode.AUTOMATIC_RECOVERY_DISABLED,
                "control_version": intent.control_version + 1,
                "last_committed_progress": intent.last_committed_progress + (turn is not None)})
            continue
        if turn is not None and gate in (GATE_NONE, GATE_UNKNOWN_EFFECT):
            if modes.get(work_id) is RecoveryMode.NEW_ATTEMPT:
                turns[turn.turn_id] = turn.model_copy(update={"attempt": turn.attempt + 1})
        elif turn is not None:
            # held by a gate: the attempt does not go on; the interruption is a commit point of its
            # own, so a later admission gets a fresh continuation key
            turns[turn.turn_id] = turn.model_copy(update={"status": TurnStatus.INTERRUPTED})
            intent = intent.model_copy(update={"last_committed_progress": intent.last_committed_progress + 1})
        work[work_id] = intent
    state = state.with_(work=work, turns=turns)
    work = {k: (v.model_copy(update={"reason_code": reason_for(state, v)})
                if v.desired_state is DesiredState.RUN and modes.get(k) is not RecoveryMode.HOLD else v)
            for k, v in state.work.items()}
    return state.with_(work=work)


def start(state: ModelState, crash_at: str | None = None) -> ModelState:
    """Start the runtime and run recovery; ``crash_at`` (a recovery.* point) kills it mid-way."""
    if state.runtime is not RuntimePhase.DOWN:
        raise EventNotEnabled(f"start needs a stopped runtime; it is {state.runtime.value}")
    state = state.with_(runtime=RuntimePhase.RECOVERING, pid=state.pid + 1)
    state, modes = _claim(state)
    if crash_at == "recovery.claim.after":
        return crash(state)
    state = _repair(state, modes)
    if crash_at == "recovery.repair.after":
        return crash(state)
    state = _decide(state, modes)
    if crash_at == "recovery.decide.after":
        return crash(state)
    return state.with_(runtime=RuntimePhase.UP)


def stop_item(state: ModelState, work_id: str, desired: DesiredState, reason: ReasonCode
              ) -> tuple[dict, dict, dict]:
    """What a user stop (pause, end, stop all) does to one item: new work, turns and goals mappings.

    The control version moves on, so every continuation key and wakeup of the old version is dead;
    an open turn ends interrupted; a Goal follows through ``goal_transition``.
    """
    intent = state.work[work_id]
    work, turns, goals = dict(state.work), dict(state.turns), dict(state.goals)
    work[work_id] = intent.model_copy(update={
        "desired_state": desired, "reason_code": reason, "control_version": intent.control_version + 1})
    turn = state.open_turn(work_id)
    if turn is not None:
        turns[turn.turn_id] = turn.model_copy(update={"status": TurnStatus.INTERRUPTED})
    goal = state.goals.get(intent.goal_id) if intent.goal_id else None
    if goal is not None:
        event = GoalEvent.END if desired is DesiredState.CANCELLED else GoalEvent.PAUSE
        new_state = goal_transition(goal.state, event, False)
        snaps = goal.terminal_snapshots
        if new_state is GoalState.CANCELLED and goal.state is not GoalState.CANCELLED:
            snaps = (*snaps, TerminalSnapshot(goal_id=goal.goal_id, revision=goal.revision, state=new_state,
                                              anchor_turn=turn.turn_id if turn else None))
        goals[goal.goal_id] = goal.model_copy(update={
            "state": new_state, "control_version": goal.control_version + 1, "terminal_snapshots": snaps})
    return work, turns, goals


def stop_all(state: ModelState) -> ModelState:
    work, turns, goals = dict(state.work), dict(state.turns), dict(state.goals)
    for work_id, intent in state.work.items():
        if intent.desired_state is DesiredState.RUN:
            work, turns, goals = stop_item(state.with_(work=work, turns=turns, goals=goals), work_id,
                                           DesiredState.PAUSED, ReasonCode.USER_STOPPED_ALL)
    return state.with_(work=work, turns=turns, goals=goals)


def restart(state: ModelState, kind: RestartKind) -> ModelState:
    """One restart kind of the failure acceptance matrix, exit (if up) and start included."""
    up = state.runtime is not RuntimePhase.DOWN
    if kind is RestartKind.FRONTEND_RELOAD:
        return state  # a client disconnect changes no intent
    if kind is RestartKind.STOP_ALL_EXIT:
        state = stop_all(state)
    if kind in (RestartKind.NORMAL_EXIT, RestartKind.GRACEFUL_WORKER_RESTART, RestartKind.STOP_ALL_EXIT):
        state = graceful_exit(state) if up else state
    elif up:
        state = crash(state, worker_only=kind is RestartKind.WORKER_KILL)
    if kind is RestartKind.LONG_DOWNTIME:
        state = state.with_(clock_ms=state.clock_ms + OLD_HIDDEN_EXPIRY_S * 1000 + 1)
    if kind is RestartKind.HOST_IDENTITY_CHANGE:
        state = state.with_(host=state.host + "'")
    if kind is RestartKind.CRASH_DURING_RECOVERY:
        state = start(state, crash_at="recovery.repair.after")
    return start(state)
