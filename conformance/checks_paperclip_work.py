"""History checks of what becomes of a Paperclip task's work and turns around a Retry (seed 001).

Kept apart from ``checks_paperclip`` (admission, #19759's re-preparation, the schedule) because these judge the
task's work itself: the directory a Retry continues in (RTY-09), the agent's uncommitted files there (RTY-08,
on the kit's own disk evidence: it plants the files and looks for them itself), the agent turns a task gets
without a Retry (RTY-34), a completed task across restarts (RTY-35, with the provider's ledger), a click whose
outcome the kit never learned (RTY-37), and a click without board authority (RTY-03).

A check that finds nothing to judge answers unknown, never valid.
"""

from __future__ import annotations

from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement, kit_evidence
from recoverykit.conformance.checks_paperclip import (
    _ops,
    _paperclip,
    _rows,
    _task_observations,
    answered_clicks,
    requests_of,
    task_scripts,
)
from recoverykit.conformance.disk import inspections
from recoverykit.conformance.history import Observation, restarts

_ACTIVE = ("queued", "running")
_SETTLED = ("terminal_failure", "completed")


def _task_runs(obs: Observation) -> dict[str, dict[str, Any]]:
    """The task runs of an observation (the ``runs`` section also holds the chat core's runs)."""
    tasks = {t["task_id"] for t in _rows(obs, "tasks")}
    return {r["run_id"]: r for r in _rows(obs, "runs") if r.get("work_id") in tasks}


@kit_evidence
def check_reuse_conditions(ev: Evidence) -> list[ClauseResult]:
    """RTY-09: a Retry continues in its prior run's directory only when that directory is bound to and owned by the
    task, not a shared or project workspace, the prior executor stopped, its coordinator settled with no lease
    owner, no other run holding the directory, and (by the kit's own inspections) a git repository of its own,
    readable from itself. Judged at the first observation showing the Retry run bound there: a run once ended, a
    coordinator once settled stay so, so what is still wrong then was wrong when the runtime chose the directory.
    The conditions the protocol gives the kit no way to create (a failed cleanup, a running workspace operation, a
    restart orphan's operation) are not exercised."""
    if not _paperclip(ev):
        return []
    observations = _task_observations(ev)
    if not observations:
        return []
    seen_present: dict[str, bool] = {}
    own_repos: set[str] = set()
    for f in inspections(ev.history):
        for path, there in (f.detail.get("present") or {}).items():
            seen_present[path] = seen_present.get(path, False) or bool(there)
        own_repos |= {repo for repo, trees in (f.detail.get("repos") or {}).items() if trees and trees[0] == repo}
    final = _task_runs(observations[-1])
    problems, judged = [], 0
    for run in final.values():
        prior_id = run.get("retry_of")
        if not prior_id or not run.get("workspace"):
            continue
        prior_final = final.get(prior_id)
        if prior_final is None or prior_final.get("workspace") != run["workspace"]:
            continue  # not a reuse
        path = run["workspace"]
        before = next((o for o in observations if _task_runs(o).get(run["run_id"], {}).get("workspace") == path),
                      None)  # the first view of the run bound there
        prior = _task_runs(before).get(prior_id) if before is not None else None
        if prior is None:
            continue
        judged += 1
        ws = next((w for w in _rows(before, "workspaces") if w["path"] == path), None)
        coord = next((c for c in _rows(before, "recovery_coordinators") if c["run_id"] == prior_id), None)
        holders = sorted(r["run_id"] for r in _task_runs(before).values() if r.get("workspace") == path
                         and r["status"] in _ACTIVE and r["run_id"] not in (prior_id, run["run_id"]))
        why = []
        if ws is None or ws.get("task_id") != run["work_id"]:
            why.append(f"not bound to and owned by task {run['work_id']} (owner {(ws or {}).get('task_id')})")
        if ws is not None and ws["strategy"] in ("shared", "project_checkout"):
            why.append(f"a {ws['strategy']} workspace")
        if prior["status"] in _ACTIVE:
            why.append(f"its prior run was still {prior['status']}")
        if coord is None or coord["state"] not in _SETTLED or coord.get("lease_owner"):
            why.append(f"the prior run's coordinator was {(coord or {}).get('state')} (lease owner "
                       f"{(coord or {}).get('lease_owner')}), not settled")
        if holders:
            why.append(f"runs {holders} held it")
        if seen_present.get(path) and path not in own_repos:
            why.append("the kit's git sees no repository of its own there")
        if why:
            problems.append(f"Retry run {run['run_id']} continued in {path}, which was " + "; ".join(why))
    return _judgement("RTY-09", problems, judged, "no Retry continued in its prior run's directory",
                      f"{judged} Retry run(s) continued only in a directory safe to reuse")


@kit_evidence
def check_work_kept(ev: Evidence) -> list[ClauseResult]:
    """RTY-08: uncommitted work the kit left in a failed run's directory (``disk.plant``) is still there, unchanged,
    at every later inspection of the kit's after a Retry: whether the Retry continued in that directory or in a
    fresh attempt, nothing silently dropped it."""
    if not _paperclip(ev):
        return []
    found = inspections(ev.history)
    clicks = [i.index for i, _ in _ops(ev, "retry")]
    problems, judged = [], 0
    for at, plant in enumerate(found):
        for path, sha in (plant.detail.get("planted") or {}).items():
            later = [f for f in found[at + 1:] if any(plant.index < c < f.index for c in clicks)]
            if not later:
                continue
            judged += 1
            for f in later:
                now = (f.detail.get("kept") or {}).get(path, "not looked for")
                if now != sha:
                    what = "gone" if now is None else "changed" if now != "not looked for" else "not looked for"
                    problems.append(f"the agent's uncommitted work {path} was {what} at the kit's inspection "
                                    f"'{f.detail.get('label')}' after a Retry")
                    break
    return _judgement("RTY-08", problems, judged, "no uncommitted work was left before a Retry",
                      f"{judged} file(s) of uncommitted work kept through the Retry")


def _initial_runs(ev: Evidence) -> set[str]:
    return {d.value.get("run_id") for _, d in _ops(ev, "task_create") if d is not None and d.type == "ok"}


def check_turn_needs_retry(ev: Evidence) -> list[ClauseResult]:
    """RTY-34: a task with no waiting request (no message saved on it, ``task_message``) gets no agent turn after
    its first but through a Retry: every later run is a click's (a key the kit sent, or a receipt's) or a
    maintenance retry the schedule showed before it ran. Once a message was saved on a task it has a waiting
    request (seed 001: saved authorized follow-ups may continue through normal dispatch): a run first seen after
    that may also be its follow-up's turn."""
    if not _paperclip(ev):
        return []
    observations = _task_observations(ev)
    initial = _initial_runs(ev)
    waiting: dict[str, int] = {}  # task -> the index of its first saved message
    for i, _ in _ops(ev, "task_message"):
        waiting.setdefault(i.value.get("task_id"), i.index)
    keys_sent = {i.value.get("idempotency_key") for i, _ in _ops(ev, "retry")}
    entries: set[tuple[str, int, int]] = set()
    receipt_runs: set[str] = set()
    problems, judged, seen, tasks_seen = [], 0, set(), set()
    for obs in observations:
        receipt_runs |= {w["run_id"] for w in _rows(obs, "wakeup_receipts") if w.get("run_id")}
        for r in sorted(_task_runs(obs).values(), key=lambda r: (r.get("generation") or 0, r.get("attempt") or 0)):
            if r["run_id"] in seen:
                continue
            seen.add(r["run_id"])
            first_of_task = r["work_id"] not in tasks_seen and not r.get("retry_of")  # (a task_create cut short)
            tasks_seen.add(r["work_id"])
            if r["run_id"] in initial or first_of_task:
                continue
            by_click = r.get("idempotency_key") in keys_sent or r["run_id"] in receipt_runs
            by_schedule = (r["work_id"], r.get("generation"), (r.get("attempt") or 0) - 1) in entries
            if not by_click and not by_schedule and waiting.get(r["work_id"], obs.index) < obs.index:
                continue  # a saved message was waiting: its follow-up's turn, not judged
            judged += 1
            if not by_click and not by_schedule:
                problems.append(f"run {r['run_id']} of task {r['work_id']} (generation {r.get('generation')}, attempt "
                                f"{r.get('attempt')}, retrying {r.get('retry_of')}) is an agent turn with no Retry "
                                f"click and no scheduled retry behind it")
        entries |= {(e["task_id"], e["generation"], e["attempt"]) for e in _rows(obs, "retry_schedule")}
    return _judgement("RTY-34", problems[:5], judged, "no task had a turn after its first",
                      f"{judged} later turn(s), each from a Retry click or a scheduled retry")


@kit_evidence
def check_completed_stays_closed(ev: Evidence) -> list[ClauseResult]:
    """RTY-35: a task seen completed stays completed across restarts (the maintenance sweep of each start): no
    other status, no other current run, and no provider request of its script (the kit's ledger) until a
    deliberate click on it. Cancelled, paused and superseded tasks have no request in the protocol."""
    if not _paperclip(ev):
        return []
    observations = _task_observations(ev)
    scripts = task_scripts(ev)
    clicks = [(i.index, i.time, i.value.get("work_id")) for i, _ in _ops(ev, "retry")]
    faults = restarts(ev.history)
    problems, judged = [], 0
    done: dict[str, tuple[Observation, str]] = {}
    for obs in observations:
        for t in _rows(obs, "tasks"):
            if t["status"] == "succeeded" and t["task_id"] not in done:
                done[t["task_id"]] = (obs, t["current_run"])
    for task_id, (since, run_id) in done.items():
        click = next(((i, tm) for i, tm, w in clicks if w == task_id and i > since.index), None)
        until = click[0] if click else float("inf")
        if not any(since.index < f.index < until for f in faults):
            continue  # no restart while it was completed: nothing to judge
        judged += 1
        for obs in observations:
            if not since.index < obs.index < until:
                continue
            t = next((x for x in _rows(obs, "tasks") if x["task_id"] == task_id), None)
            if t is not None and (t["status"] != "succeeded" or t["current_run"] != run_id):
                problems.append(f"task {task_id}, completed by run {run_id}, shows {t['status']} with run "
                                f"{t['current_run']} (observation {obs.index}) with no click on it")
                break
        script = scripts.get(task_id)
        if script is not None:
            stray = [c for c in requests_of(ev, script, since.time)
                     if click is None or float(c.get("time", 0)) < click[1]]
            if stray:
                problems.append(f"task {task_id}, completed, sent the provider {len(stray)} request(s) after a "
                                f"restart with no click on it")
    # a task whose current run the runtime itself shows succeeded is completed too, also when a restart finalized it
    # (an accepted result handed to its finalizer at start) and no observation caught the task succeeded before the
    # same start's sweep reopened it: after a restart, it is never shown open with no click since its run appeared
    first_restart = min((f.index for f in faults), default=None)
    appeared: dict[str, int] = {}
    for obs in observations:
        runs = {r["run_id"]: r for r in _rows(obs, "runs")}
        for run_id in runs:
            appeared.setdefault(run_id, obs.index)
        if first_restart is None or obs.index < first_restart:
            continue
        for t in _rows(obs, "tasks"):
            run = runs.get(t.get("current_run"))
            if run is None or run.get("status") != "succeeded" or t["task_id"] in done:
                continue
            if any(w == t["task_id"] and appeared[run["run_id"]] < i < obs.index for i, _, w in clicks):
                continue  # a click since the run appeared may reopen it
            judged += 1
            if t["status"] != "succeeded":
                problems.append(f"task {t['task_id']} shows {t['status']} though its current run {run['run_id']} "
                                f"succeeded (observation {obs.index}, after a restart) with no click since")
    return _judgement("RTY-35", problems, judged, "no completed task went through a restart",
                      f"{judged} completed task(s) stayed closed across restarts")


def check_unknown_admission_reconciled(ev: Evidence) -> list[ClauseResult]:
    """RTY-37: a Retry whose outcome the kit never learned (its reply cut by a restart) and sent again with the same
    key is reconciled with that key: answered with the run its receipt names (or deferred, with no run), never
    refused, never a second run."""
    if not _paperclip(ev):
        return []
    sent = _ops(ev, "retry")
    observations = _task_observations(ev)
    problems, judged = [], 0
    for inv, done in sent:
        if done is not None and done.type in ("ok", "fail"):
            continue  # a known outcome
        key = inv.value.get("idempotency_key")
        # the next send of the key the runtime answered: not one cut again (unknown), nor one refused because the
        # runtime was not running then (`temporarily_unavailable`: it never reached the runtime's admission)
        again = next(((i, d) for i, d in sent if i.index > inv.index and i.value.get("idempotency_key") == key
                      and d is not None and (d.type == "ok" or (d.type == "fail" and d.value.get("code")
                                                                 != "temporarily_unavailable"))), None)
        if again is None:
            continue
        i2, d2 = again
        judged += 1
        if d2.type != "ok":
            problems.append(f"key {key!r}, whose first outcome was unknown, was refused when sent again "
                            f"({d2.value.get('code')}: {d2.value.get('text')})")
            continue
        before = [o for o in observations if o.index < i2.index]
        known = next((w for w in _rows(before[-1], "wakeup_receipts") if w["idempotency_key"] == key), None) \
            if before else None
        answered = d2.value.get("run_id")
        if known is not None and known.get("run_id") and answered != known["run_id"]:
            problems.append(f"key {key!r} sent again after an unknown outcome answered run {answered}, but its "
                            f"receipt names run {known['run_id']}")
        runs = {r["run_id"] for o in observations for r in _rows(o, "runs") if r.get("idempotency_key") == key}
        if len(runs) > 1:
            problems.append(f"key {key!r} sent again after an unknown outcome names runs {sorted(runs)}")
    return _judgement("RTY-37", problems, judged, "no Retry with an unknown outcome was sent again",
                      f"{judged} Retry(s) with an unknown outcome reconciled with the same key")


def check_board_authority(ev: Evidence) -> list[ClauseResult]:
    """RTY-03: a Retry sent without board task-mutation authority (``authority`` ``none``) is refused, definitely,
    and leaves nothing: no receipt of its key and no run of its key in any later observation."""
    if not _paperclip(ev):
        return []
    observations = _task_observations(ev)
    problems, judged = [], 0
    for inv, done in _ops(ev, "retry"):
        if inv.value.get("authority", "board") == "board" or done is None:
            continue
        key = inv.value.get("idempotency_key")
        later = [o for o in observations if o.index > done.index]
        if not later:
            continue
        judged += 1
        if done.type != "fail":
            problems.append(f"a Retry of task {inv.value.get('work_id')} without board authority (key {key!r}) was "
                            f"answered {done.type}: {done.value}")
            continue
        left = sorted({f"receipt {w['status']}" for o in later for w in _rows(o, "wakeup_receipts")
                       if w["idempotency_key"] == key} | {f"run {r['run_id']}" for o in later for r in _rows(o, "runs")
                                                          if r.get("idempotency_key") == key})
        if left:
            problems.append(f"a Retry without board authority (key {key!r}) was refused but left {', '.join(left)}")
    return _judgement("RTY-03", problems, judged, "no Retry was sent without board authority",
                      f"{judged} Retry(s) without board authority refused, nothing recorded")


@kit_evidence
def check_stricter_limit_kept(ev: Evidence) -> list[ClauseResult]:
    """RTY-31: a task created with a stricter execution retry limit (``retry_limit`` below the policy's five) gets
    no more maintenance retries than it: no schedule entry beyond it in any generation, and, by the provider's
    ledger, no more than 1 + limit requests of its script before the first click on it. Judged once the task
    offered Retry after a scheduled retry (its automatic recovery over)."""
    if not _paperclip(ev):
        return []
    scripts = task_scripts(ev)
    limits = {d.value["task_id"]: int(i.value["retry_limit"]) for i, d in _ops(ev, "task_create")
              if i.value.get("retry_limit") is not None and d is not None and d.type == "ok"}
    clicks = [(i.time, i.value.get("work_id")) for i, _ in _ops(ev, "retry")]
    problems, judged = [], 0
    for task_id, limit in limits.items():
        entries = {(e["generation"], e["attempt"]) for o in _task_observations(ev) for e in _rows(o, "retry_schedule")
                   if e["task_id"] == task_id}
        over = sorted(a for a in entries if a[1] > limit)
        ended = entries and any(t["task_id"] == task_id and t["status"] == "retry_offered"
                                for o in _task_observations(ev) for t in _rows(o, "tasks"))
        if not ended and not over:
            continue
        judged += 1
        if over:
            problems.append(f"task {task_id}, whose own retry limit is {limit}, had retries scheduled as (generation, "
                            f"attempt) {over}")
        first_click = min((t for t, w in clicks if w == task_id), default=float("inf"))
        sent = [c for c in requests_of(ev, scripts.get(task_id, ""), 0.0) if float(c.get("time", 0)) < first_click]
        if task_id in scripts and len(sent) > 1 + limit:
            problems.append(f"task {task_id}, whose own retry limit is {limit}, sent the provider {len(sent)} requests "
                            f"before any click")
    return _judgement("RTY-31", problems, judged, "no task with a stricter retry limit ended its automatic recovery",
                      f"{judged} task(s) kept to their stricter retry limit")


def _open_claim(obs: Observation, run_id: str | None) -> bool:
    return any(c["run_id"] == run_id and c["state"] == "observed" for c in _rows(obs, "recovery_coordinators"))


def check_unknown_execution_holds(ev: Evidence) -> list[ClauseResult]:
    """RTY-24: a Retry clicked while the observed run's execution is unknown (its coordinator held open by a restart
    claim, ``observed``, in the last observation before the click and still in the first after its answer) is
    held: deferred, no run. Operator Stop, changed ownership and missing receipts have no request in the
    protocol and are not exercised."""
    if not _paperclip(ev):
        return []
    problems, judged = [], 0
    for inv, done, before, after in answered_clicks(ev):
        observed = inv.value.get("observed_run_id")
        if not (_open_claim(before[-1], observed) and _open_claim(after[0], observed)):
            continue
        judged += 1
        if done.value.get("run_id") is not None and done.value.get("created"):
            problems.append(f"a Retry of task {inv.value.get('work_id')} while run {observed}'s restart claim was open "
                            f"(its execution unknown) started run {done.value['run_id']} instead of being held")
    return _judgement("RTY-24", problems, judged, "no Retry came while a run's execution was unknown",
                      f"{judged} Retry(s) during an open restart claim held")


@kit_evidence
def check_continued_preparation_unstarted(ev: Evidence) -> list[ClauseResult]:
    """RTY-39: a run a restart continues as a failed native preparation (its coordinator claimed
    ``bootstrap_incomplete``) had started no provider work: by the provider's ledger, no request of its task's
    script arrived between the run's birth (the reply that named it, or its first view) and the first restart
    after it. Provider work once started stays started, so a request before that restart forbids the claim at
    any later one; a request after it may be the claimed run going on, and is not read. (The stop receipts of every
    source lease need leases on task runs, which the protocol does not expose; not exercised.)"""
    if not _paperclip(ev):
        return []
    observations = _task_observations(ev)
    scripts = task_scripts(ev)
    faults = restarts(ev.history)
    born: dict[str, tuple[int, float]] = {}  # run id -> (index, time) of the reply that named it
    for name in ("task_create", "retry"):
        for _, d in _ops(ev, name):
            if d is not None and d.type == "ok" and d.value.get("run_id"):
                born.setdefault(d.value["run_id"], (d.index, d.time))
    problems, judged, seen = [], 0, set()
    for obs in observations:
        for c in _rows(obs, "recovery_coordinators"):
            if c.get("claim_kind") != "bootstrap_incomplete" or c["run_id"] in seen:
                continue
            seen.add(c["run_id"])
            run = _task_runs(obs).get(c["run_id"])
            first = next((o for o in observations if c["run_id"] in _task_runs(o)), None)
            birth = min([b for b in (born.get(c["run_id"]), first and (first.index, first.time)) if b is not None],
                        default=None)
            fault = next((f for f in faults if birth is not None and f.index > birth[0]), None)
            script = scripts.get((run or {}).get("work_id"))
            if run is None or birth is None or fault is None or script is None or fault.index > obs.index:
                continue
            judged += 1
            started = [r for r in requests_of(ev, script, birth[1]) if float(r.get("time", 0)) < fault.time]
            if started:
                problems.append(f"run {c['run_id']} was continued as a failed native preparation "
                                f"(bootstrap_incomplete) though the provider had seen {len(started)} request(s) of "
                                f"its task before the restart")
    return _judgement("RTY-39", problems, judged, "no failed native preparation was continued after a restart",
                      f"{judged} continued preparation(s), none with provider work started")


WORK_CHECKS = (check_continued_preparation_unstarted, check_unknown_execution_holds, check_stricter_limit_kept,
               check_board_authority, check_reuse_conditions, check_work_kept, check_turn_needs_retry,
               check_completed_stays_closed, check_unknown_admission_reconciled)
