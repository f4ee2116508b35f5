"""The compact abstraction the explorer walks: states are flat tuples of small ints.

Why a second encoding: bounded exhaustive exploration visits hundreds of thousands of states, and
pydantic records cost microseconds each to copy. Here a state is ``(runtime, host, jumped, retry,
items)`` with each work item a flat tuple indexed by the constants below; every event is a small
function ``(state, i) -> [(label, next_state), ...]``. The decisions are not re-implemented: the
handlers call ``recoverykit.model.decisions`` (memoized where the arguments are few), so what the
explorer proves about gates, modes, keys, watermarks, fencing, retry times and Goal transitions is
about the same functions the concrete model (``transitions``) uses.

What is abstracted away (see docs/model.md): one tool call and at most one wait per item, tokens
as small integers with price 1, time only for the Retry schedule, one alternative host identity.
Fields marked *ghost* record ground truth that a runtime cannot see (the kit's witness log, the
provider's ledger, how often an action really happened): invariants compare the runtime's view
with them.
"""

from __future__ import annotations

from functools import lru_cache

from recoverykit.model import decisions as d
from recoverykit.model.catalogue import GoalState, ReasonCode, RecoveryMode

# --- encodings ---------------------------------------------------------------------------------------
RUN, PAUSED, CANCELLED, DONE = 0, 1, 2, 3
UP, DOWN = 0, 1
CHAT, GOAL = 0, 1
T_NONE, T_ACTIVE, T_COMPLETED, T_INTERRUPTED = 0, 1, 2, 3
TOOL_NONE, TOOL_DECIDED, TOOL_DISPATCHED, TOOL_COMMITTED, TOOL_UNKNOWN = 0, 1, 2, 3, 4
EFF_READ_ONLY, EFF_UNKNOWN = 0, 1
A_NONE, A_PENDING, A_APPROVED, A_CONSUMED, A_DENIED = 0, 1, 2, 3, 4
PH_WORKING, PH_WAITING, PH_VERIFYING = 0, 1, 2
W_NONE, W_LIVE, W_CONSUMED = 0, 1, 2
ACC_UNKNOWN, ACC_MET, ACC_UNMET = 0, 1, 2

REASONS: tuple[ReasonCode, ...] = tuple(ReasonCode)
R = {code: REASONS.index(code) for code in REASONS}
GOAL_STATES: tuple[GoalState, ...] = tuple(GoalState)
G = {state: GOAL_STATES.index(state) for state in GOAL_STATES}
NO_GOAL = -1

# --- item fields ---------------------------------------------------------------------------------------
FIELDS = ("kind", "desired", "cv", "reason", "turn", "commit", "last_key", "tool", "effect", "child", "exec",
          "approval", "provider", "att_w", "att_l", "known", "unknown", "ledger", "gen", "owner", "ohost",
          "gstate", "phase", "rev", "acc", "acc_rev", "limit", "spent", "restricted", "inputs", "ckpt", "perm",
          "wait", "wait_v", "wait_admits", "stale_ok", "result_v", "hold", "old_unknown")
(KIND, DES, CV, REASON, TURN, COMMIT, LASTKEY, TOOL, EFFECT, CHILD, EXEC, APPR, PROV, ATT_W, ATT_L, KNOWN, UNK,
 LEDGER, GEN, OWNER, OHOST, GSTATE, PHASE, REV, ACC, ACCREV, LIMIT, SPENT, RESTRICTED, INPUTS, CKPT, PERM,
 WAIT, WAITV, WADMITS, STALEOK, RESULTV, HOLD, OLDUNK) = range(len(FIELDS))
# ghost fields: EXEC (witness log), LEDGER/ATT_L (provider ledger), INPUTS, WADMITS, STALEOK:
# what really happened, for the invariants; the runtime's view is everything else. Facts visible in two
# consecutive states (a generation replaced, a key admitted twice) are transition invariants instead.

# Global state: (runtime, host, jumped, retry, items); retry is None or
# (generation, failures, exhausted, now_s, next_at_s, keys_seen, new_gen_without_click)
RT, HOSTF, JUMPED, RETRY, ITEMS = range(5)


def item(kind: int, *, desired: int = RUN, effect: int = EFF_UNKNOWN, limit: int = -1, **fields: int) -> tuple:
    """An item tuple with defaults: submitted once (input durable), queued, no turn yet."""
    values = dict.fromkeys(FIELDS, 0)
    values.update(kind=kind, desired=desired, cv=1, reason=R[ReasonCode.QUEUED], last_key="", effect=effect,
                  gstate=G[GoalState.ACTIVE] if kind == GOAL else NO_GOAL, limit=limit, inputs=1, ckpt=1, perm=1)
    if desired == PAUSED:
        values.update(reason=R[ReasonCode.USER_PAUSED])
        if kind == GOAL:
            values.update(gstate=G[GoalState.PAUSED])
    values.update(fields)
    return tuple(values[f] for f in FIELDS)


def field(it: tuple, name: str) -> object:
    return it[FIELDS.index(name)]


# --- memoized decisions (same functions, cached because the hot loop asks the same few questions) -----
first_gate = lru_cache(maxsize=None)(d.first_gate)
budget_status = lru_cache(maxsize=None)(d.budget_status)
recovery_mode = lru_cache(maxsize=None)(d.recovery_mode)
usage_watermark = lru_cache(maxsize=None)(d.usage_watermark)
fencing_accepts = lru_cache(maxsize=None)(d.fencing_accepts)
wait_admits = lru_cache(maxsize=None)(d.wait_admits)
retry_admission = lru_cache(maxsize=None)(d.retry_admission)
next_retry_at_ms = lru_cache(maxsize=None)(d.next_retry_at_ms)
achieved_allowed = lru_cache(maxsize=None)(d.achieved_allowed)
continuation_key = lru_cache(maxsize=None)(d.continuation_key)
next_generation = lru_cache(maxsize=None)(d.next_generation)
_goal_transition = lru_cache(maxsize=None)(d.goal_transition)
GE = d.GoalEvent
GATE_OK = (d.GATE_NONE, d.GATE_UNKNOWN_EFFECT)  # runnable; an unknown effect only restricts the turn


def goal_step(gstate: int, event: d.GoalEvent, current: bool = False) -> int:
    if gstate == NO_GOAL:
        return NO_GOAL
    return G[_goal_transition(GOAL_STATES[gstate], event, current)]


def budget_of(w: tuple) -> int:
    if w[KIND] != GOAL:
        return d.BUDGET_NONE
    # a request still open after its turn ended (stopped, interrupted) has an unknown cost so far
    orphan = 1 if w[PROV] and w[TURN] != T_ACTIVE else 0
    return budget_status(w[LIMIT], w[SPENT], w[UNK] + orphan)


def gate_of(w: tuple) -> int:
    unknown_effects = w[OLDUNK] == 1  # an earlier call of the unknown class whose outcome is unknown
    return first_gate(w[DES] != RUN, False, w[APPR] == A_PENDING, w[PERM] == 1, budget_of(w), True,
                      unknown_effects)


def reason_of(w: tuple) -> int:
    """The reason code a runnable-or-held item shows, from the decision order."""
    if w[DES] != RUN:
        return w[REASON]
    if w[HOLD]:
        return R[ReasonCode.OWNER_ON_OTHER_HOST]
    gate = gate_of(w)
    if gate in (d.GATE_NONE, d.GATE_UNKNOWN_EFFECT):
        if w[TURN] == T_ACTIVE:
            return R[ReasonCode.RUNNING]
        if (w[PHASE] == PH_WAITING and w[WAIT] == W_LIVE) or w[GSTATE] == G[GoalState.BLOCKED]:
            return R[ReasonCode.WAITING_DEPENDENCY]
        return R[ReasonCode.QUEUED]
    return R[d.GATE_REASON[gate]]


def key_of(i: int, w: tuple) -> str:
    return continuation_key(f"w{i}", w[CV], w[COMMIT])


MODE = {m: k for k, m in enumerate(RecoveryMode)}
