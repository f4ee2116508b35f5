"""The Goal records a runtime keeps beside its state (protocol 1.3, optional ``goals`` fields), judged against
what the kit asked and when.

``checks_goals`` judges a Goal's path on the provider ledger; this module judges what the snapshot says a Goal
keeps: its requirements, the current acceptance per requirement, its terminal record and its active time. Each
needs an optional field of ``Goal`` (``requirements``, ``terminal``, ``active_time_s``); a runtime that sends
null leaves the clause unknown, never valid. Checks:

- ``check_requirements_kept`` (self-reported requirements, the kit's own objectives and revisions): every
  requirement the kit's objective named (``[[req:ID]]``, else ``objective``) stays listed for the Goal's whole
  life, whatever the worker did to its Todo (ACC-02); one is waived only after a ``goal_update`` the kit sent
  with a reason, whose objective leaves it out, and with that reason (ACC-11).
- ``check_acceptance_per_requirement`` (kit: the verifier replies are the kit's script): the verdicts shown for
  the current revision are what one delivered verifier reply for that revision said, requirement by requirement,
  and a requirement shown met cites the evidence references that reply gave (ACC-07).
- ``check_evidence_versioned`` (self-reported): every evidence reference carries a version or content digest
  (ACC-08).
- ``check_terminal_record`` (self-reported): a terminal record, once shown, is shown unchanged in every later
  observation, also after a later Goal of the same session ends (GOAL-10).
- ``check_active_time`` (self-reported time, the kit's clock and faults): active time never decreases (recovery
  does not reset it); it does not grow between two observations in which the Goal was not running (paused,
  blocked, terminal, exhausted) with no Resume or budget change between (pauses are excluded); it grows by no more
  than the kit's clock moved minus the downtime between them (USG-11); across a kill, no more than that either:
  the vanished executor's interval ends at its last heartbeat, not when the crash was found (USG-12), which a
  restart with a clock jump makes plain.
- ``check_time_limit`` (kit: the ledger, the limits the kit set; the runtime's active time): under an explicit
  time limit, no paid request once the limit is observed spent, or cannot be verified (active time null), until
  the kit changes the budget (USG-14).
- ``check_live_wait`` (kit: the external operation, its notification and the ledger are the kit's): no model turn
  of a Goal while it waits on a live handle, and the phase it shows meanwhile is ``waiting`` (GOAL-08).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement, kit_evidence
from recoverykit.conformance.checks_goals import GoalRun, goal_runs, has_goals
from recoverykit.conformance.history import restarts
from recoverykit.conformance.provider_ledger import Call

REQ_RE = re.compile(r"\[\[req:([A-Za-z0-9_.\-]+)\]\]")
NOT_RUNNING = ("paused", "blocked", "achieved", "cancelled", "budget_exhausted")
TIME_SLACK_S = 1.0  # observation latency: the kit stamps an observation when its reply arrives
EPSILON_S = 0.002  # active time is reported to the millisecond


def named_requirements(objective: str) -> set[str]:
    """The requirements the kit's objective names (docs/adapter-guide.md, "Goals")."""
    return set(REQ_RE.findall(objective)) or {"objective"}


def _observed(ev: Evidence, goal_id: str) -> list[tuple[float, dict]]:
    return [(o.time, g) for o in ev.snapshots() for g in o.snapshot.get("goals") or [] if g.get("goal_id") == goal_id]


def _updates(ev: Evidence, g: GoalRun) -> list[tuple[float, float, dict]]:
    """The kit's acknowledged goal_update requests for ``g``: (invoke time, completion time, fields)."""
    return [(invoke.time, done.time, invoke.value) for invoke, done in ev.history.completions()
            if invoke.f == "goal_update" and done is not None and done.type == "ok"
            and invoke.value.get("goal_id") == g.goal_id]


def _objective(ev: Evidence, g: GoalRun) -> str:
    return next((invoke.value.get("objective", "") for invoke, done in ev.history.completions()
                 if invoke.f == "goal_create" and done is not None and done.type == "ok"
                 and done.value.get("goal_id") == g.goal_id), "")


def check_requirements_kept(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems: dict[str, list[str]] = {"ACC-02": [], "ACC-11": []}
    judged = {k: 0 for k in problems}
    for g in goal_runs(ev):
        named = named_requirements(_objective(ev, g))
        updates = _updates(ev, g)
        for t, goal in _observed(ev, g.goal_id):
            listed = goal.get("requirements")
            if listed is None:
                continue
            shown = {r.get("req_id"): r for r in listed}
            judged["ACC-02"] += 1
            for req_id in sorted(named - set(shown)):
                problems["ACC-02"].append(f"requirement {req_id!r} of Goal {g.goal_id} is no longer listed (the "
                                          "kit never revised it away)")
            before = [u for u in updates if u[0] < t]
            judged["ACC-11"] += bool(before)
            for req_id, r in shown.items():
                reason = r.get("waived_reason")
                if reason is None:
                    continue
                waivers = [fields for _, _, fields in before if fields.get("reason")
                           and req_id not in named_requirements(fields.get("objective", ""))]
                if not any(fields["reason"] == reason for fields in waivers):
                    problems["ACC-11"].append(
                        f"requirement {req_id!r} of Goal {g.goal_id} is waived ({reason!r}) with no revision of "
                        "the kit's that left it out with that reason")
    out = []
    for clause_id, found in problems.items():
        out += _judgement(clause_id, sorted(set(found)), judged[clause_id], "no Goal's requirements observed"
                          + (" after a revision" if clause_id == "ACC-11" else ""),
                          f"{judged[clause_id]} observation(s) of a Goal's requirements")
    return out


def _said(c: Call) -> dict[str, dict] | None:
    try:
        said = json.loads((c.response or {}).get("text_sent") or "").get("requirements")
    except (ValueError, AttributeError):
        return None
    return said if isinstance(said, dict) else None


def _agrees(shown: list[dict], said: dict[str, dict]) -> bool:
    """The verdicts shown are this reply's: the same verdict per requirement (met without evidence may be shown
    unknown, never met), and a met requirement cites the references the reply gave."""
    for r in shown:
        verdict = r.get("verdict")
        if verdict is None or r.get("waived_reason") is not None:
            continue
        entry = said.get(r.get("req_id")) if isinstance(said.get(r.get("req_id")), dict) else {}
        cited = {x for x in entry.get("evidence") or [] if isinstance(x, str)}
        refs = {e.get("ref") for e in r.get("evidence") or []}
        if verdict == "met":
            if entry.get("verdict") != "met" or not refs or not refs <= cited:
                return False
        elif verdict == "unknown":
            if entry.get("verdict") not in ("unknown", None) and not (entry.get("verdict") == "met" and not cited):
                return False
        elif verdict != entry.get("verdict"):
            return False
    return True


@kit_evidence
def check_acceptance_per_requirement(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems: list[str] = []
    judged = 0
    for g in goal_runs(ev):
        updates = sorted(u[0] for u in _updates(ev, g))
        for t, goal in _observed(ev, g.goal_id):
            shown = [r for r in goal.get("requirements") or [] if r.get("verdict") is not None]
            if not shown:
                continue
            # the replies for the revision shown: sent after the kit's revisions that led to it
            revised = updates[goal.get("revision", g.revision) - g.revision - 1] if (
                0 < goal.get("revision", g.revision) - g.revision <= len(updates)) else float("-inf")
            replies = [s for c in g.verifier if c.delivered and c.response["time"] < t
                       and c.request["time"] > revised and (s := _said(c)) is not None]
            judged += 1
            if not any(_agrees(shown, s) for s in replies):
                problems.append(
                    f"Goal {g.goal_id} shows " + ", ".join(
                        f"{r.get('req_id')}={r.get('verdict')} citing {[e.get('ref') for e in r.get('evidence') or []]}"
                        for r in shown) + f", which no verifier reply for revision {goal.get('revision')} said")
    return _judgement("ACC-07", sorted(set(problems)), judged, "no acceptance per requirement observed",
                      f"{judged} acceptance record(s) agree with the verifier's replies")


def check_evidence_versioned(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems, n = [], 0
    for g in goal_runs(ev):
        for _, goal in _observed(ev, g.goal_id):
            for r in goal.get("requirements") or []:
                for e in r.get("evidence") or []:
                    n += 1
                    if not e.get("version"):
                        problems.append(f"evidence {e.get('ref')!r} of requirement {r.get('req_id')!r} of Goal "
                                        f"{g.goal_id} carries no version or digest")
    return _judgement("ACC-08", sorted(set(problems)), n, "no evidence reference observed",
                      f"{n} evidence reference(s), each with a version or digest")


def check_terminal_record(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems, n = [], 0
    for g in goal_runs(ev):
        first = None
        for _, goal in _observed(ev, g.goal_id):
            record = goal.get("terminal")
            if first is None:  # not terminal yet (or not tracked)
                first = record
                continue
            n += 1
            if record != first:
                problems.append(f"Goal {g.goal_id}'s terminal record changed from {first} to {record}")
                break
    return _judgement("GOAL-10", problems, n, "no terminal record observed twice",
                      f"{n} later observation(s) of terminal records, unchanged")


def _downtime(ev: Evidence, t1: float, t2: float) -> tuple[float, bool]:
    """Seconds between t1 and t2 the runtime was down on the kit's clock (from each kill or stop to the next
    start), and whether a restart happened between."""
    starts = sorted(o.time for o in ev.history.ops if o.f == "start" and o.type == "invoke")
    down, restarted = 0.0, False
    for f in restarts(ev.history):
        if not t1 < f.time < t2:
            continue
        restarted = True
        up = next((s for s in starts if s > f.time), t2)
        down += min(up, t2) - f.time
    return down, restarted


def check_active_time(ev: Evidence) -> list[ClauseResult]:
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems: dict[str, list[str]] = {"USG-11": [], "USG-12": []}
    judged = {k: 0 for k in problems}
    for g in goal_runs(ev):
        seen = [(t, x) for t, x in _observed(ev, g.goal_id) if x.get("active_time_s") is not None]
        for (t1, a), (t2, b) in itertools.pairwise(seen):
            before, after = a["active_time_s"], b["active_time_s"]
            down, restarted = _downtime(ev, t1, t2)
            judged["USG-11"] += 1
            judged["USG-12"] += restarted
            if after < before - EPSILON_S:
                problems["USG-11"].append(f"Goal {g.goal_id}'s active time went back from {before} s to {after} s"
                                          + (" across a restart" if restarted else ""))
            resumed = any(op in ("resume", "budget_set", "goal_update") and t1 < t <= t2 for op, t, _ in g.controls) \
                or any(op in ("resume", "budget_set", "goal_update") and t <= t2 for op, t, _ in g.maybe)
            if a.get("state") in NOT_RUNNING and b.get("state") in NOT_RUNNING and not resumed and not restarted \
                    and after > before + EPSILON_S:
                problems["USG-11"].append(f"Goal {g.goal_id}'s active time grew from {before} s to {after} s while "
                                          f"it was {a.get('state')} and then {b.get('state')}")
            bound = (t2 - t1) - down + TIME_SLACK_S
            if after - before > bound:
                clause = "USG-12" if restarted else "USG-11"
                problems[clause].append(
                    f"Goal {g.goal_id}'s active time grew by {after - before:.3f} s between two observations "
                    f"{t2 - t1:.3f} s apart on the kit's clock" + (f", {down:.3f} s of it downtime: the vanished "
                                                                   "executor's time was counted to its discovery"
                                                                   if restarted else ""))
    out = []
    for clause_id, found in problems.items():
        out += _judgement(clause_id, found, judged[clause_id],
                          "no Goal's active time observed" + (" across a restart" if clause_id == "USG-12" else ""),
                          f"{judged[clause_id]} pair(s) of observations of a Goal's active time consistent")
    return out


@kit_evidence
def check_live_wait(ev: Evidence) -> list[ClauseResult]:
    """GOAL-08: from the start of the kit's external operation a Goal's worker started until the kit completed or
    notified it, the ledger shows no request of that Goal (kit); an observation meanwhile in which the Goal is
    active and its work item waits on the dependency shows the phase ``waiting`` (the runtime's word)."""
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    from recoverykit.conformance.checks_waits import INF, waited
    runs = {g.script: g for g in goal_runs(ev)}
    problems, n = [], 0
    for w in waited(ev):
        g = runs.get(w.script)
        if g is None or w.done_at == INF:
            continue
        n += 1
        idle = [c for c in g.worker + g.verifier if w.execution.started < c.request["time"] < w.done_at]
        if idle:
            problems.append(f"Goal {g.goal_id} asked the model {len(idle)} time(s) while it waited on {w.handle} "
                            f"(e.g. {idle[0].request.get('request_id')}), before the operation was notified")
        for o in ev.snapshots():
            if not (w.execution.finished or INF) < o.time < w.done_at:
                continue
            items = {x.get("work_id"): x for x in o.snapshot.get("work_items") or []}
            for x in o.snapshot.get("goals") or []:
                item = items.get(x.get("work_id")) or {}
                if x.get("goal_id") == g.goal_id and x.get("state") == "active" and item.get("status") == "waiting" \
                        and item.get("reason_code") == "waiting_dependency" and x.get("phase") != "waiting":
                    problems.append(f"Goal {g.goal_id} waits on {w.handle} in phase {x.get('phase')}, not waiting")
    return _judgement("GOAL-08", sorted(set(problems)), n, "no Goal waited on a live external operation",
                      f"{n} live wait(s) of a Goal: no model turn until notified")


def _time_limits(ev: Evidence, g: GoalRun) -> list[tuple[float, float | None]]:
    """(from when, limit) for each time limit the kit set on ``g``: at creation, then each budget change."""
    out = [(g.created, (g.budget or {}).get("max_active_s"))]
    out += [(t, (fields.get("limit") or {}).get("max_active_s")) for op, t, fields in g.controls if op == "budget_set"]
    return out


@kit_evidence
def check_time_limit(ev: Evidence) -> list[ClauseResult]:
    """USG-14: under an explicit time limit, no paid request (worker or verifier, on the ledger) once the limit
    could not be verified (the Goal's active time is not tracked: null) or was observed spent, until the kit
    changed the budget."""
    if not has_goals(ev):
        return []  # no Goal in the run: the profile's clauses are not this run's to judge
    problems, n = [], 0
    for g in goal_runs(ev):
        limits = _time_limits(ev, g)
        if all(limit is None for _, limit in limits):
            continue
        requests = sorted(g.worker + g.verifier, key=lambda c: c.request["time"])
        # a budget change answered by an indefinite error may have set another limit, then or later: not judged past it
        maybe_set = min((s for op, s, _ in g.maybe if op == "budget_set"), default=float("inf"))
        for t, goal in _observed(ev, g.goal_id):
            if maybe_set < t:
                break
            _, limit = max(((s, x) for s, x in limits if s < t), default=(None, None), key=lambda p: p[0])
            if limit is None:
                continue
            spent = goal.get("active_time_s")
            if spent is not None and spent < limit:
                continue
            n += 1
            changed = min(min((s for s, _ in limits if s > t), default=float("inf")), maybe_set)
            after = [c for c in requests if t < c.request["time"] < changed]
            if after:
                why = ("its active time is not tracked, so its limit cannot be verified" if spent is None
                       else f"{spent} s of its {limit} s active-time limit were observed spent")
                problems.append(f"Goal {g.goal_id} was asked {len(after)} more request(s) (e.g. "
                                f"{after[0].request.get('request_id')}) after {why}, with no budget change")
            break
    return _judgement("USG-14", problems, n, "no Goal's time limit was observed spent or unverifiable",
                      f"{n} Goal(s) with a time limit: no admission past it")


GOAL_RECORD_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (
    check_requirements_kept, check_acceptance_per_requirement, check_evidence_versioned, check_terminal_record,
    check_active_time, check_live_wait, check_time_limit)

__all__ = ["GOAL_RECORD_CHECKS", "named_requirements"]
