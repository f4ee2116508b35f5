"""History checks of what a restart's recovery does to a Paperclip task's records (seed 001).

Kept apart from ``checks_paperclip`` (admission, #19759, the schedule) and ``checks_paperclip_work`` (the task's
work and turns) because these judge the records a restarted runtime finds and adopts: a run's result accepted but
not yet finalized (RTY-25: it goes to its finalizer, and the provider's ledger shows no second agent making it
again), the coordinators a restart found open (RTY-15: a settlement as a failure only of a claimed coordinator
without a result, for a failed run), and the failure evidence recorded before a restart (RTY-33: intact after
the sweep of every start).

A check that finds nothing to judge answers unknown, never valid.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement, kit_evidence
from recoverykit.conformance.checks_paperclip import (
    _ops,
    _paperclip,
    _rows,
    _task_observations,
    requests_of,
    task_scripts,
)
from recoverykit.conformance.history import Observation, restarts

_TERMINAL = ("terminal_failure", "completed")


def _coordinators(obs: Observation) -> dict[str, dict[str, Any]]:
    return {c["run_id"]: c for c in _rows(obs, "recovery_coordinators")}


def _runs(obs: Observation) -> dict[str, dict[str, Any]]:
    return {r["run_id"]: r for r in _rows(obs, "runs")}


def _around_restarts(ev: Evidence) -> list[tuple[Observation, Any, list[Observation]]]:
    """(the last task observation before a restart, the restart, the task observations after it)."""
    observations = _task_observations(ev)
    out = []
    for fault in restarts(ev.history):
        before = [o for o in observations if o.index < fault.index]
        after = [o for o in observations if o.index > fault.index]
        if before and after:
            out.append((before[-1], fault, after))
    return out


@kit_evidence
def check_accepted_result_finalized(ev: Evidence) -> list[ClauseResult]:
    """RTY-25: a run whose provider result was accepted but not yet finalized when the runtime went down (its
    coordinator showing ``result`` ``accepted`` in the last observation before the restart: the runtime's word)
    goes to its existing finalizer: it ends ``succeeded``, and, by the provider's ledger, no request of its task's
    script arrives after the restart until a deliberate click on the task (no second agent reproducing it)."""
    if not _paperclip(ev):
        return []
    scripts = task_scripts(ev)
    clicks = [(i.time, i.value.get("work_id")) for i, _ in _ops(ev, "retry")]
    problems, judged, seen = [], 0, set()
    for before, fault, after in _around_restarts(ev):
        runs = _runs(before)
        for run_id, c in _coordinators(before).items():
            run = runs.get(run_id)
            if c.get("result") != "accepted" or c["state"] in _TERMINAL or run is None or run_id in seen:
                continue
            seen.add(run_id)
            task_id = run["work_id"]
            final = _runs(after[-1]).get(run_id)
            if final is None or task_id not in scripts:
                continue
            judged += 1
            if final["status"] != "succeeded":
                problems.append(f"run {run_id} had its result accepted before the restart but ended {final['status']} "
                                f"({final.get('error_code')}), not finalized with it")
            click = min((t for t, w in clicks if w == task_id and t > fault.time), default=float("inf"))
            again = [r for r in requests_of(ev, scripts[task_id], fault.time) if float(r.get("time", 0)) < click]
            if again:
                problems.append(f"run {run_id} had its result accepted before the restart, yet the provider saw "
                                f"{len(again)} request(s) of its task after it with no click: a second agent made "
                                f"the result again")
    return _judgement("RTY-25", problems, judged, "no restart came while an accepted result waited for its finalizer",
                      f"{judged} accepted result(s) finalized after a restart, none reproduced")


def check_settles_only_eligible(ev: Evidence) -> list[ClauseResult]:
    """RTY-15: a coordinator a restart found open (neither ``terminal_failure`` nor ``completed`` in the last
    observation before it) and later settled is settled as ``terminal_failure`` only when it carried no result
    and its run had failed (in the first observation showing the settlement); a coordinator already settled
    never changes again, and a ``reattach`` claim (a live runner) is never settled as a failure. Judged on the
    conditions the kit can bring about: a result accepted before the restart (``run.finalize.before``) and
    failed re-preparations (#19759). Another owner's claim and a coordinator finalizing elsewhere have no request
    in the protocol; a reattach claim needs a live runner the reference does not keep across a restart."""
    if not _paperclip(ev):
        return []
    observations = _task_observations(ev)
    problems, judged, seen = [], 0, set()
    for before, _fault, after in _around_restarts(ev):
        for run_id, c in _coordinators(before).items():
            if c["state"] in _TERMINAL or run_id in seen:
                continue
            settled = next((o for o in after if _coordinators(o).get(run_id, {}).get("state") in _TERMINAL), None)
            if settled is None:
                continue
            seen.add(run_id)
            judged += 1
            now = _coordinators(settled)[run_id]
            prior = [o for o in observations if o.index < settled.index]
            last = _coordinators(prior[-1]).get(run_id, c) if prior else c
            if now["state"] != "terminal_failure":
                continue
            run = _runs(settled).get(run_id) or {}
            if last.get("result") not in (None, "failed"):
                problems.append(f"run {run_id}'s coordinator held result {last.get('result')!r} and was settled as "
                                f"terminal_failure")
            if run.get("status") != "failed":
                problems.append(f"run {run_id}'s coordinator was settled as terminal_failure while the run was "
                                f"{run.get('status')}")
            if last.get("claim_kind") == "reattach":
                problems.append(f"run {run_id}'s reattach claim (a live runner) was settled as terminal_failure")
    for earlier, later in pairwise(observations):
        for run_id, c in _coordinators(earlier).items():
            now = _coordinators(later).get(run_id)
            if c["state"] in _TERMINAL and now is not None and now["state"] != c["state"]:
                problems.append(f"run {run_id}'s coordinator, settled {c['state']}, became {now['state']}")
    return _judgement("RTY-15", sorted(set(problems)), judged, "no coordinator open at a restart was settled later",
                      f"{judged} coordinator(s) open at a restart settled, a failure only without a result and "
                      f"for a failed run")


def check_failure_evidence_intact(ev: Evidence) -> list[ClauseResult]:
    """RTY-33: failure evidence recorded before a restart stays intact through what the restarted runtime adopts
    (the maintenance sweep of every start): a run seen failed keeps its status and error code, a receipt seen
    failed stays failed, a coordinator seen ``terminal_failure`` keeps its state and error code, in every later
    observation that lists them. Historical records the kit cannot plant (legacy runs, retained leases) are not
    exercised; the records are the ones the kit's own scenarios failed before their restarts."""
    if not _paperclip(ev):
        return []
    problems, judged, seen = [], 0, set()
    for before, _fault, after in _around_restarts(ev):
        failed = {("run", r["run_id"]): (r["status"], r.get("error_code")) for r in _rows(before, "runs")
                  if r["status"] == "failed" and r["work_id"] in {t["task_id"] for t in _rows(before, "tasks")}}
        failed |= {("receipt", w["idempotency_key"]): (w["status"], None) for w in _rows(before, "wakeup_receipts")
                   if w["status"] == "failed"}
        failed |= {("coordinator", c["run_id"]): (c["state"], c.get("error_code"))
                   for c in _rows(before, "recovery_coordinators") if c["state"] == "terminal_failure"}
        for key, was in failed.items():
            if key not in seen:
                seen.add(key)
                judged += 1
            for obs in after:
                now = _evidence(obs, key)
                if now is not None and now != was:
                    problems.append(f"{key[0]} {key[1]}, failed before the restart as {was}, shows {now} after it "
                                    f"(observation {obs.index})")
                    break
    return _judgement("RTY-33", sorted(set(problems))[:5], judged, "no failure was recorded before a restart",
                      f"{judged} failure record(s) intact through the restarts' sweeps")


def _evidence(obs: Observation, key: tuple[str, str]) -> tuple[Any, Any] | None:
    kind, ident = key
    if kind == "run":
        r = _runs(obs).get(ident)
        return None if r is None else (r["status"], r.get("error_code"))
    if kind == "receipt":
        w = next((w for w in _rows(obs, "wakeup_receipts") if w["idempotency_key"] == ident), None)
        return None if w is None else (w["status"], None)
    c = _coordinators(obs).get(ident)
    return None if c is None else (c["state"], c.get("error_code"))


RECORD_CHECKS = (check_accepted_result_finalized, check_settles_only_eligible, check_failure_evidence_intact)
