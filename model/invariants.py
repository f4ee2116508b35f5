"""Safety invariants over the explorer's states and transitions, each citing a contract clause.

A state invariant says something about one work item in one state (``check(state, item)``); a
transition invariant about one step (``check(label, i, before_item, after_item, before, after)``);
a Retry invariant about the Paperclip component of one step. Each returns True when it holds. The
clause id is the one in ``recoverykit.model.contract``; a test checks that every cited id exists,
and a violation is reported with the clause's own text (``broke RI-03: ...``).
"""

from __future__ import annotations

from dataclasses import dataclass

from recoverykit.model import abstract as a
from recoverykit.model.abstract import (
    APPR,
    CANCELLED,
    DES,
    DONE,
    GOAL,
    GSTATE,
    HOLD,
    HOSTF,
    KIND,
    OHOST,
    PAUSED,
    PERM,
    REASON,
    RT,
    RUN,
    T_ACTIVE,
    TURN,
    UP,
    G,
    R,
)
from recoverykit.model.catalogue import GoalState, ReasonCode
from recoverykit.model.decisions import BUDGET_EXHAUSTED, BUDGET_UNKNOWN


@dataclass(frozen=True)
class Invariant:
    """One invariant: a Python expression over the names its scope binds, citing a contract clause.

    Scopes and their names: ``state``: ``s`` (the state) and ``w`` (one work item); ``transition``:
    ``ev`` (event name), ``own`` (the event targets this item), ``pw`` / ``nw`` (the item before and
    after); ``retry``: ``ev``, ``pr`` / ``nr`` (the Paperclip Retry component before and after).
    Expressions are compiled once, each alone (to name the one that broke) and all of a scope
    together (``fused``), which the explorer evaluates on every state and edge.
    """

    name: str
    clause_id: str
    scope: str
    expr: str
    statement: str

    @property
    def check(self):
        return _compile((self,), self.scope)


_ARGS = {"state": "s, w", "transition": "ev, own, pw, nw", "retry": "ev, pr, nr"}


def _compile(invariants: tuple[Invariant, ...], scope: str):
    body = " and ".join(f"({inv.expr})" for inv in invariants) or "True"
    return eval(f"lambda {_ARGS[scope]}: {body}", _NAMESPACE)


_ACH, _CAN, _PAU, _BEX = G[GoalState.ACHIEVED], G[GoalState.CANCELLED], G[GoalState.PAUSED], \
    G[GoalState.BUDGET_EXHAUSTED]
_PERSON = {R[ReasonCode.USER_PAUSED], R[ReasonCode.USER_STOPPED_ALL]}


def _reason_has_cause(s: tuple, w: tuple) -> bool:
    r = w[REASON]
    if r in _PERSON:
        return w[DES] == PAUSED
    if r == R[ReasonCode.AWAITING_APPROVAL]:
        return w[APPR] == a.A_PENDING
    if r == R[ReasonCode.PERMISSION_REVOKED]:
        return not w[PERM]
    if r == R[ReasonCode.BUDGET_EXHAUSTED]:
        return a.budget_of(w) == BUDGET_EXHAUSTED
    if r == R[ReasonCode.BUDGET_UNKNOWN_COST]:
        return a.budget_of(w) == BUDGET_UNKNOWN
    if r == R[ReasonCode.OWNER_ON_OTHER_HOST]:
        return bool(w[HOLD]) and w[OHOST] != s[HOSTF]
    return r not in (R[ReasonCode.PAUSED_UNKNOWN_REASON], R[ReasonCode.AUTOMATIC_RECOVERY_DISABLED])


def _reason_matches(s: tuple, w: tuple) -> bool:
    if w[DES] == DONE:
        return w[REASON] == R[ReasonCode.FINISHED]
    if w[DES] == CANCELLED:
        return w[REASON] == R[ReasonCode.USER_CANCELLED]
    if s[RT] != UP or w[DES] != RUN:
        return True
    if w[HOLD]:
        return w[REASON] == R[ReasonCode.OWNER_ON_OTHER_HOST]
    if w[APPR] == a.A_PENDING:
        return w[REASON] == R[ReasonCode.AWAITING_APPROVAL]
    return (w[REASON] == R[ReasonCode.RUNNING]) == (w[TURN] == T_ACTIVE)


def _goal_agrees(s: tuple, w: tuple) -> bool:
    if w[KIND] != GOAL:
        return True
    g = w[GSTATE]
    if w[DES] == PAUSED:  # an exhausted budget outlives a pause: only a budget change clears it
        return g in (_PAU, _BEX)
    if w[DES] == CANCELLED:
        return g == _CAN
    if w[DES] == DONE:
        return g == _ACH
    return g not in (_PAU, _CAN, _ACH)


STATE_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("stopped_work_runs_no_turn", "RI-03", "state", "w[DES] == RUN or w[TURN] != T_ACTIVE",
              "paused, cancelled or finished work has no open turn"),
    Invariant("unknown_write_runs_once", "FA-15", "state", "w[EFFECT] != EFF_UNKNOWN or w[EXEC] <= 1",
              "a tool of the unknown effect class really executes at most once"),
    Invariant("input_never_reappended", "CTX-01", "state", "w[INPUTS] == 1",
              "the user's input enters exactly one request, whatever recovery does"),
    Invariant("usage_never_fabricated", "USG-05", "state", "w[KNOWN] + w[ATT_W] <= w[LEDGER] + w[ATT_L]",
              "known usage never exceeds what the provider billed (a watermark, never a sum)"),
    Invariant("usage_counted_once_or_unknown", "USG-10", "state", "w[UNK] > 0 or w[KNOWN] == w[LEDGER]",
              "every billed token is in exactly one receipt, or a receipt says its usage is unknown"),
    Invariant("achieved_only_when_current_acceptance_met", "GOAL-04", "state",
              "w[GSTATE] != _ACH or (w[ACC] == ACC_MET and w[ACCREV] == w[REV])",
              "an achieved Goal has every requirement met for its current revision"),
    Invariant("goal_state_agrees_with_run_intent", "GOAL-01", "state", "_goal_agrees(s, w)",
              "a Goal's state and its run intent's desired_state tell the same story"),
    Invariant("reason_code_has_a_real_cause", "RI-08", "state", "_reason_has_cause(s, w)",
              "a reason that needs a person names a cause that exists; a restart alone is never one"),
    Invariant("reason_code_matches_status", "UI-05", "state", "_reason_matches(s, w)",
              "running work says running; finished, cancelled and waiting work says why"),
    Invariant("stale_generation_write_rejected", "OWN-06", "state", "w[STALEOK] == 0",
              "no write from an older lease generation was accepted"),
    Invariant("notification_admits_once", "WAIT-02", "state", "w[WADMITS] <= 1",
              "a durable wait's notifications admit at most one continuation"),
)

_FAULTS = frozenset({"crash", "graceful_exit", "start", "start_crash", "clock_jump", "host_change"})

TRANSITION_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("paused_leaves_only_by_user", "RI-03", "transition",
              "pw[DES] != PAUSED or nw[DES] == PAUSED or (own and ev in ('resume', 'end'))",
              "paused work leaves paused only through the user's resume or end"),
    Invariant("finished_and_cancelled_are_final", "RI-03", "transition",
              "pw[DES] not in (CANCELLED, DONE) or nw[DES] == pw[DES]",
              "cancelled or finished work never runs again"),
    Invariant("restart_is_never_a_pause", "CTL-03", "transition", "ev not in _FAULTS or nw[DES] == pw[DES]",
              "a crash, exit, start, clock jump or host change never changes desired_state"),
    Invariant("no_hidden_expiry", "RI-05", "transition", "ev != 'clock_jump' or nw == pw",
              "downtime past two hours changes no run intent"),
    Invariant("reload_changes_nothing", "CTL-01", "transition", "ev != 'frontend_reload' or nw == pw",
              "a frontend reload only disconnects the client"),
    Invariant("generation_monotone", "OWN-01", "transition", "nw[GEN] >= pw[GEN]",
              "lease generations only grow, so dead owners stay fenced out"),
    Invariant("no_silent_cross_host_takeover", "OWN-03", "transition",
              "nw[GEN] == pw[GEN] or pw[GEN] == 0 or nw[OHOST] == pw[OHOST]",
              "a new generation never moves a lease to another host identity"),
    Invariant("live_owner_only_reattached", "REC-12", "transition", "nw[GEN] == pw[GEN] or not pw[OWNER]",
              "recovery never replaces a live owner with a new generation"),
    Invariant("continuation_admitted_once", "REC-06", "transition",
              "not (own and ev == 'admit') or nw[LASTKEY] != pw[LASTKEY]",
              "no continuation key admits a second turn"),
    Invariant("restricted_write_needs_one_time_approval", "APR-02", "transition",
              "not (nw[TOOL] == TOOL_DISPATCHED != pw[TOOL] and pw[RESTRICTED] and pw[EFFECT] == EFF_UNKNOWN)"
              " or (pw[APPR] == A_APPROVED and nw[APPR] == A_CONSUMED)",
              "after unknown effects a write runs only with a granted approval, consumed by that dispatch"),
    Invariant("known_usage_monotone", "USG-05", "transition",
              "nw[KNOWN] >= pw[KNOWN] and (not (pw[PROV] and nw[PROV]) or nw[ATT_W] >= pw[ATT_W])",
              "a usage watermark never goes down"),
    Invariant("no_admission_over_budget", "USG-16", "transition",
              "not (own and ev == 'admit') or budget_of(pw) in (0, 1)",
              "no new turn is admitted while the hard budget is exhausted or the cost unknown"),
    Invariant("revision_voids_acceptance", "GOAL-02", "transition",
              "not (own and ev == 'revise') or nw[ACC] == ACC_UNKNOWN",
              "an objective revision invalidates earlier acceptance"),
    Invariant("goal_terminal_absorbing", "GOAL-06", "transition",
              "pw[GSTATE] not in (_ACH, _CAN) or nw[GSTATE] == pw[GSTATE]",
              "achieved and cancelled Goals are never reopened"),
    Invariant("goal_paused_leaves_only_by_resume", "RI-03", "transition",
              "pw[GSTATE] != _PAU or nw[GSTATE] == _PAU or (own and ev in ('resume', 'end'))",
              "a paused Goal leaves paused only through the user's resume (or end)"),
    Invariant("goal_budget_exhausted_leaves_only_by_budget_change", "RI-03", "transition",
              "pw[GSTATE] != _BEX or nw[GSTATE] == _BEX or (own and ev in ('budget_change', 'end'))",
              "a budget_exhausted Goal leaves only through an explicit budget change (or end)"),
)

# Paperclip Retry: r = (generation, failures, exhausted, now_s, next_at_s, keys_seen, active)
RETRY_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("retry_budget_never_replenished", "RTY-30", "retry", "nr[0] != pr[0] or nr[1] >= pr[1]",
              "within a generation the failure count never goes down"),
    Invariant("new_generation_only_by_deliberate_click", "RTY-06", "retry",
              "nr[0] == pr[0] or (ev == 'retry_click(new key)' and pr[2] == 1)",
              "only a new deliberate click after exhaustion opens a generation"),
    Invariant("at_most_five_retries", "RTY-26", "retry", "nr[1] <= 6 and (nr[1] < 6 or nr[4] < 0)",
              "an initial attempt and at most five scheduled retries"),
    Invariant("retry_within_window", "RTY-28", "retry", "nr[4] <= 1800",
              "no retry is scheduled past 30 minutes after the first failure"),
)

ALL_INVARIANTS: tuple[Invariant, ...] = STATE_INVARIANTS + TRANSITION_INVARIANTS + RETRY_INVARIANTS

_NAMESPACE: dict = {name: getattr(a, name) for name in dir(a) if name.isupper()}
_NAMESPACE.update(budget_of=a.budget_of, _goal_agrees=_goal_agrees, _reason_has_cause=_reason_has_cause,
                  _reason_matches=_reason_matches, _FAULTS=_FAULTS, _ACH=_ACH, _CAN=_CAN, _PAU=_PAU, _BEX=_BEX)


def fused(scope: str, invariants: tuple[Invariant, ...] | None = None):
    """One compiled function checking every invariant of ``scope`` at once (True when all hold)."""
    chosen = tuple(inv for inv in (invariants or ALL_INVARIANTS) if inv.scope == scope)
    return _compile(chosen, scope)


def cited_clause_ids() -> frozenset[str]:
    return frozenset(inv.clause_id for inv in ALL_INVARIANTS)
