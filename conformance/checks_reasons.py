"""Waiting reasons judged against what the kit itself caused: a restart alone never needs a person.

A runtime that parks every interrupted item after a restart, with any plausible reason_code, looks explained
(UI-05 holds: every item says why) and looks recovered (RI-02 accepted any ``waiting`` item). The kit knows
better: it drove the run, so it knows which causes a person is really needed for actually happened. A
reason that needs a person (``NEEDS_PERSON``) stands only if the kit's own evidence shows its cause:

- ``user_paused`` / ``user_stopped_all`` / ``user_ended``: the kit acknowledged that user stop for the item;
- ``unknown_effect_reconcile`` / ``awaiting_approval``: the witness log shows a tool execution whose effect
  class is not safe for recovery, linked (pid or parent pid) to one of the item's calls, or, when the runtime
  reports no linkable call, anywhere in the run;
- ``owner_on_other_host``: the kit restarted the runtime under another host identity;
- ``automatic_recovery_disabled``: the kit restarted with automatic recovery disabled (a start op says so);
- ``retry_exhausted``: the provider's ledger shows a failed attempt of the item's script;
- ``resource_*``, ``permission_revoked``, ``recovery_failed_*``, ``budget_*``: the kit recorded that very
  change (a fault whose ``detail.reason_code`` names it, e.g. a resource it removed, a store it damaged).

RI-08 ("a restart by itself never makes work wait for a manual Resume") is judged on the final quiescent
observation of a run that restarted: every item the kit still meant to run is running, finished, or waits
on a reason whose cause the kit saw. An unsupported reason is invalid for RI-08 and for RI-02 (work meant to
run was not recovered). A run with no restart says nothing about RI-08: unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, kit_evidence
from recoverykit.conformance.history import NOT_A_RESTART, Observation
from recoverykit.conformance.intent import Intent
from recoverykit.conformance.provider_ledger import calls
from recoverykit.model.catalogue import NEEDS_PERSON, SAFE_FOR_RECOVERY, Verdict

USER_REASONS = {"user_paused", "user_stopped_all", "user_ended", "user_cancelled"}
UNKNOWN_EFFECT_REASONS = {"unknown_effect_reconcile", "awaiting_approval"}
NEEDS_PERSON_CODES = {r.value for r in NEEDS_PERSON} | USER_REASONS


def _meant_to_run(ev: Evidence, at: int | None = None) -> set[str]:
    """Items the kit submitted that the user surely still meant to run at event ``at`` (default: the end): not
    stopped since (or resumed after the last stop), and stopped by no indeterminate control either (an ``info``
    pause may have happened: such an item is not judged, ``intent``). A "quit and stop all tasks" exit (restart
    kind stop_all_exit) is the user's stop of everything submitted before it, acknowledged or not yet."""
    intent = Intent(ev.history)
    at = (ev.history.events[-1].index + 1 if ev.history.events else 0) if at is None else at
    return {w for w in intent.submits if intent.meant_to_run(w, at)}


def _unsafe_executions_of(ev: Evidence, work_id: str) -> tuple[int, int]:
    """(unsafe executions linked to the item's calls, unsafe executions in the run) from the witness log."""
    if ev.witness is None:
        return 0, 0
    unsafe = [e for e in ev.witness.executions if e.effect_class not in {c.value for c in SAFE_FOR_RECOVERY}
              and e.effect_class != "idempotent"]
    pids = {c.get("pid") for o in ev.snapshots() for c in o.snapshot.get("tool_calls") or []
            if c.get("work_id") == work_id and c.get("pid") is not None}
    return sum(1 for e in unsafe if e.pid in pids or e.ppid in pids), len(unsafe)


def _tool_versions_changed(ev: Evidence) -> list[str]:
    """Tools the kit registered (``init`` / ``start.probe_tools``) with one version and later with another."""
    seen: dict[str, str] = {}
    changed: set[str] = set()
    for op in ev.history.ops:
        tools = op.value.get("probe_tools") if op.type == "invoke" and op.f in ("init", "start") else None
        for t in tools or []:
            name, version = str(t.get("name")), str(t.get("version"))
            if seen.get(name, version) != version:
                changed.add(name)
            seen[name] = version
    return sorted(changed)


def _caused(ev: Evidence, work_id: str, reason: str, script_ids: set[str]) -> str | None:
    """The kit's evidence for ``reason`` on ``work_id``, or None when the kit saw no such cause."""
    if reason in USER_REASONS:
        return None  # only an acknowledged stop justifies these, and such items are not meant to run
    if reason in UNKNOWN_EFFECT_REASONS:
        linked, anywhere = _unsafe_executions_of(ev, work_id)
        has_calls = any(c.get("work_id") == work_id for o in ev.snapshots() for c in o.snapshot.get("tool_calls") or [])
        if linked or (anywhere and not has_calls):
            return f"the witness log shows an unsafe tool execution ({linked or anywhere})"
        return None
    if reason == "owner_on_other_host":
        hosts = [o.value.get("host_id") for o in ev.history.ops if o.type == "invoke" and o.f in ("start", "restart")
                 and o.value.get("host_id")]
        return "the kit restarted under another host identity" if len(set(hosts)) > 1 else None
    if reason == "automatic_recovery_disabled":
        return ("the kit disabled automatic recovery" if any(
            o.type == "invoke" and (o.value.get("automatic_recovery") is False or
                                    o.value.get("recovery_policy") == "disabled") for o in ev.history.ops) else None)
    if reason == "resource_tool_version_changed":
        changed = _tool_versions_changed(ev)
        return f"the kit registered {', '.join(changed)} with another version at a start" if changed else None
    if reason == "retry_exhausted":
        failed = [c for c in calls(ev.ledger) if c.request.get("script_id") in script_ids
                  and (c.response or {}).get("status", 200) >= 400]
        return f"the provider failed {len(failed)} attempt(s)" if failed else None
    for f in ev.history.faults:
        if f.detail.get("reason_code") == reason and (f.detail.get("work_id") in (None, work_id)):
            return f"the kit caused it (fault {f.kind} at event {f.index})"
    return None


def check_parked_reasons(ev: Evidence) -> list[ClauseResult]:
    """RI-08 / RI-02: nothing the kit meant to run waits on a person for a cause the kit never saw."""
    final = ev.history.final_observation()
    restarts = [f for f in ev.history.faults if f.kind not in NOT_A_RESTART]
    if final is None or not final.snapshot.get("work_items"):
        return [_result("RI-08", Verdict.UNKNOWN, "no work item observed")]
    if not final.quiescent:
        return [_result("RI-08", Verdict.UNKNOWN, "the run never became quiescent")]
    if not restarts:
        return [_result("RI-08", Verdict.UNKNOWN, "the run never restarted")]
    meant = _meant_to_run(ev)
    scripts: dict[str, set[str]] = {}
    for script_id, work_id in ev.work_of_script().items():
        scripts.setdefault(work_id, set()).add(script_id)
    problems, judged, supported = [], 0, []
    for item in _items(final):
        if item["work_id"] not in meant or item["status"] in ("running", "finished"):
            continue
        judged += 1
        reason = item.get("reason_code") or ""
        if reason not in NEEDS_PERSON_CODES and item["status"] != "paused":
            continue  # the runtime resolves it by itself (a scheduled retry, an owner still alive ...)
        why = _caused(ev, item["work_id"], reason, scripts.get(item["work_id"], set()))
        if why is None:
            problems.append(f"{item['work_id']} is {item['status']} with reason_code {reason or '(none)'} after a "
                            f"restart, though the kit never stopped it nor caused that reason")
        else:
            supported.append(f"{item['work_id']}: {reason}: {why}")
    if problems:
        return [_result("RI-08", Verdict.INVALID, problems[0], problems),
                _result("RI-02", Verdict.INVALID, problems[0], problems)]
    return [_result("RI-08", Verdict.VALID, f"{len(restarts)} restart(s); {len(meant)} item(s) meant to run, "
                    f"{len(supported)} waiting on a cause the kit saw", supported)]


def _items(o: Observation) -> list[dict[str, Any]]:
    return o.snapshot.get("work_items") or []


REASON_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (kit_evidence(check_parked_reasons),)
