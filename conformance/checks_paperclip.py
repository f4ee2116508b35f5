"""History checks of the Paperclip task-retry profile (seed 001 with pull request #19759).

What each check reads, the kit's own evidence first:

- the provider ledger: which task's script each request answered (the kit tags a task's text with its script), so
  "a run went on after the restart" and "a later Retry created a run" are the provider's record, not the
  runtime's word;
- the kit's disk inspections (``conformance.disk``): the ``isolated-workspace-attempts`` tree and ``git worktree
  list`` of every repository, run by the kit itself;
- the kit's clock: an observation's time plus the clock offset the kit gave the runtime at its last start, against
  which schedule due times are judged;
- the history of the kit's requests and the runtime's answers (retry replies, task faults armed);
- the observe snapshot (tasks, runs, coordinators, workspaces, the retry schedule): the runtime's word, used where
  the kit has nothing better, and labelled so.

A check that finds nothing to judge answers unknown, never valid.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement, kit_evidence
from recoverykit.conformance.disk import ISOLATED, inspections
from recoverykit.conformance.history import Observation, restarts
from recoverykit.conformance.provider_ledger import calls

DELAYS_S = (30.0, 60.0, 120.0, 240.0, 480.0)  # seed 001: "30, 60, 120, 240 and 480 seconds"
JITTER = 0.2  # "with persisted ±20% jitter"
WINDOW_S = 30 * 60.0  # "Scheduling stops 30 minutes after the first failure"
CLOCK_SLACK_S = 2.0  # the kit's observation times bracket a scheduling moment this loosely
_TAG = re.compile(r"\[\[rk-script:([^\]]+)\]\]")


# --- reading the evidence -----------------------------------------------------------------------------------

def _ops(ev: Evidence, name: str) -> list[tuple[Any, Any]]:
    return [(i, d) for i, d in ev.history.completions() if i.f == name]


def task_scripts(ev: Evidence) -> dict[str, str]:
    """task id -> the script its text was tagged with (from the kit's own task_create requests)."""
    out = {}
    for invoke, done in _ops(ev, "task_create"):
        tag = _TAG.search(invoke.value.get("text", ""))
        if done is not None and done.type == "ok" and tag:
            out[done.value["task_id"]] = tag.group(1)
    return out


def requests_of(ev: Evidence, script_id: str, after: float = 0.0) -> list[dict[str, Any]]:
    """The provider's requests of ``script_id`` received after time ``after`` (the kit's clock, no offset)."""
    return [c.request for c in calls(ev.ledger) if c.request.get("script_id") == script_id
            and float(c.request.get("time", 0)) > after]


def _rows(obs: Observation, section: str) -> list[dict[str, Any]]:
    return obs.snapshot.get(section) or []


def _task_observations(ev: Evidence) -> list[Observation]:
    return [o for o in ev.history.observations if o.snapshot.get("tasks") is not None]


def kit_clock(ev: Evidence, t: float) -> float:
    """The runtime's clock as the kit set it at real time ``t``: t plus the offset of the last start before t."""
    offset = 0.0
    for invoke, _ in _ops(ev, "start"):
        if invoke.time <= t:
            offset = float(invoke.value.get("clock_offset_s") or 0.0)
    return t + offset


def _paperclip(ev: Evidence) -> bool:
    return "tasks" in ev.observes or any(True for _ in _ops(ev, "task_create"))


# --- #19759: re-preparation after a restart during bootstrap -----------------------------------------------

def _interrupted_bootstraps(ev: Evidence) -> list[tuple[Observation, Any, dict[str, Any]]]:
    """(last observation before the restart, the restart, the run) for every run the kit saw bootstrapping
    (running, not dispatched, a workspace bound) just before a restart of its."""
    out = []
    observations = _task_observations(ev)
    for fault in restarts(ev.history):
        before = [o for o in observations if o.index < fault.index]
        if not before:
            continue
        for run in _rows(before[-1], "runs"):
            if run["status"] == "running" and run.get("dispatched") is False and run.get("workspace"):
                out.append((before[-1], fault, run))
    return out


def _prepare_fault_armed(ev: Evidence, task_id: str, before_index: int) -> bool:
    return any(i.value.get("task_id") == task_id and i.value.get("fault") == "prepare_fails" and i.index < before_index
               and d is not None and d.type == "ok" for i, d in _ops(ev, "task_fault"))


def _run_faults(ev: Evidence, task_id: str) -> set[str]:
    """Error codes of the ``run_fails`` faults the kit armed for the task (they fail a run at its dispatch)."""
    return {i.value.get("error_code") for i, d in _ops(ev, "task_fault") if i.value.get("task_id") == task_id
            and i.value.get("fault") == "run_fails" and d is not None and d.type == "ok"}


def _final_run(ev: Evidence, run_id: str) -> dict[str, Any] | None:
    final = [o for o in _task_observations(ev)]
    return next((r for r in _rows(final[-1], "runs") if r["run_id"] == run_id), None) if final else None


@kit_evidence
def check_reprepare_reuses_bound_directory(ev: Evidence) -> list[ClauseResult]:
    """RTY-12: a run restarted during bootstrap is prepared again in the directory it bound, and goes on there."""
    if not _paperclip(ev):
        return []
    problems, judged = [], 0
    scripts = task_scripts(ev)
    for _obs, fault, run in _interrupted_bootstraps(ev):
        task_id = run["work_id"]
        if _prepare_fault_armed(ev, task_id, fault.index) or task_id not in scripts:
            continue  # a re-preparation the kit made fail is RTY-14's; a task the kit did not create is not judged
        final = _final_run(ev, run["run_id"])
        if final is None:
            continue
        judged += 1
        bound, now = run["workspace"], final.get("workspace")
        if now != bound and not _worktree_of(ev, now, bound):  # a worktree based on the bound directory: RTY-13's
            problems.append(f"run {run['run_id']} bound {bound} before the restart during its bootstrap and was "
                            f"prepared again in {now}")
        elif final["status"] != "succeeded" and final.get("error_code") not in (
                "git_worktree_base_not_git_checkout", *_run_faults(ev, task_id)):  # a fault at dispatch: it went on
            problems.append(f"run {run['run_id']}, restarted during bootstrap, ended {final['status']} "
                            f"({final.get('error_code')}) instead of going on in {bound}")
        elif final["status"] == "succeeded" and not requests_of(ev, scripts[task_id], fault.time):
            problems.append(f"run {run['run_id']} says it succeeded after the restart, but the provider saw no "
                            f"request of its task after it")
    return _judgement("RTY-12", problems, judged, "no run was restarted during its bootstrap",
                      f"{judged} run(s) restarted during bootstrap went on in the directory they had bound")


def _worktree_of(ev: Evidence, path: str | None, base: str) -> bool:
    """The kit saw ``path`` as a git worktree of ``base``, or the runtime says so."""
    if path is None:
        return False
    for f in inspections(ev.history):
        if path in (f.detail.get("repos") or {}).get(base) or []:
            return True
    final = _task_observations(ev)
    return any(w["path"] == path and w.get("base") == base for w in _rows(final[-1], "workspaces")) if final else False


@kit_evidence
def check_task_directory_never_a_worktree_base(ev: Evidence) -> list[ClauseResult]:
    """RTY-13: no git worktree has a task directory as its base: by ``git worktree list`` of every repository
    under isolated-workspace-attempts (the kit's), and by the runtime's workspace records."""
    if not _paperclip(ev):
        return []
    problems, judged = [], 0
    for f in inspections(ev.history):
        for repo, trees in (f.detail.get("repos") or {}).items():
            if not repo.startswith(ISOLATED + "/") or trees is None:
                continue
            judged += 1
            linked = [t for t in trees if t != repo]
            if linked:
                problems.append(f"git worktree list in the task directory {repo} ({f.detail.get('label')}) shows "
                                f"worktrees based on it: {linked}")
    for obs in _task_observations(ev):
        task_dirs = {w["path"] for w in _rows(obs, "workspaces") if w["strategy"] == "task_directory"}
        for w in _rows(obs, "workspaces"):
            if w["strategy"] == "git_worktree" and w.get("base") and (
                    w["base"] in task_dirs or w["base"].startswith(ISOLATED + "/")):
                problems.append(f"the runtime records {w['path']} as a git worktree of the task directory "
                                f"{w['base']}")
    return _judgement("RTY-13", sorted(set(problems)), judged, "the kit inspected no task directory on disk",
                      f"{judged} inspection(s) of task directories: none is a worktree base")


@kit_evidence
def _woken_run(ev: Evidence, key: str | None) -> str | None:
    """The run a deferred click's receipt attached to by the last observation (None: still deferred)."""
    final = _task_observations(ev)
    receipt = next((w for w in _rows(final[-1], "wakeup_receipts") if w["idempotency_key"] == key), None) \
        if final else None
    return (receipt or {}).get("run_id")


def check_failed_reprepare_settles(ev: Evidence) -> list[ClauseResult]:
    """RTY-14: after a re-preparation failed following a restart, a later Retry is admitted: it creates a run (or,
    clicked while the claim was still being settled, is deferred and woken by the settlement), and the provider
    sees that run's request (the kit's ledger)."""
    if not _paperclip(ev):
        return []
    scripts = task_scripts(ev)
    failed: dict[str, tuple[str, int]] = {}  # run id -> (task id, first observation index it was seen failed)
    for _obs, fault, run in _interrupted_bootstraps(ev):
        if _prepare_fault_armed(ev, run["work_id"], fault.index):
            failed.setdefault(run["run_id"], (run["work_id"], fault.index))
    problems, judged = [], 0
    for run_id, (task_id, since) in failed.items():
        clicks = [(i, d) for i, d in _ops(ev, "retry") if i.value.get("observed_run_id") == run_id
                  and i.index > since and d is not None and d.type == "ok"]
        if not clicks or task_id not in scripts:
            continue
        judged += 1
        invoke, done = clicks[0]
        status = done.value.get("receipt_status")
        # created now, or by the same key sent before (a click whose reply a restart cut off, sent again)
        made = done.value.get("run_id") if done.value.get("created") or status in ("pending", "completed") else None
        if made is None and status == "deferred":
            # clicked while the claim was still being settled: deferred, and the settlement must wake it
            made = _woken_run(ev, invoke.value.get("idempotency_key"))
        if not made:
            problems.append(f"after run {run_id}'s re-preparation failed, a Retry created no run (receipt "
                            f"{done.value.get('receipt_status')}"
                            f"{', never woken' if done.value.get('receipt_status') == 'deferred' else ''}): its "
                            "recovery claim was never settled")
        elif not requests_of(ev, scripts[task_id], done.time):
            problems.append(f"the Retry after run {run_id}'s failed re-preparation created run "
                            f"{made}, but the provider never saw its request")
    return _judgement("RTY-14", problems, judged, "no Retry followed a failed re-preparation",
                      f"{judged} Retry click(s) after a failed re-preparation created a run that reached the provider")


# --- admission ----------------------------------------------------------------------------------------------

def check_key_unique_over_every_receipt(ev: Evidence) -> list[ClauseResult]:
    """RTY-04: a key already used in the company answers with its first run, whether that run is still pending,
    completed or failed: a repeated request never creates another run."""
    if not _paperclip(ev):
        return []
    by_key: dict[str, list[Any]] = defaultdict(list)
    for invoke, done in _ops(ev, "retry"):
        if done is not None and done.type == "ok" and done.value.get("run_id"):
            by_key[invoke.value.get("idempotency_key")].append(done)
    problems, judged = [], 0
    for key, answers in by_key.items():
        if len(answers) < 2:
            continue
        judged += len(answers) - 1
        runs = sorted({a.value["run_id"] for a in answers})
        created = [a for a in answers if a.value.get("created")]
        if len(runs) > 1 or len(created) > 1:
            statuses = ", ".join(str(a.value.get("receipt_status")) for a in answers)
            problems.append(f"key {key!r} sent {len(answers)} times created runs {runs} ({len(created)} said created; "
                            f"receipt statuses {statuses})")
    return _judgement("RTY-04", problems, judged, "no key was repeated", f"{judged} repeated key(s) attached")


def check_concurrent_clicks_attach(ev: Evidence) -> list[ClauseResult]:
    """RTY-05: a click on a task while a Retry it accepted is still running (from the click that created the run
    to the first observation showing it ended) attaches to that run, whatever its key."""
    if not _paperclip(ev):
        return []
    clicks = [(i, d) for i, d in _ops(ev, "retry") if d is not None and d.type == "ok" and d.value.get("run_id")]
    observations = _task_observations(ev)
    problems, judged = [], 0
    for inv, done in clicks:
        if not done.value.get("created"):
            continue
        run_id, task_id = done.value["run_id"], inv.value.get("work_id")
        ended = next((o.index for o in observations if o.index > done.index and any(
            r["run_id"] == run_id and r["status"] not in ("queued", "running") for r in _rows(o, "runs"))), None)
        for other_inv, other in clicks:
            if other_inv is inv or other_inv.value.get("work_id") != task_id:
                continue
            if not (inv.index < other.index and (ended is None or other_inv.index < ended)):
                continue  # not while the accepted run was running
            if other_inv.index < inv.index and other.index < done.index:
                continue
            judged += 1
            if other.value["run_id"] != run_id or other.value.get("created"):
                problems.append(f"a click on task {task_id} (key {other_inv.value.get('idempotency_key')!r}) while "
                                f"its accepted run {run_id} was running got run {other.value['run_id']} "
                                f"(created: {other.value.get('created')})")
    return _judgement("RTY-05", problems, judged, "no click came while an accepted Retry was running",
                      f"{judged} click(s) while an accepted Retry was running attached to it")


# --- the maintenance schedule ---------------------------------------------------------------------------------

def _entries(ev: Evidence) -> dict[tuple[str, int, int], list[tuple[Observation, dict[str, Any]]]]:
    """(task, generation, attempt) -> every observation of that schedule entry, in order."""
    out: dict[tuple[str, int, int], list[tuple[Observation, dict[str, Any]]]] = defaultdict(list)
    for obs in _task_observations(ev):
        for e in _rows(obs, "retry_schedule"):
            out[(e["task_id"], e["generation"], e["attempt"])].append((obs, e))
    return out


@kit_evidence
def check_schedule_values(ev: Evidence) -> list[ClauseResult]:
    """RTY-26: at most five retries, each with jitter within ±20 %, due its delay after the moment it was
    scheduled; that moment is bracketed on the kit's clock by the last observation without the entry and the
    first with it."""
    if not _paperclip(ev):
        return []
    observations = _task_observations(ev)
    problems, judged = [], 0
    for (task_id, gen, attempt), seen in _entries(ev).items():
        first_obs, e = seen[0]
        judged += 1
        if not 1 <= attempt <= len(DELAYS_S):
            problems.append(f"task {task_id} generation {gen} scheduled retry {attempt}: only five are allowed")
            continue
        if abs(e["jitter"]) > JITTER + 1e-9:
            problems.append(f"task {task_id} retry {attempt} has jitter {e['jitter']:+.3f}, beyond ±20 %")
            continue
        if e.get("cooldown_until") is not None:
            continue  # a provider cooldown decides the due time
        earlier = [o for o in observations if o.index < first_obs.index]
        lo = kit_clock(ev, earlier[-1].time) if earlier else float("-inf")
        hi = kit_clock(ev, first_obs.time)
        scheduled_at = e["due_at"] - DELAYS_S[attempt - 1] * (1 + e["jitter"])
        if not lo - CLOCK_SLACK_S <= scheduled_at <= hi + CLOCK_SLACK_S:
            problems.append(f"task {task_id} retry {attempt} is due at {e['due_at']:.1f}: with its jitter "
                            f"{e['jitter']:+.3f} that is {DELAYS_S[attempt - 1]:.0f} s after {scheduled_at:.1f}, but "
                            f"the kit's clock put its scheduling between {lo:.1f} and {hi:.1f}")
    return _judgement("RTY-26", problems, judged, "no retry was scheduled",
                      f"{judged} scheduled retr(ies) within the policy's delays and jitter")


def check_jitter_persisted(ev: Evidence) -> list[ClauseResult]:
    """RTY-27: a scheduled retry's jitter and due time never change once scheduled, across restarts too."""
    if not _paperclip(ev):
        return []
    problems, judged = [], 0
    for (task_id, _gen, attempt), seen in _entries(ev).items():
        first = seen[0][1]
        if len(seen) > 1 and any(f.index > seen[0][0].index for f in restarts(ev.history)
                                 if f.index < seen[-1][0].index):
            judged += 1
        for _obs, e in seen[1:]:
            if e["state"] == "scheduled" and (e["jitter"] != first["jitter"] or e["due_at"] != first["due_at"]):
                problems.append(f"task {task_id} retry {attempt}: jitter {first['jitter']:+.4f} due "
                                f"{first['due_at']:.1f} became {e['jitter']:+.4f} due {e['due_at']:.1f}")
                break
    return _judgement("RTY-27", problems, judged, "no scheduled retry was observed across a restart",
                      f"{judged} scheduled retr(ies) kept their jitter and due time across restarts")


@kit_evidence
def check_window(ev: Evidence) -> list[ClauseResult]:
    """RTY-28: no retry is scheduled once the kit's clock is past 30 minutes after the generation's first
    failure (unless a provider cooldown decides it)."""
    if not _paperclip(ev):
        return []
    observations = _task_observations(ev)
    problems, judged = [], 0
    for (task_id, gen, attempt), seen in _entries(ev).items():
        first_obs, e = seen[0]
        end = e["first_failure_at"] + WINDOW_S
        earlier = [o for o in observations if o.index < first_obs.index]
        if not earlier:
            continue
        lo = kit_clock(ev, earlier[-1].time)
        judged += lo > end  # an entry first seen after the window closed: judged
        if lo > end + CLOCK_SLACK_S and e.get("cooldown_until") is None:
            problems.append(f"task {task_id} generation {gen} scheduled retry {attempt} when the kit's clock was "
                            f"past {lo:.0f}, {lo - e['first_failure_at']:.0f} s after the first failure")
    # the window closing is judged when the kit moved its clock past it while a generation was failing
    for obs in observations:
        for e in _rows(obs, "retry_schedule"):
            if kit_clock(ev, obs.time) > e["first_failure_at"] + WINDOW_S:
                judged += 1
                break
    return _judgement("RTY-28", problems, judged, "the kit's clock never passed a generation's window",
                      "no retry was scheduled after its generation's 30-minute window")


def check_budget_not_replenished(ev: Evidence) -> list[ClauseResult]:
    """RTY-30: within a generation the retries are numbered on and never start again, and a retry once fired is
    never scheduled again, whatever restarts happen in between."""
    if not _paperclip(ev):
        return []
    problems, judged = [], 0
    order: dict[tuple[str, int], list[int]] = defaultdict(list)
    for (task_id, gen, attempt), seen in sorted(_entries(ev).items(), key=lambda kv: kv[1][0][0].index):
        order[(task_id, gen)].append(attempt)
        states = [e["state"] for _, e in seen]
        if "fired" in states and "scheduled" in states[states.index("fired"):]:
            problems.append(f"task {task_id} generation {gen}: retry {attempt} fired, then was scheduled again")
    for (task_id, gen), attempts in order.items():
        judged += len(attempts) > 1
        if attempts != list(range(1, len(attempts) + 1)):
            problems.append(f"task {task_id} generation {gen} numbered its retries {attempts}")
    return _judgement("RTY-30", problems, judged, "no generation scheduled two retries",
                      "retries were numbered on, never replenished")


PAPERCLIP_CHECKS = (check_reprepare_reuses_bound_directory, check_task_directory_never_a_worktree_base,
                    check_failed_reprepare_settles, check_key_unique_over_every_receipt, check_concurrent_clicks_attach,
                    check_schedule_values, check_jitter_persisted, check_window, check_budget_not_replenished)

# --- task state, generations, receipts across restarts, fresh attempts ----------------------------------------

_ACTIVE = ("queued", "running")


def check_one_task_state(ev: Evidence) -> list[ClauseResult]:
    """RTY-01: each task shows exactly one of: working (its current run is queued or running), one scheduled retry
    (exactly one scheduled entry), or the ordinary Retry action (nothing running, nothing scheduled)."""
    if not _paperclip(ev):
        return []
    problems, judged = [], 0
    for obs in _task_observations(ev):
        runs = {r["run_id"]: r for r in _rows(obs, "runs")}
        for t in _rows(obs, "tasks"):
            judged += 1
            scheduled = [e for e in _rows(obs, "retry_schedule") if e["task_id"] == t["task_id"]
                         and e["state"] == "scheduled"]
            current = runs.get(t["current_run"] or "")
            running = current is not None and current["status"] in _ACTIVE
            status = t["status"]
            wrong = None
            if (t.get("action") == "retry") != (status == "retry_offered"):
                wrong = f"shows {status} with action {t.get('action')}"
            elif status == "working" and not running:
                wrong = f"shows working while its current run {t['current_run']} is {current and current['status']}"
            elif status == "retry_scheduled" and len(scheduled) != 1:
                wrong = f"shows one scheduled retry with {len(scheduled)} scheduled"
            elif status == "retry_offered" and (running or scheduled):
                wrong = "offers Retry while work runs or a retry is scheduled"
            elif status != "retry_scheduled" and scheduled and status != "held":
                wrong = f"shows {status} with a retry scheduled"
            if wrong:
                problems.append(f"task {t['task_id']} {wrong} (observation {obs.index})")
    return _judgement("RTY-01", problems[:20], judged, "no task was observed",
                      "every observed task showed exactly one of working, one scheduled retry, or Retry")


def check_generation_only_by_click(ev: Evidence) -> list[ClauseResult]:
    """RTY-06: a task's run generation rises only with a deliberate click the kit sent (a Retry that created a run);
    an automatic retry or a repeated request never opens one."""
    if not _paperclip(ev):
        return []
    clicked = {d.value["run_id"] for i, d in _ops(ev, "retry") if d is not None and d.type == "ok"
               and d.value.get("created") and d.value.get("run_id")}
    clicked |= {r["run_id"] for o in _task_observations(ev) for r in _rows(o, "wakeup_receipts") if r.get("run_id")}
    keys_sent = {i.value.get("idempotency_key") for i, _ in _ops(ev, "retry")}  # a click whose answer was cut
    clicked |= {r["run_id"] for o in _task_observations(ev) for r in _rows(o, "runs")
                if r.get("idempotency_key") in keys_sent}  # (a receipt missing then is RTY-02's)
    highest: dict[str, int] = {}
    problems, judged = [], 0
    seen: set[str] = set()
    for obs in _task_observations(ev):
        for r in sorted(_rows(obs, "runs"), key=lambda r: r.get("generation") or 0):
            if r["run_id"] in seen or r.get("generation") is None:
                continue
            seen.add(r["run_id"])
            task, gen = r["work_id"], r["generation"]
            if task in highest and gen > highest[task]:
                judged += 1
                if r["run_id"] not in clicked:
                    problems.append(f"run {r['run_id']} of task {task} opened generation {gen} with no deliberate "
                                    f"click behind it")
            highest[task] = max(highest.get(task, gen), gen)
    return _judgement("RTY-06", problems, judged, "no new generation was opened",
                      f"{judged} new generation(s), each opened by a deliberate click")


def check_receipt_reused_across_restarts(ev: Evidence) -> list[ClauseResult]:
    """RTY-19: one Retry key names one run for good: a restart while its run is pending never makes another run
    for the same receipt."""
    if not _paperclip(ev):
        return []
    runs_of: dict[str, set[str]] = defaultdict(set)
    for obs in _task_observations(ev):
        for r in _rows(obs, "runs"):
            if r.get("idempotency_key"):
                runs_of[r["idempotency_key"]].add(r["run_id"])
    pending_at_restart = set()
    observations = _task_observations(ev)
    for fault in restarts(ev.history):
        before = [o for o in observations if o.index < fault.index]
        if before:
            pending_at_restart |= {w["idempotency_key"] for w in _rows(before[-1], "wakeup_receipts")
                                   if w["status"] in ("pending", "deferred")}
    problems = [f"key {k!r} names runs {sorted(v)}" for k, v in runs_of.items() if len(v) > 1]
    return _judgement("RTY-19", problems, len(pending_at_restart), "no Retry was pending at a restart",
                      f"{len(pending_at_restart)} receipt(s) pending at a restart kept their one run")


@kit_evidence
def check_fresh_attempt(ev: Evidence) -> list[ClauseResult]:
    """RTY-10: a Retry that does not continue in its prior run's directory gets a fresh directory of its own
    under isolated-workspace-attempts, and the prior directory stays where it was (the kit's disk inspections)."""
    if not _paperclip(ev):
        return []
    final = _task_observations(ev)
    if not final:
        return []
    runs = {r["run_id"]: r for r in _rows(final[-1], "runs")}
    problems, judged = [], 0
    for r in runs.values():
        prior = runs.get(r.get("retry_of") or "")
        if prior is None or not r.get("workspace") or not prior.get("workspace"):
            continue
        if r["workspace"] == prior["workspace"]:
            continue  # a reuse, not a fresh attempt
        if any(w["path"] == r["workspace"] and (w.get("base") or "").startswith(ISOLATED + "/")
               for w in _rows(final[-1], "workspaces")):
            continue  # a worktree based on a task directory: RTY-13's symptom, judged there (one bug, one clause)
        judged += 1
        if not r["workspace"].startswith(ISOLATED + "/") or not r["workspace"].endswith("/" + r["run_id"]):
            problems.append(f"Retry run {r['run_id']} got {r['workspace']}, not a fresh isolated attempt of its own")
        for f in inspections(ev.history):
            if (f.detail.get("present") or {}).get(prior["workspace"]) is False:
                problems.append(f"the prior run {prior['run_id']}'s directory {prior['workspace']} was gone at the "
                                f"kit's inspection '{f.detail.get('label')}'")
                break
    return _judgement("RTY-10", problems, judged, "no Retry ran in a fresh attempt",
                      f"{judged} fresh attempt(s) of their own, the prior directories kept")


@kit_evidence
def check_cooldown_precedence(ev: Evidence) -> list[ClauseResult]:
    """RTY-29: after a run failed with a provider cooldown the kit injected, the next retry is due no earlier than
    the cooldown's end: on the kit's clock, the failure came after the last observation without the entry."""
    if not _paperclip(ev):
        return []
    faults = [(i, d) for i, d in _ops(ev, "task_fault") if i.value.get("fault") == "run_fails"
              and i.value.get("cooldown_s") and d is not None and d.type == "ok"]
    observations = _task_observations(ev)
    problems, judged = [], 0
    for invoke, done in faults:
        task_id, cooldown = invoke.value["task_id"], float(invoke.value["cooldown_s"])
        code = invoke.value.get("error_code")
        failed_at = next((o.index for o in observations if o.index > done.index and any(
            r["work_id"] == task_id and r.get("error_code") == code for r in _rows(o, "runs"))), None)
        if failed_at is None:
            continue
        after = sorted(((seen[0][0].index, seen) for (task, _g, _a), seen in _entries(ev).items()
                        if task == task_id and seen[0][0].index >= failed_at), key=lambda x: x[0])
        if not after:
            continue
        first_obs, e = after[0][1][0]
        earlier = [o for o in observations if o.index < first_obs.index]
        lo = kit_clock(ev, earlier[-1].time) if earlier else kit_clock(ev, done.time)
        judged += 1
        if e["due_at"] < lo + cooldown - CLOCK_SLACK_S:
            problems.append(f"task {task_id}: after a failure with a {cooldown:.0f} s provider cooldown (not before "
                            f"{lo:.0f} on the kit's clock) the next retry is due at {e['due_at']:.0f}")
    return _judgement("RTY-29", problems, judged, "no run failed with a provider cooldown",
                      "the retry after a provider cooldown waited for it")


PAPERCLIP_CHECKS += (check_one_task_state, check_generation_only_by_click, check_receipt_reused_across_restarts,
                     check_fresh_attempt, check_cooldown_precedence)

@kit_evidence
def check_reuse_when_safe(ev: Evidence) -> list[ClauseResult]:
    """RTY-40: a Retry whose prior run's directory was safe to continue in (task-owned, not shared, the prior run
    ended and its coordinator settled, no other run holding it, and, by the kit's own ``git worktree list``, a
    repository of its own) continues there instead of in a fresh attempt."""
    if not _paperclip(ev):
        return []
    observations = _task_observations(ev)
    if not observations:
        return []
    own_repos = {repo for f in inspections(ev.history) for repo, trees in (f.detail.get("repos") or {}).items()
                 if trees and trees[0] == repo}
    final_runs = {r["run_id"]: r for r in _rows(observations[-1], "runs")}
    problems, judged = [], 0
    for run in final_runs.values():
        prior_id = run.get("retry_of")
        if not prior_id or not run.get("workspace") or not run.get("idempotency_key"):
            continue
        first = next((o for o in observations if any(r["run_id"] == run["run_id"] for r in _rows(o, "runs"))), None)
        earlier = [o for o in observations if first is not None and o.index < first.index]
        if not earlier:
            continue
        before = earlier[-1]  # the last view before the click's run existed
        prior = next((r for r in _rows(before, "runs") if r["run_id"] == prior_id), None)
        if prior is None or not prior.get("workspace") or prior["status"] in _ACTIVE:
            continue
        ws = next((w for w in _rows(before, "workspaces") if w["path"] == prior["workspace"]), None)
        coord = next((c for c in _rows(before, "recovery_coordinators") if c["run_id"] == prior_id), None)
        holders = [r for r in _rows(before, "runs") if r.get("workspace") == prior["workspace"]
                   and r["status"] in _ACTIVE]
        safe = (ws is not None and ws["task_id"] == run["work_id"] and ws["strategy"] in ("task_directory",
                "git_worktree") and coord is not None and coord["state"] in ("terminal_failure", "completed")
                and not holders and prior["workspace"] in own_repos)
        if not safe:
            continue
        judged += 1
        if run["workspace"] != prior["workspace"]:
            problems.append(f"Retry run {run['run_id']} went to a fresh attempt {run['workspace']} though its prior "
                            f"run's directory {prior['workspace']} was safe to continue in")
    return _judgement("RTY-40", problems, judged, "no Retry followed a run whose directory was safe to reuse",
                      f"{judged} Retry run(s) continued in their task's own safe directory")


def check_exhausted_attempts_recorded(ev: Evidence) -> list[ClauseResult]:
    """RTY-41: once a generation's automatic retries are exhausted (the task offers Retry), every attempt stays
    on record: each failed run keeps its error code, each scheduled retry its entry."""
    if not _paperclip(ev):
        return []
    observations = _task_observations(ev)
    problems, judged = [], 0
    seen_entries: dict[tuple[str, int, int], int] = {}
    failed_codes: dict[str, str] = {}
    for obs in observations:
        for e in _rows(obs, "retry_schedule"):
            seen_entries.setdefault((e["task_id"], e["generation"], e["attempt"]), obs.index)
        for r in _rows(obs, "runs"):
            if r["status"] == "failed" and r.get("error_code"):
                failed_codes.setdefault(r["run_id"], r["error_code"])
        for t in _rows(obs, "tasks"):
            if t["status"] != "retry_offered" or not any(k[0] == t["task_id"] for k in seen_entries):
                continue
            judged += 1
            now_entries = {(e["task_id"], e["generation"], e["attempt"]) for e in _rows(obs, "retry_schedule")}
            gone = [k for k in seen_entries if k[0] == t["task_id"] and k not in now_entries]
            runs = {r["run_id"]: r for r in _rows(obs, "runs")}
            lost = [rid for rid, code in failed_codes.items() if rid in runs and runs[rid]["work_id"] == t["task_id"]
                    and runs[rid].get("error_code") != code]
            missing = [rid for rid in failed_codes if rid not in runs]
            if gone or lost or missing:
                problems.append(f"task {t['task_id']} offers Retry after its retries, but its record lost "
                                f"{len(gone)} scheduled retr(ies), {len(lost)} error code(s), {len(missing)} run(s)")
    return _judgement("RTY-41", problems[:5], judged, "no generation's retries were exhausted",
                      "exhausted attempts stayed on record with their failure codes and schedule")


PAPERCLIP_CHECKS += (check_reuse_when_safe, check_exhausted_attempts_recorded)

def check_attach_keeps_generation(ev: Evidence) -> list[ClauseResult]:
    """RTY-20: a click while the task shows a scheduled retry attaches to that automatic recovery: its run keeps
    the generation, continues the attempt count, and the generation's deadline (first failure, window) stays."""
    if not _paperclip(ev):
        return []
    observations = _task_observations(ev)
    problems, judged = [], 0
    for invoke, done in _ops(ev, "retry"):
        if done is None or done.type != "ok" or not done.value.get("created"):
            continue
        task_id = invoke.value.get("work_id")
        before = [o for o in observations if o.index < invoke.index]
        after = [o for o in observations if o.index > done.index]
        if not before or not after:
            continue
        task = next((t for t in _rows(before[-1], "tasks") if t["task_id"] == task_id), None)
        scheduled = [e for e in _rows(before[-1], "retry_schedule") if e["task_id"] == task_id
                     and e["state"] == "scheduled"]
        if task is None or task["status"] != "retry_scheduled" or len(scheduled) != 1:
            continue
        entry = scheduled[0]
        run = next((r for r in _rows(after[0], "runs") if r["run_id"] == done.value["run_id"]), None)
        if run is None or run.get("generation") is None:
            continue
        judged += 1
        if run["generation"] != entry["generation"] or (run.get("attempt") or 0) <= entry["attempt"]:
            problems.append(f"a click on task {task_id} while retry {entry['attempt']} of generation "
                            f"{entry['generation']} was scheduled made run {run['run_id']} generation "
                            f"{run['generation']} attempt {run.get('attempt')}")
        for o in after:
            for e in _rows(o, "retry_schedule"):
                if e["task_id"] == task_id and e["generation"] == entry["generation"] and (
                        e["first_failure_at"] != entry["first_failure_at"] or e["window_end"] != entry["window_end"]):
                    problems.append(f"task {task_id}'s generation {entry['generation']} deadline moved after a click")
                    break
    return _judgement("RTY-20", problems[:5], judged, "no click came while a retry was scheduled",
                      f"{judged} click(s) attached to active automatic recovery, generation and deadline kept")


PAPERCLIP_CHECKS += (check_attach_keeps_generation,)

def check_receipt_before_work(ev: Evidence) -> list[ClauseResult]:
    """RTY-02: every run a click created carries the click's durable wakeup receipt from the moment the run is
    seen at all, so no physical work of a Retry exists without its receipt (across the kit's kills at
    retry.receipt.before / .after too)."""
    if not _paperclip(ev):
        return []
    problems, judged = [], 0
    seen: set[str] = set()
    for obs in _task_observations(ev):
        receipts = {(w["idempotency_key"], w.get("run_id")) for w in _rows(obs, "wakeup_receipts")}
        for r in _rows(obs, "runs"):
            if not r.get("idempotency_key"):
                continue
            if r["run_id"] not in seen:
                seen.add(r["run_id"])
                judged += 1
            if (r["idempotency_key"], r["run_id"]) not in receipts:
                problems.append(f"run {r['run_id']} of Retry key {r['idempotency_key']!r} is {r['status']} with no "
                                f"wakeup receipt naming it (observation {obs.index})")
                break
    return _judgement("RTY-02", problems[:5], judged, "no click created a run",
                      f"{judged} Retry run(s), each with its receipt from the first time it was seen")


PAPERCLIP_CHECKS += (check_receipt_before_work,)
