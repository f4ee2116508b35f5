"""The model's prediction for the state after a restart, compared with what the adapter shows.

The pre-fault observation (taken while the runtime is held at the point) becomes a small model
state: one run intent per observed work item with its desired_state and control version. The
scenario's user action during recovery (pause, end) is applied as the model applies it, then
``model.recovery.restart(state, kind)`` gives the predicted desired_state of every item. After
recovery the adapter's final observation must agree: the same desired_state, or ``done`` where the
model says ``run`` (the work went on and finished, which is what "continue after restart" means).
Anything else breaks FA-01 (a restart changed what the user asked for), FA-14 when the user's own
action during recovery was lost, or FA-02 when a changed host identity took the work over silently.

This checks the user-visible intent only; the lockstep machine (``conformance.lockstep``) compares the
whole snapshot. Items submitted while the fault was in flight are indefinite: any outcome is accepted; so is a
Pause or End whose reply the fault cut: the item may show the state the model predicts with or without it.
"""

from __future__ import annotations

from typing import Any

from recoverykit.chaos.cases import Case
from recoverykit.conformance.checker import ClauseResult, _result
from recoverykit.conformance.history import History
from recoverykit.model import recovery as model_recovery
from recoverykit.model import transitions
from recoverykit.model.catalogue import DesiredState, RestartKind, Verdict, WorkKind
from recoverykit.model.errors import RecoveryKitError
from recoverykit.model.events import End, Pause
from recoverykit.model.records import RunIntent
from recoverykit.model.state import ModelState

_HOST = "chaos-host-a"


def predict(before: dict[str, Any], kind: RestartKind, during: str | None = None,
            during_work: tuple[str, ...] = ()) -> dict[str, DesiredState]:
    """work_id -> the desired_state the model predicts once the restart of ``kind`` is over."""
    work = {}
    for item in before.get("work_items") or []:
        inputs = item.get("inputs") or [{}]
        work[item["work_id"]] = RunIntent(
            work_id=item["work_id"], kind=WorkKind(item.get("kind") or "chat_request"),
            original_input=str(inputs[0].get("text", "")), desired_state=DesiredState(item["desired_state"]),
            control_version=int(item.get("control_version") or 0), host_identity=item.get("host_id") or _HOST)
    state = ModelState(work=work, host=_HOST)
    for work_id in during_work:  # as the model applies the user's action: End of finished work changes nothing
        if during in ("pause", "end") and work_id in state.work:
            state = transitions.apply(state, Pause(work_id=work_id) if during == "pause" else End(work_id=work_id))
    after = model_recovery.restart(state, kind)
    return {w: intent.desired_state for w, intent in after.work.items()}


def _clause_for(kind: RestartKind, during: str | None) -> str:
    if during in ("pause", "end"):
        return "FA-14"
    return "FA-02" if kind is RestartKind.HOST_IDENTITY_CHANGE else "FA-01"


def check_prediction(before: dict[str, Any], history: History, case: Case, during: str | None) -> list[ClauseResult]:
    kind = RestartKind(case.kind)
    clause_id = _clause_for(kind, during)
    final = history.final_observation()
    if final is None or final.snapshot.get("work_items") is None:
        return [_result(clause_id, Verdict.UNKNOWN, "no final observation of work_items")]
    during_work = tuple(i.value["work_id"] for i, d in history.completions()
                        if i.f in ("pause", "end") and d is not None and d.type == "ok")
    # a Pause / End whose reply the fault cut (info, or none) may or may not have happened: either state holds
    maybe_stopped = {i.value["work_id"]: DesiredState.PAUSED if i.f == "pause" else DesiredState.CANCELLED
                     for i, d in history.completions() if i.f in ("pause", "end") and (d is None or d.type == "info")}
    try:
        predicted = predict(before, kind, during, during_work)
    except (RecoveryKitError, ValueError) as exc:
        return [_result(clause_id, Verdict.UNKNOWN, f"the model could not predict this case: {exc}")]
    if not predicted:
        return [_result(clause_id, Verdict.UNKNOWN, "no work item existed when the fault hit")]
    observed = {i["work_id"]: i for i in final.snapshot["work_items"]}
    problems = []
    for work_id, desired in predicted.items():
        item = observed.get(work_id)
        if item is None:
            problems.append(f"{work_id} vanished after {kind.value} (the model keeps it, desired {desired.value})")
            continue
        seen = item["desired_state"]
        if seen == desired.value or (desired is DesiredState.RUN and seen == DesiredState.DONE.value):
            continue
        if work_id in maybe_stopped and seen == maybe_stopped[work_id].value:
            continue
        problems.append(f"{work_id}: after {kind.value} the model predicts desired_state {desired.value}, the "
                        f"adapter shows {seen} ({item.get('status')}, {item.get('reason_code')})")
    if kind is RestartKind.HOST_IDENTITY_CHANGE:
        for lease in final.snapshot.get("leases") or []:
            owner = lease.get("owner") or {}
            if owner.get("host_id") not in (None, _HOST) and lease["work_id"] in predicted:
                prior = [i for i in before.get("work_items") or [] if i["work_id"] == lease["work_id"]]
                if prior and prior[0].get("status") == "running":
                    problems.append(f"{lease['work_id']} was running on {_HOST} and is now leased by "
                                    f"{owner.get('host_id')} (a silent takeover)")
    if problems:
        return [_result(clause_id, Verdict.INVALID, problems[0], problems)]
    return [_result(clause_id, Verdict.VALID, f"{len(predicted)} work items as the model predicts after {kind.value}")]
