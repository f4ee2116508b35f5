"""The Goal profile judged on the kit's evidence: who asked the provider what, and when, against what the Goal did.

A Goal is tied to its provider script by the tag the kit put in its objective (``goal_create``), so the ledger
tells its worker requests from its verifier requests (``role``, from ``X-Recoverykit-Role: verifier``), the tools
each offered, and what the scripted worker and verifier answered (``text_sent``). The kit's history says when it
created, revised, paused, resumed, ended a Goal or changed its budget. Checks:

- ``check_achieved_was_verified`` (kit): a Goal observed achieved had, before that, a delivered verifier request
  (ACC-06: never the worker's word alone) started after its last revision (GOAL-04, GOAL-02) and after its last
  Pause / Resume / End / budget change (GOAL-05), whose reply called every requirement met with evidence (ACC-10);
  after a restart the same holds (FA-08). Nothing of its script is asked after it was achieved (GOAL-06).
- ``check_verifier_read_only`` (kit): every verifier request offers only tools the kit registered read-only or
  state-probe (ACC-05).
- ``check_no_second_judge`` (kit): a verifier request follows a worker answer that submitted a candidate or
  finished Todo (``[[goal:candidate]]`` / ``[[goal:done``), never an ordinary work turn (ACC-03).
- ``check_verifier_text_stays_internal`` (kit): no later request carries the verifier's report as a message (UI-06).
- ``check_objective_kept`` (kit): the Goal's first worker request carries its objective verbatim (ACC-01).
- ``check_budget_admission`` (kit): under a hard token budget, no request after a response whose usage the runtime
  could not read, until a budget change (USG-16); none after the reported usage reached the limit (USG-17); a
  Goal created without a budget is never stopped for one (USG-15); a verifier request is paid admission too, so one
  over the budget breaks ACC-09 as well (verification keeps the budget rules).
- ``check_blocked`` (kit): a Goal observed blocked had, in its last two worker answers, the same blocker and no
  Todo left that does not wait on it (GOAL-07); a Goal stopped with no blocker reported at all was capped by a
  round count (GOAL-09).
- ``check_goal_flags`` (self-reported): the backend's can_resume / can_verify / can_end agree with the state (UI-04);
  working / waiting / verifying are phases of a Goal that works, never of a paused or terminal one (GOAL-01).
- ``check_receipt_revision`` (self-reported receipts, kit times): a receipt keeps the revision its request was sent
  under, also when it settles after a revision (USG-08); a request sent after a revision was acknowledged is for
  that revision, never a continuation of the old one (GOAL-03).
- ``check_chat_not_attributed`` (self-reported receipts): ordinary chat the kit submitted beside a paused Goal is
  attributed to no Goal (USG-02).

The worker's Goal actions are the kit's scripted directives (docs/adapter-guide.md, "Goals").
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement, _result, kit_evidence
from recoverykit.conformance.history import restarts
from recoverykit.conformance.provider_ledger import Call, calls
from recoverykit.conformance.provider_script import SCRIPT_TAG_RE, VERIFIER
from recoverykit.conformance.registrations import SAFE, registry_at
from recoverykit.model.catalogue import Verdict

DIRECTIVE_RE = re.compile(r"\[\[goal:([a-z_]+)(?:\s+([^\]]*))?\]\]")
CONTROLS = ("pause", "resume", "end", "budget_set", "goal_update")


@dataclass
class GoalRun:
    """One Goal the kit created, with its script, its controls and the provider calls of its script."""

    script: str
    goal_id: str
    work_id: str
    created: float
    budget: dict | None
    revision: int = 1  # the first revision, as goal_create_ok said
    controls: list[tuple[str, float, dict]] = field(default_factory=list)  # (op, invoke time, fields), acknowledged
    # (op, invoke time, fields) of controls answered by an indefinite error or never: they may have happened, or
    # may still (``intent``): an excuse for what only a control explains, never a control the Goal must follow
    maybe: list[tuple[str, float, dict]] = field(default_factory=list)
    worker: list[Call] = field(default_factory=list)
    verifier: list[Call] = field(default_factory=list)

    def last(self, ops: tuple[str, ...], before: float) -> float:
        return max((t for op, t, _ in self.controls if op in ops and t < before), default=float("-inf"))


def goal_runs(ev: Evidence) -> list[GoalRun]:
    out: dict[str, GoalRun] = {}
    by_work: dict[str, GoalRun] = {}
    for invoke, done in ev.history.completions():
        if invoke.f == "goal_create" and done is not None and done.type == "ok":
            tags = SCRIPT_TAG_RE.findall(invoke.value.get("objective", ""))
            if tags and "goal_id" in done.value:
                g = GoalRun(tags[0], done.value["goal_id"], done.value["work_id"], invoke.time,
                            invoke.value.get("budget"), int(done.value.get("revision") or 0))
                out[g.goal_id] = by_work[g.work_id] = g
    for invoke, done in ev.history.completions():
        if invoke.f in CONTROLS and (done is None or done.type != "fail"):
            g = out.get(invoke.value.get("goal_id", "")) or by_work.get(invoke.value.get("work_id", ""))
            if g is not None:
                (g.controls if done is not None and done.type == "ok" else g.maybe).append(
                    (invoke.f, invoke.time, invoke.value))
    by_script = {g.script: g for g in out.values()}
    for c in calls(ev.ledger):
        g = by_script.get(c.request.get("script_id") or "")
        if g is not None:
            (g.verifier if c.request.get("role") == VERIFIER else g.worker).append(c)
    return list(out.values())


def has_goals(ev: Evidence) -> bool:
    """The run created or observed a Goal (else the Goal checks say nothing: an adapter without the profile keeps
    its clauses not applicable)."""
    return any(invoke.f == "goal_create" for invoke in ev.history.ops if invoke.type == "invoke") or any(
        o.snapshot.get("goals") for o in ev.snapshots())


def first_seen(ev: Evidence, goal_id: str, states: set[str]) -> tuple[float, dict] | None:
    for o in ev.snapshots():
        for g in o.snapshot.get("goals") or []:
            if g.get("goal_id") == goal_id and g.get("state") in states:
                return o.time, g
    return None


def _text(c: Call) -> str:
    return (c.response or {}).get("text_sent") or ""


def all_met_with_evidence(text: str) -> bool:
    try:
        said = json.loads(text).get("requirements")
    except (ValueError, AttributeError):
        return False
    return bool(said) and isinstance(said, dict) and all(
        isinstance(v, dict) and v.get("verdict") == "met" and v.get("evidence") for v in said.values())


def _delivered_before(cs: list[Call], t: float) -> list[Call]:
    return [c for c in cs if c.delivered and c.response["time"] < t]


@kit_evidence
def check_achieved_was_verified(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems: dict[str, list[str]] = {k: [] for k in ("GOAL-04", "ACC-06", "GOAL-02", "GOAL-05", "ACC-10", "GOAL-06",
                                                      "FA-08")}
    judged = {k: 0 for k in problems}
    restarted = bool(restarts(ev.history))
    for g in goal_runs(ev):
        seen = first_seen(ev, g.goal_id, {"achieved"})
        if seen is None:
            continue
        at, _ = seen
        asked = _delivered_before(g.verifier, at)
        judged["GOAL-04"] += 1
        judged["ACC-06"] += 1
        judged["FA-08"] += restarted
        if not asked:
            problems["ACC-06"].append(f"Goal {g.goal_id} was achieved with no verifier request: the worker's word")
            problems["GOAL-04"].append(f"Goal {g.goal_id} was achieved with no verifier request")
            if restarted:
                problems["FA-08"].append(f"Goal {g.goal_id} was achieved after a restart with no verifier request")
            continue
        revised = g.last(("goal_update",), at)
        current = [c for c in asked if c.request["time"] > revised]
        if revised > float("-inf"):
            judged["GOAL-02"] += 1
        if not current:
            problems["GOAL-04"].append(f"Goal {g.goal_id} was achieved, but no verifier request was sent for its "
                                       "current revision")
            problems["GOAL-02"].append(f"Goal {g.goal_id} was achieved on an acceptance made before its revision")
            continue
        met = [c for c in current if all_met_with_evidence(_text(c))]
        if any(not all_met_with_evidence(_text(c)) for c in current):
            judged["ACC-10"] += 1
        if not met:
            problems["ACC-10"].append(f"Goal {g.goal_id} was achieved, but no verifier reply for its revision called "
                                      "every requirement met with evidence")
            continue
        controlled = g.last(("pause", "resume", "end", "budget_set"), at)
        if controlled > float("-inf"):
            judged["GOAL-05"] += 1
            if not any(c.request["time"] > controlled for c in met):
                problems["GOAL-05"].append(f"Goal {g.goal_id} was achieved on an acceptance made before its last "
                                           "control (Pause, Resume, End or a budget change)")
        later = [c for c in g.worker + g.verifier if c.request["time"] > at]
        judged["GOAL-06"] += 1
        if later:
            problems["GOAL-06"].append(f"Goal {g.goal_id} was asked about again after it was achieved "
                                       f"({len(later)} request(s), e.g. {later[0].request.get('request_id')})")
    out = []
    for clause_id, found in problems.items():
        out += _judgement(clause_id, found, judged[clause_id], "no achieved Goal shows it",
                          f"{judged[clause_id]} achieved Goal(s) checked against the verifier requests")
    return out


@kit_evidence
def check_verifier_read_only(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems, n = [], 0
    for g in goal_runs(ev):
        for c in g.verifier:
            n += 1
            registry = registry_at(ev.history, c.request["time"])
            unsafe = [t for t in c.request.get("tools_offered") or [] if registry.get(t, "unknown") not in SAFE]
            if unsafe:
                problems.append(f"verifier request {c.request.get('request_id')} of Goal {g.goal_id} offered tools "
                                f"that are not read-only: {unsafe}")
    return _judgement("ACC-05", problems, n, "no verifier request", f"{n} verifier request(s), read-only")


def _submits_or_finishes(text: str) -> bool:
    return any(name in ("candidate", "done") for name, _ in DIRECTIVE_RE.findall(text))


@kit_evidence
def check_no_second_judge(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems, n = [], 0
    for g in goal_runs(ev):
        for v in g.verifier:
            n += 1
            before = _delivered_before(g.worker, v.request["time"])
            if before and not _submits_or_finishes(_text(before[-1])):
                problems.append(f"verifier request {v.request.get('request_id')} of Goal {g.goal_id} followed an "
                                "ordinary work turn (no candidate, no Todo finished)")
    return _judgement("ACC-03", problems, n, "no verifier request", f"{n} verifier request(s), each after a candidate")


@kit_evidence
def check_verifier_text_stays_internal(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems, n = [], 0
    for g in goal_runs(ev):
        for v in g.verifier:
            text = _text(v)
            if not v.delivered or not text:
                continue
            n += 1
            sha = hashlib.sha256(text.encode()).hexdigest()[:16]
            for c in g.worker + g.verifier:
                if c.request["time"] <= v.response["time"]:
                    continue
                if any(m.get("sha") == sha or (m.get("head") and m["head"][:60] == text[:60])
                       for m in c.request.get("messages") or [] if m.get("role") != "system"):
                    problems.append(f"request {c.request.get('request_id')} carries the verifier's report of "
                                    f"{v.request.get('request_id')} as a chat message")
                    break
    return _judgement("UI-06", problems, n, "no verifier reply was delivered",
                      f"{n} verifier report(s), none appended to the chat")


@kit_evidence
def check_objective_kept(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems, n = [], 0
    objectives = {}
    for invoke, done in ev.history.completions():
        if invoke.f == "goal_create" and done is not None and done.type == "ok":
            objectives[done.value.get("goal_id")] = invoke.value.get("objective", "")
    for g in goal_runs(ev):
        if not g.worker or g.goal_id not in objectives:
            continue
        n += 1
        sha = hashlib.sha256(objectives[g.goal_id].encode()).hexdigest()[:16]
        first = g.worker[0].request.get("messages") or []
        if not any(m.get("role") == "user" and m.get("sha") == sha for m in first):
            problems.append(f"Goal {g.goal_id}'s first worker request does not carry its objective verbatim")
    return _judgement("ACC-01", problems, n, "no Goal reached its first worker request",
                      f"{n} Goal(s) sent their objective verbatim")


def _usage_tokens(c: Call) -> int | None:
    u = c.usage_reported
    return None if not u else int(u.get("total_tokens") or (u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)))


@kit_evidence
def check_budget_admission(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems: dict[str, list[str]] = {"USG-16": [], "USG-17": [], "USG-15": [], "ACC-09": []}
    judged = {k: 0 for k in problems}
    for g in goal_runs(ev):
        every = sorted(g.worker + g.verifier, key=lambda c: c.request["time"])
        limit = (g.budget or {}).get("max_tokens")
        unlimited = all((g.budget or {}).get(k) is None for k in ("max_tokens", "max_cost_usd", "max_active_s"))
        if unlimited and not any(op == "budget_set" for op, _, _ in g.controls):
            judged["USG-15"] += 1
            stopped = first_seen(ev, g.goal_id, {"budget_exhausted"})
            paused = [x for o in ev.snapshots() for x in o.snapshot.get("goals") or []
                      if x.get("goal_id") == g.goal_id and str(x.get("reason_code") or "").startswith("budget")]
            if stopped or paused:
                problems["USG-15"].append(f"Goal {g.goal_id} was created without a budget, yet stopped for one")
        if limit is None:
            continue
        spent, unknown_at, exhausted_at = 0, None, None
        for c in every:
            t = c.request["time"]
            changed = g.last(("budget_set",), t)
            if any(op == "budget_set" and s < t for op, s, _ in g.maybe):
                changed = float("inf")  # a budget change that may have happened (indefinite), then or since
            if unknown_at is not None and changed < unknown_at:
                problems["USG-16"].append(f"request {c.request.get('request_id')} of Goal {g.goal_id} was admitted "
                                          "after a response whose usage it could not read, with no budget change")
            if exhausted_at is not None and changed < exhausted_at:
                problems["USG-17"].append(f"request {c.request.get('request_id')} of Goal {g.goal_id} was admitted "
                                          f"after the reported usage reached its {limit}-token budget")
                if c.request.get("role") == VERIFIER:
                    problems["ACC-09"].append(f"verifier request {c.request.get('request_id')} of Goal {g.goal_id} "
                                              "was admitted over the Goal's budget")
            if c.response is None:
                continue
            tokens = _usage_tokens(c)
            if c.response.get("status") == 200 and tokens is None:
                unknown_at = unknown_at or c.response["time"]
                judged["USG-16"] += 1
            elif tokens is not None:
                spent += tokens
                if spent >= limit and exhausted_at is None:
                    exhausted_at = c.response["time"]
                    judged["USG-17"] += 1
                    judged["ACC-09"] += any(_submits_or_finishes(_text(w)) for w in g.worker if w is c)
    out = []
    for clause_id, found in problems.items():
        out += _judgement(clause_id, found, judged[clause_id], "no Goal reached that budget condition",
                          f"{judged[clause_id]} Goal budget condition(s) honoured")
    return out


def _todo_state(texts: list[str]) -> tuple[set[str], dict[str, str]]:
    """Open Todo items and what each waits on, from the worker's directives in order."""
    open_items: set[str] = set()
    waits: dict[str, str] = {}
    for text in texts:
        for name, args in DIRECTIVE_RE.findall(text):
            words = args.split()
            if name == "todo" and words:
                open_items.add(words[0])
            elif name in ("done", "drop") and words:
                open_items.discard(words[0])
                waits.pop(words[0], None)
            elif name == "blocker" and words:
                for w in words[1:]:
                    if w.startswith("on="):
                        waits[w[3:]] = words[0]
    return open_items, waits


def _blocker(text: str) -> str | None:
    return next((args.split()[0] for name, args in DIRECTIVE_RE.findall(text) if name == "blocker" and args.split()),
                None)


@kit_evidence
def check_blocked(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems: dict[str, list[str]] = {"GOAL-07": [], "GOAL-09": []}
    n = 0
    for g in goal_runs(ev):
        seen = first_seen(ev, g.goal_id, {"blocked"})
        if seen is None:
            continue
        n += 1
        texts = [_text(c) for c in _delivered_before(g.worker, seen[0])]
        last_two = [_blocker(t) for t in texts[-2:]]
        if not texts or last_two[-1] is None:
            problems["GOAL-09"].append(f"Goal {g.goal_id} was blocked though its worker reported no blocker "
                                       f"(after {len(texts)} turn(s): a round count is no evidence of blocking)")
            continue
        if len(last_two) < 2 or last_two[0] != last_two[1]:
            problems["GOAL-07"].append(f"Goal {g.goal_id} was blocked on {last_two[-1]!r}, which did not recur in "
                                       "consecutive turns")
        open_items, waits = _todo_state(texts)
        free = sorted(i for i in open_items if i not in waits)
        if free:
            problems["GOAL-07"].append(f"Goal {g.goal_id} was blocked with independent work left: {free}")
    out = []
    for clause_id, found in problems.items():
        out += _judgement(clause_id, found, n, "no Goal was blocked", f"{n} blocked Goal(s) checked")
    return out


def check_goal_flags(ev: Evidence) -> list[ClauseResult]:
    """UI-04 on the flags; GOAL-01 on state versus phase: a phase is worked in, so only an active (or blocked)
    Goal has one; a paused or terminal Goal has none."""
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems, phases, n = [], [], 0
    for o in ev.snapshots():
        for g in o.snapshot.get("goals") or []:
            n += 1
            state = g.get("state")
            if (g.get("phase") is not None) != (state in ("active", "blocked", "budget_exhausted")):
                phases.append(f"Goal {g.get('goal_id')} is {state} in phase {g.get('phase')}")
            terminal = state in ("achieved", "cancelled")
            wrong = []
            if terminal and (g.get("can_end") or g.get("can_resume") or g.get("can_verify")):
                wrong.append("a terminal Goal offers End, Resume or verification")
            if state == "active" and not g.get("can_end"):
                wrong.append("an active Goal cannot be ended")
            if state == "budget_exhausted" and g.get("can_resume"):
                wrong.append("Resume is offered on an exhausted budget, which only a budget change leaves")
            if state in ("paused", "blocked", "budget_exhausted") and not g.get("reason_code"):
                wrong.append(f"a {state} Goal carries no reason_code")
            if wrong:
                problems.append(f"Goal {g.get('goal_id')} ({state}): {'; '.join(wrong)}")
    return (_judgement("UI-04", sorted(set(problems)), n, "no Goal observed", f"{n} Goal observation(s) consistent")
            + _judgement("GOAL-01", sorted(set(phases)), n, "no Goal observed",
                         f"{n} Goal observation(s): phases only while it works"))


def check_receipt_revision(ev: Evidence) -> list[ClauseResult]:
    """USG-08: a receipt keeps the revision its request was sent under. GOAL-03: a request sent after the kit's
    revision was acknowledged is for that revision or a later one (the receipt's attribution is the runtime's
    word for which version a request served): a continuation submitted for an older version is stale."""
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems: dict[str, list[str]] = {"USG-08": [], "GOAL-03": []}
    judged = {k: 0 for k in problems}
    runs = {g.work_id: g for g in goal_runs(ev)}
    final = ev.history.final_observation()
    receipts = (final.snapshot.get("usage_receipts") or []) if final else []
    acked = {g.goal_id: sorted(done.time for invoke, done in ev.history.completions()
                               if invoke.f == "goal_update" and done is not None and done.type == "ok"
                               and invoke.value.get("goal_id") == g.goal_id) for g in runs.values()}
    for g in runs.values():
        sent = {c.request.get("request_id"): c for c in g.worker + g.verifier}
        sent.update({c.response_id: c for c in g.worker + g.verifier if c.response_id})
        revisions = sorted(t for op, t, _ in g.controls if op == "goal_update")
        for r in receipts:
            c = sent.get(r.get("request_id"))
            if r.get("work_id") != g.work_id or c is None or r.get("revision") is None:
                continue
            expected = g.revision + sum(1 for t in revisions if t < c.request["time"])
            current = g.revision + sum(1 for t in acked[g.goal_id] if t < c.request["time"])
            judged["USG-08"] += 1
            judged["GOAL-03"] += current > g.revision
            if r.get("goal_id") == g.goal_id and r["revision"] < current:
                problems["GOAL-03"].append(
                    f"request {c.request.get('request_id')} of Goal {g.goal_id} was sent after revision {current} "
                    f"was acknowledged, for revision {r['revision']}: a continuation of a version no longer current")
            elif r.get("goal_id") != g.goal_id or r["revision"] != expected:
                problems["USG-08"].append(f"receipt {r.get('receipt_id')} is attributed to revision {r['revision']} "
                                          f"of {r.get('goal_id')}, but its request was sent under revision "
                                          f"{expected} of {g.goal_id}")
    if not any(op == "goal_update" for g in runs.values() for op, _, _ in g.controls):
        return [_result(c, Verdict.UNKNOWN, "no Goal was revised") for c in problems]
    return (_judgement("USG-08", problems["USG-08"], judged["USG-08"], "no receipt of a revised Goal",
                       f"{judged['USG-08']} receipt(s) keep their revision")
            + _judgement("GOAL-03", problems["GOAL-03"], judged["GOAL-03"], "no request after a revision",
                         f"{judged['GOAL-03']} request(s) after a revision, each for the current version"))


def check_chat_not_attributed(ev: Evidence) -> list[ClauseResult]:
    """USG-02: a receipt of an ordinary chat request the kit submitted names no Goal."""
    if not has_goals(ev):
        return []
    chat = {done.value["work_id"] for invoke, done in ev.history.completions()
            if invoke.f == "submit" and done is not None and done.type == "ok" and "work_id" in done.value}
    final = ev.history.final_observation()
    receipts = [r for r in (final.snapshot.get("usage_receipts") or []) if r.get("work_id") in chat] if final else []
    problems = [f"receipt {r.get('receipt_id')} of ordinary chat {r.get('work_id')} is attributed to Goal "
                f"{r.get('goal_id')}" for r in receipts if r.get("goal_id") is not None]
    return _judgement("USG-02", problems, len(receipts), "no receipt of ordinary chat beside a Goal",
                      f"{len(receipts)} chat receipt(s) beside a Goal, none attributed to it")


GOAL_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (
    check_achieved_was_verified, check_verifier_read_only, check_no_second_judge, check_verifier_text_stays_internal,
    check_objective_kept, check_budget_admission, check_blocked, check_goal_flags, check_receipt_revision,
    check_chat_not_attributed)

__all__ = ["GOAL_CHECKS", "GoalRun", "goal_runs"]
