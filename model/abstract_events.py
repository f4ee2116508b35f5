"""The explorer's events: each is ``handler(state, i) -> [(label, next_state), ...]`` over ``abstract`` tuples.

Item events take the index ``i`` of the work item; global events (faults, restarts, Retry clicks)
are called with ``i = -1``. A handler returns nothing when the event is not enabled. ``HANDLERS``
maps an event name to its handler; the explorer takes overrides of this table, which is how the
tests inject a deliberately broken transition without editing this module.

The handlers mirror ``transitions`` and ``recovery`` (the concrete model) event for event, and call
the same decision functions; docs/model.md lists what the abstraction leaves out.
"""

from __future__ import annotations

from collections.abc import Callable

from recoverykit.model import abstract as a
from recoverykit.model.abstract import (
    A_APPROVED,
    A_CONSUMED,
    A_DENIED,
    A_NONE,
    A_PENDING,
    ACC,
    ACC_MET,
    ACC_UNKNOWN,
    ACC_UNMET,
    ACCREV,
    APPR,
    ATT_L,
    ATT_W,
    CANCELLED,
    CHAT,
    CHILD,
    CKPT,
    COMMIT,
    CV,
    DES,
    DONE,
    DOWN,
    EFF_UNKNOWN,
    EFFECT,
    EXEC,
    GATE_OK,
    GE,
    GEN,
    GOAL,
    GSTATE,
    HOLD,
    HOSTF,
    ITEMS,
    JUMPED,
    KIND,
    KNOWN,
    LASTKEY,
    LEDGER,
    LIMIT,
    NO_GOAL,
    OHOST,
    OLDUNK,
    OWNER,
    PAUSED,
    PERM,
    PH_VERIFYING,
    PH_WAITING,
    PH_WORKING,
    PHASE,
    PROV,
    REASON,
    RESTRICTED,
    RESULTV,
    RETRY,
    REV,
    RT,
    RUN,
    SPENT,
    STALEOK,
    T_ACTIVE,
    T_COMPLETED,
    T_INTERRUPTED,
    TOOL,
    TOOL_COMMITTED,
    TOOL_DECIDED,
    TOOL_DISPATCHED,
    TOOL_NONE,
    TURN,
    UNK,
    UP,
    W_CONSUMED,
    W_LIVE,
    W_NONE,
    WADMITS,
    WAIT,
    WAITV,
    R,
)
from recoverykit.model.catalogue import ReasonCode, RecoveryMode, RetryAdmission
from recoverykit.model.decisions import BUDGET_EXHAUSTED, GATE_UNKNOWN_EFFECT

State = tuple
Handler = Callable[[State, int], list]

_PAUSED_R, _CANCELLED_R, _STOPALL_R = R[ReasonCode.USER_PAUSED], R[ReasonCode.USER_CANCELLED], \
    R[ReasonCode.USER_STOPPED_ALL]
_FINISHED_R, _RUNNING_R, _WAITING_R = R[ReasonCode.FINISHED], R[ReasonCode.RUNNING], R[ReasonCode.WAITING_DEPENDENCY]


def put(s: State, i: int, w: list) -> State:
    items = list(s[ITEMS])
    items[i] = tuple(w)
    return (s[RT], s[HOSTF], s[JUMPED], s[RETRY], tuple(items))


def settle(w: list) -> list:
    w[REASON] = a.reason_of(w)
    return w


# --- client operations ----------------------------------------------------------------------------


def _stop(w: list, desired: int, reason: int) -> list:
    w[DES], w[REASON], w[CV] = desired, reason, w[CV] + 1
    if w[TURN] == T_ACTIVE:
        w[TURN] = T_INTERRUPTED
    w[GSTATE] = a.goal_step(w[GSTATE], GE.END if desired == CANCELLED else GE.PAUSE)
    return w


def pause(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[DES] != RUN:
        return []
    return [(f"pause({i})", put(s, i, _stop(list(w), PAUSED, _PAUSED_R)))]


def resume(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[DES] != PAUSED:
        return []
    w = list(w)
    w[DES], w[CV] = RUN, w[CV] + 1
    w[GSTATE] = a.goal_step(w[GSTATE], GE.RESUME)
    if w[PHASE] == PH_WAITING:
        w[PHASE] = PH_WORKING  # the old wakeup is void; its saved result feeds the next turn
    return [(f"resume({i})", put(s, i, settle(w)))]


def end(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[DES] not in (RUN, PAUSED):
        return []
    return [(f"end({i})", put(s, i, _stop(list(w), CANCELLED, _CANCELLED_R)))]


def approve(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[APPR] != A_PENDING:
        return []
    out = []
    for label, status in (("approve", A_APPROVED), ("deny", A_DENIED)):
        v = list(w)
        v[APPR] = status
        out.append((f"{label}({i})", put(s, i, settle(v))))
    return out


def budget_change(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[KIND] != GOAL or w[LIMIT] < 0 or w[GSTATE] in (a.G[a.GoalState.ACHIEVED],
                                                                     a.G[a.GoalState.CANCELLED]):
        return []
    w = list(w)
    w[LIMIT] += 2
    if a.budget_of(w) in (0, 1):
        w[GSTATE] = a.goal_step(w[GSTATE], GE.BUDGET_CHANGE)
        if w[DES] == PAUSED:
            w[GSTATE] = a.goal_step(w[GSTATE], GE.PAUSE)  # the user's pause still stands
    return [(f"budget_change({i})", put(s, i, settle(w)))]


def revise(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[KIND] != GOAL or w[DES] not in (RUN, PAUSED) or w[REV] >= 2:
        return []
    w = list(w)
    w[REV], w[CV], w[ACC] = w[REV] + 1, w[CV] + 1, ACC_UNKNOWN
    w[GSTATE] = a.goal_step(w[GSTATE], GE.REVISION)
    w[PHASE] = PH_WORKING  # old acceptance and old wakeups are void: the new revision needs work
    return [(f"revise({i})", put(s, i, settle(w)))]


def permission(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[DES] != RUN:
        return []
    w = list(w)
    w[PERM], w[CV] = 1 - w[PERM], w[CV] + 1
    if w[TURN] == T_ACTIVE:
        w[TURN] = T_INTERRUPTED  # a permission change takes priority: the old version cannot continue
    return [(f"{'grant' if w[PERM] else 'revoke'}({i})", put(s, i, settle(w)))]


# --- runtime progress ------------------------------------------------------------------------------


def admit(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[HOLD] or w[DES] != RUN or w[TURN] == T_ACTIVE or w[HOLD] or w[PHASE] == PH_WAITING \
            or w[GSTATE] == a.G[a.GoalState.BLOCKED]:
        return []
    gate = a.gate_of(w)
    if gate not in GATE_OK:
        return []
    key = a.key_of(i, w)
    if key == w[LASTKEY]:
        return []  # this continuation was admitted already: no duplicate execution
    w = list(w)
    w[TURN], w[LASTKEY], w[RESTRICTED], w[CKPT] = T_ACTIVE, key, int(gate == GATE_UNKNOWN_EFFECT), 1
    if w[GEN] == 0:
        w[GEN], w[OWNER], w[OHOST] = 1, 1, s[HOSTF]
    elif not w[OWNER]:
        w[GEN], w[OWNER] = a.next_generation(w[GEN]), 1  # the dead owner's generation is fenced out
    w[REASON] = _RUNNING_R
    return [(f"admit({i})", put(s, i, w))]


def provider_request(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[HOLD] or w[TURN] != T_ACTIVE or w[PROV] or w[LEDGER] >= 4:
        return []
    w = list(w)
    w[PROV], w[ATT_W], w[ATT_L] = 1, 0, 0
    return [(f"provider_request({i})", put(s, i, w))]


def provider_usage(s: State, i: int) -> list:
    """A streamed cumulative snapshot: the provider's ledger grows by one; the receipt keeps a watermark."""
    w = s[ITEMS][i]
    if s[RT] != UP or w[HOLD] or not w[PROV] or w[ATT_L] >= 2:
        return []
    w = list(w)
    w[ATT_L] += 1
    w[ATT_W] = a.usage_watermark(w[ATT_W], w[ATT_L])
    w[PROV] = 2
    return [(f"provider_usage({i})", put(s, i, w))]


def provider_response(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[HOLD] or not w[PROV]:
        return []
    w = list(w)
    final = w[ATT_L] + 1
    w[ATT_W] = a.usage_watermark(w[ATT_W], final)
    w[LEDGER] += final
    w[KNOWN] += w[ATT_W]
    w[PROV] = w[ATT_W] = w[ATT_L] = 0
    if w[KIND] == GOAL and w[LIMIT] >= 0:
        w[SPENT] += final  # price 1 per token: a known cost from known tokens and a known price
        if a.budget_of(w) == BUDGET_EXHAUSTED:
            w[GSTATE] = a.goal_step(w[GSTATE], GE.BUDGET_SPENT)
            if w[TURN] == T_ACTIVE:
                w[TURN], w[COMMIT] = T_COMPLETED, w[COMMIT] + 1  # no new paid request: the turn ends here
    return [(f"provider_response({i})", put(s, i, settle(w)))]


def decide_tool(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[HOLD] or w[TURN] != T_ACTIVE or w[PROV] or w[TOOL] != TOOL_NONE:
        return []
    w = list(w)
    w[TOOL] = TOOL_DECIDED
    return [(f"decide_tool({i})", put(s, i, w))]


def tool_dispatch(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if (s[RT] != UP or w[HOLD] or w[TURN] != T_ACTIVE or w[TOOL] != TOOL_DECIDED or w[PROV]
            or w[APPR] in (A_PENDING, A_DENIED)):
        return []
    w = list(w)
    if w[RESTRICTED] and w[EFFECT] == EFF_UNKNOWN:
        if w[APPR] != A_APPROVED:
            w[APPR] = A_PENDING  # one-time approval bound to this call and the unknown-effect set
            return [(f"tool_dispatch({i})", put(s, i, settle(w)))]
        w[APPR] = A_CONSUMED
    w[TOOL], w[CHILD], w[EXEC], w[CKPT] = TOOL_DISPATCHED, 1, w[EXEC] + 1, 0
    return [(f"tool_dispatch({i})", put(s, i, w))]


def tool_commit(s: State, i: int) -> list:
    """The real result is committed (a reconnected live child's too)."""
    w = s[ITEMS][i]
    if s[RT] != UP or w[HOLD] or w[TOOL] != TOOL_DISPATCHED:
        return []
    w = list(w)
    w[TOOL], w[CHILD], w[COMMIT], w[CKPT] = TOOL_COMMITTED, 0, w[COMMIT] + 1, 1
    return [(f"tool_commit({i})", put(s, i, settle(w)))]


def reconcile(s: State, i: int) -> list:
    """A late verifiable result or an authoritative reconciliation settles the old unknown outcome."""
    w = s[ITEMS][i]
    if s[RT] != UP or not w[OLDUNK]:
        return []
    w = list(w)
    w[OLDUNK] = 0
    return [(f"reconcile({i})", put(s, i, settle(w)))]


def turn_complete(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[HOLD] or w[TURN] != T_ACTIVE or w[PROV] or w[TOOL] == TOOL_DISPATCHED or w[APPR] == A_PENDING:
        return []
    w = list(w)
    w[TURN], w[COMMIT] = T_COMPLETED, w[COMMIT] + 1
    if w[KIND] == CHAT:
        w[DES], w[REASON] = DONE, _FINISHED_R
        return [(f"turn_complete({i})", put(s, i, w))]
    return [(f"turn_complete({i})", put(s, i, settle(w)))]


def todo_complete(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if (s[RT] != UP or w[HOLD] or w[KIND] != GOAL or w[GSTATE] != a.G[a.GoalState.ACTIVE] or w[PHASE] != PH_WORKING
            or w[DES] != RUN):
        return []
    w = list(w)
    w[PHASE], w[RESULTV] = PH_VERIFYING, w[COMMIT]
    return [(f"todo_complete({i})", put(s, i, w))]


def verify(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[HOLD] or w[PHASE] != PH_VERIFYING or w[GSTATE] != a.G[a.GoalState.ACTIVE]:
        return []
    out = []
    met = list(w)
    met[ACC], met[ACCREV] = ACC_MET, w[REV]
    current = a.achieved_allowed(w[REV], w[REV], w[RESULTV], w[COMMIT], True)
    if current:
        met[GSTATE] = a.goal_step(w[GSTATE], GE.VERIFIED_MET, True)
        met[DES], met[REASON] = DONE, _FINISHED_R
        if met[TURN] == T_ACTIVE:
            met[TURN] = T_COMPLETED
    else:
        met[PHASE] = PH_WORKING
    out.append((f"verify_met({i})", put(s, i, met)))
    unmet = list(w)
    unmet[ACC], unmet[ACCREV], unmet[PHASE] = ACC_UNMET, w[REV], PH_WORKING  # missing evidence: work on
    out.append((f"verify_unmet({i})", put(s, i, unmet)))
    return out


def wait_create(s: State, i: int) -> list:
    w = s[ITEMS][i]
    if s[RT] != UP or w[HOLD] or w[KIND] != GOAL or w[TURN] != T_ACTIVE or w[WAIT] != W_NONE or w[PROV]:
        return []
    w = list(w)
    w[WAIT], w[WAITV], w[TURN], w[PHASE], w[COMMIT] = W_LIVE, w[CV], T_COMPLETED, PH_WAITING, w[COMMIT] + 1
    w[REASON] = _WAITING_R
    return [(f"wait_create({i})", put(s, i, w))]


def notify(s: State, i: int) -> list:
    """A completion notification; a repeated one arrives after consumption and must not admit again."""
    w = s[ITEMS][i]
    if s[RT] != UP or w[WAIT] == W_NONE:
        return []
    admits = a.wait_admits(w[DES] == RUN, w[WAITV] == w[CV], w[TURN] == T_ACTIVE, w[WAIT] == W_CONSUMED)
    if not admits:
        return []  # the result is saved; nothing else changes
    w = list(w)
    w[WAIT], w[WADMITS] = W_CONSUMED, w[WADMITS] + 1
    if w[PHASE] == PH_WAITING:
        w[PHASE] = PH_WORKING
    return [(f"notify({i})", put(s, i, settle(w)))]


def stale_write(s: State, i: int) -> list:
    """The previous generation's owner writes; fencing must reject it (a rejected write changes nothing)."""
    w = s[ITEMS][i]
    if s[RT] != UP or w[GEN] < 2:
        return []
    if not a.fencing_accepts(w[GEN] - 1, w[GEN]):
        return []
    w = list(w)
    w[STALEOK] += 1
    return [(f"stale_write({i})", put(s, i, w))]


def blocker(s: State, i: int) -> list:
    """The same real blocker recurs and no independent work is left: blocked; it clears: active again."""
    w = s[ITEMS][i]
    if s[RT] != UP or w[KIND] != GOAL or w[DES] != RUN or w[TURN] == T_ACTIVE:
        return []
    blocked = a.G[a.GoalState.BLOCKED]
    w = list(w)
    if w[GSTATE] == a.G[a.GoalState.ACTIVE]:
        w[GSTATE] = a.goal_step(w[GSTATE], GE.BLOCKED)
        return [(f"blocked({i})", put(s, i, settle(w)))]
    if w[GSTATE] == blocked:
        w[GSTATE] = a.goal_step(w[GSTATE], GE.UNBLOCKED)
        return [(f"unblocked({i})", put(s, i, settle(w)))]
    return []


ITEM_HANDLERS: dict[str, Handler] = {
    "pause": pause, "resume": resume, "end": end, "approve": approve, "budget_change": budget_change,
    "revise": revise, "permission": permission, "admit": admit, "provider_request": provider_request,
    "provider_usage": provider_usage, "provider_response": provider_response, "decide_tool": decide_tool,
    "tool_dispatch": tool_dispatch, "tool_commit": tool_commit, "turn_complete": turn_complete,
    "todo_complete": todo_complete, "verify": verify, "wait_create": wait_create, "notify": notify,
    "stale_write": stale_write, "blocker": blocker, "reconcile": reconcile,
}


# --- faults and recovery (global) ------------------------------------------------------------------


def _kill(s: State, worker_only: bool, checkpoint: bool) -> State:
    items = []
    for w in s[ITEMS]:
        w = list(w)
        if w[OHOST] == s[HOSTF]:
            w[OWNER] = 0
        if not worker_only:
            w[CHILD] = 0
        if checkpoint and w[TURN] == T_ACTIVE:
            w[CKPT] = int(w[TOOL] != TOOL_DISPATCHED)  # a checkpoint covers committed effects only
        items.append(tuple(w))
    return (DOWN, s[HOSTF], s[JUMPED], s[RETRY], tuple(items))


def crash(s: State, i: int) -> list:
    if s[RT] != UP:
        return []
    return [("crash(tree_kill)", _kill(s, False, False)), ("crash(worker_kill)", _kill(s, True, False)),
            ("graceful_exit", _kill(s, False, True))]


def stop_all_exit(s: State, i: int) -> list:
    if s[RT] != UP:
        return []
    items = tuple(tuple(_stop(list(w), PAUSED, _STOPALL_R)) if w[DES] == RUN else w for w in s[ITEMS])
    return [("stop_all_exit", _kill((s[RT], s[HOSTF], s[JUMPED], s[RETRY], items), False, True))]


def _claim(s: State, w: list) -> list:
    if w[GEN] == 0:
        return w
    if w[OHOST] != s[HOSTF]:
        w[HOLD] = 1  # another host's lease is never taken over silently; the claim persists why
        if w[DES] == RUN:
            w[REASON] = a.R[ReasonCode.OWNER_ON_OTHER_HOST]
        return w
    if w[DES] != RUN or w[TURN] != T_ACTIVE:
        return w
    live = bool(w[OWNER] or w[CHILD])
    ckpt = bool(w[CKPT]) and not (w[TOOL] == TOOL_DISPATCHED and not w[CHILD])
    mode = a.recovery_mode(live, True, not w[OWNER], ckpt)
    w[HOLD] = int(mode is RecoveryMode.HOLD)
    if mode is not RecoveryMode.HOLD and not w[OWNER]:
        w[GEN], w[OWNER], w[OHOST] = a.next_generation(w[GEN]), 1, s[HOSTF]  # fence the dead owner out
    return w


def _repair(s: State, w: list) -> list:
    if w[TURN] != T_ACTIVE or w[HOLD]:
        return w
    live = bool(w[CHILD])
    if w[PROV]:  # the attempt died with the process: what it consumed is unknown, the watermark a lower bound
        w[KNOWN] += w[ATT_W]
        w[LEDGER] += w[ATT_L] + 1  # ghost: the provider finished and billed a response nobody received
        w[UNK] += 1
        w[PROV] = w[ATT_W] = w[ATT_L] = 0
    ckpt = bool(w[CKPT])
    if w[TOOL] == TOOL_DISPATCHED and not live:
        ckpt = False  # no checkpoint covers an effect whose outcome nobody saw
        if w[EFFECT] == EFF_UNKNOWN:
            # the call's outcome is unknown: recorded, never re-run; the new turn may make new calls
            w[OLDUNK], w[TOOL], w[EXEC] = 1, TOOL_NONE, 0
        else:
            w[TOOL] = TOOL_DECIDED  # a read-only call can simply run again
    mode = a.recovery_mode(live, True, True, ckpt)
    if mode is RecoveryMode.REPAIR:
        w[TURN], w[COMMIT] = T_INTERRUPTED, w[COMMIT] + 1  # stable repair key: the turn is repaired once
    return w


def _decide(s: State, w: list) -> list:
    if w[DES] != RUN:
        return w
    if w[TURN] == T_ACTIVE and not w[HOLD] and a.gate_of(w) not in GATE_OK:
        # held by a gate (approval, permission, budget, resource): the attempt does not go on; the
        # interruption is recorded as a commit point so a later admission has a fresh key
        w[TURN], w[COMMIT] = T_INTERRUPTED, w[COMMIT] + 1
    w[REASON] = a.reason_of(w)
    return w


def _recover(s: State, stop_after: int) -> State:
    s = (UP, s[HOSTF], s[JUMPED], s[RETRY], s[ITEMS])
    steps = (_claim, _repair, _decide)[: stop_after]
    items = []
    for w in s[ITEMS]:
        w = list(w)
        for step in steps:
            w = step(s, w)
        items.append(tuple(w))
    return (UP, s[HOSTF], s[JUMPED], s[RETRY], tuple(items))


def start(s: State, i: int) -> list:
    if s[RT] != DOWN:
        return []
    out = [("start", _recover(s, 3))]
    for n, point in enumerate(("recovery.claim.after", "recovery.repair.after", "recovery.decide.after"), 1):
        out.append((f"start_crash({point})", _kill(_recover(s, n), False, False)))
    return out


def downtime(s: State, i: int) -> list:
    if s[RT] != DOWN:
        return []
    out = []
    if not s[JUMPED]:
        out.append(("clock_jump(2h+)", (s[RT], s[HOSTF], 1, s[RETRY], s[ITEMS])))
    if not s[HOSTF]:
        out.append(("host_change", (s[RT], 1, s[JUMPED], s[RETRY], s[ITEMS])))
    return out


def reload(s: State, i: int) -> list:
    return [("frontend_reload", s)]


# --- Paperclip Retry ---------------------------------------------------------------------------------
# retry = (generation, failures, exhausted, now_s, next_at_s, keys_seen, active)
RG, RF, REX, RNOW, RNEXT, RKEYS, RACTIVE = range(7)


def _retry_fail(r: tuple, cooldown_s: int) -> tuple:
    failures = r[RF] + 1
    first = 0  # the first failure of the generation is time 0 of its window
    at = a.next_retry_at_ms(failures, first, r[RNOW] * 1000, 200, cooldown_s * 1000)
    if at < 0:
        return (r[RG], failures, 1, r[RNOW], -1, r[RKEYS], 0)
    return (r[RG], failures, 0, r[RNOW], at // 1000, r[RKEYS], 1)


def retry_events(s: State, i: int) -> list:
    r = s[RETRY]
    if r is None:
        return []
    out = []

    def with_r(new: tuple) -> State:
        return (s[RT], s[HOSTF], s[JUMPED], new, s[ITEMS])

    if r[RACTIVE] and r[RNEXT] >= 0:
        fired = (r[RG], r[RF], r[REX], r[RNEXT], -1, r[RKEYS], 1)
        out.append(("retry_fire", with_r(fired)))
    if r[RACTIVE] and r[RNEXT] < 0 and not r[REX]:
        out.append(("task_fail", with_r(_retry_fail(r, 0))))
        out.append(("task_fail(cooldown 25 min)", with_r(_retry_fail(r, r[RNOW] + 1500))))
    if r[RKEYS]:
        admission = a.retry_admission(True, bool(r[RACTIVE]), bool(r[REX]))
        repeated = r if admission is RetryAdmission.RETURN_EXISTING else (r[RG] + 1, 0, 0, 0, -1, r[RKEYS], 1)
        out.append(("retry_click(repeated request)", with_r(repeated)))
    if r[RKEYS] < 3:
        admission = a.retry_admission(False, bool(r[RACTIVE]), bool(r[REX]))
        if admission is RetryAdmission.NEW_GENERATION:
            new = (r[RG] + 1, 0, 0, 0, -1, r[RKEYS] + 1, 1)
        else:
            new = (r[RG], r[RF], r[REX], r[RNOW], r[RNEXT], r[RKEYS] + 1, r[RACTIVE])
        out.append(("retry_click(new key)", with_r(new)))
    return out


GLOBAL_HANDLERS: dict[str, Handler] = {
    "crash": crash, "stop_all_exit": stop_all_exit, "start": start, "downtime": downtime, "reload": reload,
    "retry": retry_events,
}

HANDLERS: dict[str, Handler] = {**ITEM_HANDLERS, **GLOBAL_HANDLERS}

# keep the imports honest for readers: these names are part of the encoding the handlers rely on
_ = (A_NONE, TOOL_COMMITTED, NO_GOAL, ACCREV, ACC)
