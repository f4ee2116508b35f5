"""Resource checks: what a runtime does when something it needs went missing during downtime.

The kit itself takes the resource away between a kill and the next start, and records it in the history
(fault ``resource_missing``: which resource, whose script, whose work item; later ``resource_restored``):
the model its provider then answers 404 ``model_not_found`` for, the key it answers 401 for, the working
directory it created and removed, the probe tool whose declared version it changed. The window of a
variant runs from the change to the restoration. Everything is judged from evidence the kit owns, the
provider's ledger (model and key fingerprint of every request, what was answered) and the probe tools'
witness log (what started, in which directory); only the waiting reason is the runtime's word:

- RES-01: before continuing, the resource is rechecked: nothing of the work goes on while it is missing,
  no tool of it starts and its final answer is not delivered;
- RES-02: a precise waiting reason, never an automatic switch: the item is observed ``waiting`` with the
  reason code of exactly that resource (a generic or made-up one fails), every request names the model and
  carries the key the kit gave (``init``), and every tool of a session runs in the session's directory;
- RES-04: a persistent fault keeps the pending-recovery record: after each restart and each Retry while the
  resource is still missing the item is there, still meant to run, waiting (never deleted, failed or
  ended) and the Retry was accepted;
- RES-06: once the resource is back and the user took the offered action (Resume / Retry), the held work
  continues: the provider delivers its final answer and the item ends finished.

A run with no resource change gives ``unknown``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, kit_evidence
from recoverykit.conformance.checks_crosscheck import _verdict
from recoverykit.conformance.history import Observation
from recoverykit.conformance.provider_ledger import calls

MISSING, RESTORED = "resource_missing", "resource_restored"  # the kit's faults (history)
REASONS: dict[str, str] = {  # resource kind -> the one precise waiting reason
    "model": "resource_model_unavailable",
    "credentials": "resource_missing_credentials",
    "working_dir": "resource_missing_directory",
    "tool_version": "resource_tool_version_changed",
}
PARKED = ("waiting", "paused", "failed")


@dataclass(frozen=True)
class Variant:
    """One resource taken away from one work item (its script), and when it came back."""

    resource: str
    script_id: str
    work_id: str | None
    start: float
    start_index: int
    end: float
    end_index: int
    detail: dict[str, Any]

    @property
    def reason(self) -> str:
        return REASONS.get(self.resource, "")

    def within(self, t: float) -> bool:
        return self.start < t < self.end

    def label(self) -> str:
        return f"{self.resource} of {self.work_id or self.script_id}"

    @property
    def what(self) -> str:
        """The change, in words: "the model of w-1 was missing"."""
        work = self.work_id or f"script {self.script_id}"
        return {"model": f"the model of {work} was missing", "credentials": f"the credential of {work} was revoked",
                "working_dir": f"the working directory of {work} was missing",
                "tool_version": f"the tool {work} calls had changed version"}.get(self.resource,
                                                                                  f"{self.label()} was missing")


def variants(ev: Evidence) -> list[Variant]:
    faults = ev.history.faults
    out = []
    for f in faults:
        if f.kind != MISSING:
            continue
        back = next((g for g in faults if g.kind == RESTORED and g.index > f.index
                     and g.detail.get("script_id") == f.detail.get("script_id")
                     and g.detail.get("resource") == f.detail.get("resource")), None)
        out.append(Variant(str(f.detail.get("resource")), str(f.detail.get("script_id")), f.detail.get("work_id"),
                           f.time, f.index, back.time if back else float("inf"),
                           back.index if back else 1 << 62, dict(f.detail)))
    return out


def _item(o: Observation, work_id: str | None) -> dict[str, Any] | None:
    return next((w for w in o.snapshot.get("work_items") or [] if w["work_id"] == work_id), None)


def _window(ev: Evidence, v: Variant) -> list[Observation]:
    return [o for o in ev.snapshots() if v.start_index < o.index < v.end_index
            and o.snapshot.get("work_items") is not None]


def _script_of(token: str) -> str:
    return token.rsplit(".", 3)[0] if token.count(".") >= 3 else token


def _init_value(ev: Evidence) -> dict[str, Any]:
    """What the kit gave in ``init`` (model, key fingerprint) and, under ``declared``, what the adapter declared."""
    for invoke, done in ev.history.completions():
        if invoke.f == "init":
            declared = (done.value.get("resources") if done is not None and done.type == "ok" else None)
            return {**invoke.value, "declared": declared}
    return {}


def _final_answers(ev: Evidence, script_id: str) -> list[Any]:
    """Delivered answers of the script's last step that asked for no tool: its final answer."""
    return [c for c in calls(ev.ledger) if c.request.get("script_id") == script_id and c.delivered
            and c.request.get("script_steps") is not None and c.request.get("step") == c.request["script_steps"] - 1
            and not c.response.get("probe_tokens") and c.response.get("status", 200) == 200]


def check_recheck(ev: Evidence) -> list[ClauseResult]:
    """RES-01: nothing of a work item goes on while a resource it needs is missing."""
    problems, judged = [], 0
    executions = ev.witness.executions if ev.witness is not None else []
    for v in variants(ev):
        judged += 1
        for e in executions:
            if _script_of(e.probe_token) == v.script_id and v.within(e.started):
                problems.append(f"{v.what}, yet its tool {e.tool} started (probe {e.probe_token}, "
                                f"pid {e.pid}, cwd {e.cwd}): the work went on without rechecking")
        for c in _final_answers(ev, v.script_id):
            if v.within(c.response["time"]):
                problems.append(f"{v.what}, yet the provider delivered its final answer "
                                f"({c.request.get('request_id')}, model {c.request.get('model')!r})")
        for o in _window(ev, v):
            item = _item(o, v.work_id)
            if item is not None and item["status"] == "finished":
                problems.append(f"{v.what}, yet {v.work_id} was observed finished "
                                f"(observation {o.index})")
                break
    return [_verdict("RES-01", problems, judged, "no resource was taken away during downtime")]


def check_precise_no_switch(ev: Evidence) -> list[ClauseResult]:
    """RES-02: the precise waiting reason for the resource; never another model, key or directory."""
    found = variants(ev)
    if not found:
        return [_verdict("RES-02", [], 0, "no resource was taken away during downtime")]
    problems, judged = [], 0
    init = _init_value(ev)
    kinds = set(init["declared"]) if init.get("declared") is not None else {v.resource for v in found}
    ledger = [c for c in calls(ev.ledger) if c.request.get("script_id")]
    if "model" in kinds and init.get("model"):
        judged += 1
        problems += [f"request {c.request.get('request_id')} (script {c.request['script_id']}) names model "
                     f"{c.request.get('model')!r}, not {init['model']!r} that the runtime was given: an automatic "
                     "switch of model" for c in ledger if c.request.get("model") != init["model"]][:3]
    if "credentials" in kinds and init.get("api_key_sha256"):
        judged += 1
        problems += [f"request {c.request.get('request_id')} (script {c.request['script_id']}) carries another "
                     f"credential (key {c.request.get('api_key_sha256')}, given {init['api_key_sha256']}): an "
                     "automatic switch of account" for c in ledger
                     if c.request.get("api_key_sha256") != init["api_key_sha256"]][:3]
    workdirs = _working_dirs(ev)
    for e in ev.witness.executions if ev.witness is not None else []:
        wanted = workdirs.get(_script_of(e.probe_token))
        if wanted is not None:
            judged += 1
            if e.cwd is None or os.path.realpath(e.cwd) != os.path.realpath(wanted):
                problems.append(f"tool {e.tool} of script {_script_of(e.probe_token)} ran in {e.cwd!r}, not in the "
                                f"session's working directory {wanted!r}: an automatic switch of directory")
    for v in found:
        judged += 1
        stop = _first_user_stop(ev, v)
        window = [o for o in _window(ev, v) if stop is None or o.index < stop]  # after a user's Pause: its reason
        shown = [o for o in window if (_item(o, v.work_id) or {}).get("status") in PARKED]
        wrong = [(o, _item(o, v.work_id)) for o in shown if _item(o, v.work_id)["reason_code"] != v.reason
                 or _item(o, v.work_id)["status"] != "waiting"]
        if wrong:
            o, item = wrong[0]
            problems.append(f"{v.what} and {v.work_id} was {item['status']} with reason "
                            f"{item['reason_code']!r} (observation {o.index}); the precise reason is "
                            f"waiting / {v.reason!r}")
        elif not shown and any(_item(o, v.work_id) is not None for o in window):  # gone altogether: RES-04
            problems.append(f"{v.what} and {v.work_id} was never observed waiting with "
                            f"{v.reason!r} ({len(window)} observations in between)")
    return [_verdict("RES-02", problems, judged, "no resource was taken away during downtime")]


def _first_user_stop(ev: Evidence, v: Variant) -> int | None:
    """The index of the user's pause, end or stop all of the item in force while its resource was missing: one sent
    before and not resumed by then (REC-02: the user's stop comes before a resource's reason), or the first sent
    meanwhile."""
    before = None
    for op in ev.history.ops:
        if op.type != "invoke" or op.time >= v.start:
            continue
        if op.f in ("pause", "end", "stop_all") and op.value.get("work_id") in (None, v.work_id):
            before = op.index
        elif op.f == "resume" and op.value.get("work_id") == v.work_id:
            before = None
    if before is not None:
        return before
    return next((op.index for op in ev.history.ops if op.type == "invoke" and op.f in ("pause", "end", "stop_all")
                 and v.within(op.time) and op.value.get("work_id") in (None, v.work_id)), None)


def _working_dirs(ev: Evidence) -> dict[str, str]:
    """script id -> the working directory the kit gave its session (``submit.working_dir``)."""
    from recoverykit.conformance.provider_script import SCRIPT_TAG_RE
    out = {}
    for op in ev.history.ops:
        if op.type == "invoke" and op.f == "submit" and op.value.get("working_dir"):
            for script_id in SCRIPT_TAG_RE.findall(str(op.value.get("text", ""))):
                out[script_id] = str(op.value["working_dir"])
    return out


def check_record_kept(ev: Evidence) -> list[ClauseResult]:
    """RES-04: while the fault persists, every restart and every Retry leaves the work item kept and waiting."""
    problems, judged = [], 0
    starts = [op for op in ev.history.ops if op.type == "invoke" and op.f == "start"]  # the runtime was down
    for v in variants(ev):
        window = _window(ev, v)
        if _first_user_stop(ev, v) is not None:
            continue  # the user changed the intent meanwhile: the record may rightly change
        for o in window:
            item = _item(o, v.work_id)
            if item is None:
                problems.append(f"{v.what} and {v.work_id} is gone from work_items (observation "
                                f"{o.index}): a persistent fault deleted the task")
                break
            if item["desired_state"] in ("paused", "cancelled") or item["status"] in ("failed", "cancelled"):
                problems.append(f"{v.what} and {v.work_id} became {item['status']} / desired_state "
                                f"{item['desired_state']} (observation {o.index}): the pending-recovery record "
                                "was given up")
                break
        events = [("a restart", s.index) for s in starts if v.within(s.time)]
        for invoke, done in ev.history.completions():
            if invoke.f == "resume" and invoke.value.get("work_id") == v.work_id and v.within(invoke.time):
                went_on = any((_item(o, v.work_id) or {}).get("status") == "finished" for o in window
                              if o.index < invoke.index)  # a finished item refuses Resume rightly (RES-01 said why)
                if done is not None and done.type == "fail" and not went_on:
                    problems.append(f"{v.what} and the offered Retry (resume, op {invoke.index}) was "
                                    f"refused: {done.value.get('code')}")
                events.append(("a Retry", invoke.index))
        for what, at in events:
            settled = next((o for o in window if o.index > at and o.quiescent), None)
            if settled is None:
                continue
            judged += 1
            item = _item(settled, v.work_id)
            if item is None or item["status"] == "finished":
                continue  # gone (said above), or it went on without the resource (RES-01)
            if item["status"] != "waiting" or not item.get("reason_code"):
                problems.append(f"{v.what}, still so after {what} (op {at}), and {v.work_id} was "
                                f"{item['status']} (reason {item.get('reason_code')!r}) at observation "
                                f"{settled.index}, not waiting on its pending-recovery record")
    return [_verdict("RES-04", problems, judged, "no restart or Retry while a resource was missing was followed "
                                                "by a settled observation")]


def check_continues(ev: Evidence) -> list[ClauseResult]:
    """RES-06: the resource restored and the offered action taken, the held work goes on to its final answer."""
    problems, judged = [], 0
    final = ev.history.final_observation()
    for v in variants(ev):
        resumed = [op for op in ev.history.ops if op.type == "invoke" and op.f == "resume"
                   and op.value.get("work_id") == v.work_id and op.index > v.end_index]
        if v.end == float("inf") or not resumed or final is None or not final.quiescent:
            continue
        if any((_item(o, v.work_id) or {}).get("status") == "finished" for o in _window(ev, v)):
            continue  # never held: it went on without the resource (RES-01)
        judged += 1
        answers = [c for c in _final_answers(ev, v.script_id) if c.request["time"] > v.end]
        item = _item(final, v.work_id)
        if not answers or item is None or item["status"] != "finished":
            problems.append(f"{v.label()} was restored and the user resumed it (op {resumed[0].index}), but the "
                            f"held work did not continue: {len(answers)} final answers delivered since, and it "
                            f"ended {item['status'] if item else 'missing'} "
                            f"({item.get('reason_code') if item else ''})")
    return [_verdict("RES-06", problems, judged, "no resource was restored and then resumed in a settled run")]


# RES-04 rests on what observe says of the item (kept, waiting); the others on the ledger and the witness log
RESOURCE_CHECKS = (kit_evidence(check_recheck), kit_evidence(check_precise_no_switch), check_record_kept,
                   kit_evidence(check_continues))
