"""Durable-wait checks (profile ``waits``): when the runtime went on after an external operation, from the kit's
own evidence.

The external operation is the kit's (``probe --external``): the witness log shows when it started (the call's
``start`` record; its handle is ``op-<probe_token>``, version 1) and every reconciliation query the runtime made
(``query`` records); the kit's history shows when the kit completed, failed or hung it (``external_state``
faults) and every notification it delivered (``notify``), with the user's Pause and Resume; the provider's
ledger shows when the runtime asked the model for the continuation (the script's next step) and how often.

- WAIT-02: the continuation comes only after a notification of the version waited on (or the operation's
  completion, which polling may find), and is delivered once; one asked for after only a notification of
  another version is a turn started by a stale notification;
- WAIT-06: one asked for after a query that never answered and before the operation completed took the timeout
  for a stop;
- WAIT-05: none is asked for while the user's Pause stands (between its acknowledgement and the Resume), though
  the notification came then;
- WAIT-03: with three queries or more of one operation, the intervals between them grow (backoff), and the
  runtime asks the model nothing while it waits;
- WAIT-04: a notification the adapter acknowledged while the runtime was down is continued after the next start
  (when the run's last observation is at least ``SETTLED_AFTER_S`` later);
- WAIT-01 (the runtime's word): an observation while it waits (after its first query of the operation, or while
  its work item says it waits) shows the wait with its handle, observed version and a consumption key of its own.

A run in which no external operation started says nothing: unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement, _result, kit_evidence
from recoverykit.conformance.history import restarts
from recoverykit.conformance.provider_ledger import calls
from recoverykit.conformance.witness import Execution
from recoverykit.model.catalogue import Verdict

EXTERNAL_VERSION = "1"
SETTLED_AFTER_S = 5.0  # a notification saved during a restart and not continued this long after it: lost
INF = float("inf")


@dataclass
class Waited:
    """One external operation the runtime waited on, and what the kit saw around it."""

    execution: Execution
    script: str
    step: int
    handle: str
    done_at: float = INF  # when the kit completed or failed it, or delivered its notification
    stale: list[float] = field(default_factory=list)  # notifications of another version
    queries: list[dict[str, Any]] = field(default_factory=list)
    continuation: list[dict[str, Any]] = field(default_factory=list)  # requests of the next step
    delivered: int = 0  # continuation responses delivered whole

    @property
    def hung_at(self) -> float:
        return min((q["time"] for q in self.queries if q.get("state") == "hang"), default=INF)


def waited(ev: Evidence) -> list[Waited]:
    if ev.witness is None:
        return []
    out = []
    for e in ev.witness.executions:
        parts = e.probe_token.rsplit(".", 3)
        if len(parts) != 4 or not e.emitted or not _external(ev, e):
            continue
        w = Waited(e, parts[0], int(parts[1]), f"op-{e.probe_token}")
        for f in ev.history.faults:
            if f.kind == "external_state" and f.detail.get("handle") == w.handle and \
                    f.detail.get("state") in ("completed", "failed") and f.detail.get("version") == EXTERNAL_VERSION:
                w.done_at = min(w.done_at, f.time)
        for invoke, _ in ev.history.completions():
            if invoke.f == "notify" and invoke.value.get("handle") == w.handle:
                if invoke.value.get("version") == EXTERNAL_VERSION:
                    w.done_at = min(w.done_at, invoke.time)
                else:
                    w.stale.append(invoke.time)
        w.queries = sorted((r for r in ev.witness.records if r.get("phase") == "query" and r.get("handle") == w.handle),
                           key=lambda r: r["time"])
        for q in w.queries:  # an operation that completes by itself (``complete_after_s``): the probe says when
            if q.get("complete_at") is not None:
                w.done_at = min(w.done_at, float(q["complete_at"]))
        for c in calls(ev.ledger):
            if c.request.get("script_id") == w.script and c.request.get("step") == w.step + 1:
                w.continuation.append(c.request)
                w.delivered += bool(c.delivered)
        w.continuation.sort(key=lambda r: r["time"])
        out.append(w)
    return out


def _external(ev: Evidence, e: Execution) -> bool:
    """The execution started one of the kit's external operations (its result named the wait)."""
    return any(r.get("phase") == "query" and r.get("handle") == f"op-{e.probe_token}" for r in ev.witness.records) \
        or any(f.kind == "external_state" and f.detail.get("handle") == f"op-{e.probe_token}"
               for f in ev.history.faults) \
        or any(i.f == "notify" and i.value.get("handle") == f"op-{e.probe_token}" for i, _ in ev.history.completions())


def paused_spans(ev: Evidence, work_id: str | None, ended_by: tuple[str, ...] = ("resume",)
                 ) -> list[tuple[float, float]]:
    """(from, to): the user's Pause of ``work_id`` acknowledged, until the next of ``ended_by`` was sent."""
    spans, since = [], None
    for invoke, done in ev.history.completions():
        if invoke.value.get("work_id") != work_id:
            continue
        if invoke.f == "pause" and done is not None and done.type == "ok" and since is None:
            since = done.time
        elif invoke.f in ended_by and since is not None:
            spans.append((since, invoke.time))
            since = None
    if since is not None:
        spans.append((since, INF))
    return spans


@kit_evidence
def check_continuations(ev: Evidence) -> list[ClauseResult]:
    ids = ("WAIT-02", "WAIT-06", "WAIT-05", "WAIT-03", "WAIT-04")
    ws = waited(ev)
    if not ws:
        return [_result(c, Verdict.UNKNOWN, "no external operation was waited on") for c in ids]
    problems: dict[str, list[str]] = {c: [] for c in ids}
    judged = dict.fromkeys(ids, 0)
    work_of = ev.work_of_script()
    final = ev.history.final_observation()
    for w in ws:
        early = [r for r in w.continuation if r["time"] < w.done_at]
        if w.done_at < INF or w.stale:
            judged["WAIT-02"] += 1
        if early:
            first = early[0]["time"]
            if any(t < first for t in w.stale):
                problems["WAIT-02"].append(f"{w.handle}: the continuation (request {early[0].get('request_id')}) "
                                           "was asked for after a notification of another version only")
            elif w.hung_at < first:
                problems["WAIT-06"].append(f"{w.handle}: the continuation was asked for after a query timed out, "
                                           "before the operation completed: the timeout was taken for a stop")
            else:
                problems["WAIT-02"].append(f"{w.handle}: the continuation was asked for before any notification "
                                           "of the operation or its completion")
        if w.delivered > 1:
            problems["WAIT-02"].append(f"{w.handle}: the continuation was admitted {w.delivered} times")
        if w.hung_at < INF:
            judged["WAIT-06"] += 1
        for start, end in paused_spans(ev, work_of.get(w.script)):
            notified_then = start <= w.done_at < end
            if not notified_then:
                continue
            judged["WAIT-05"] += 1
            stale = [r for r in w.continuation if start <= r["time"] < end]
            if stale:
                problems["WAIT-05"].append(f"{w.handle}: the continuation was asked for while the user's Pause stood "
                                           f"(request {stale[0].get('request_id')}): a stale wakeup started a turn")
        if len(w.queries) >= 3:
            judged["WAIT-03"] += 1
            gaps = [b["time"] - a["time"] for a, b in zip(w.queries, w.queries[1:], strict=False)]
            if gaps[-1] <= gaps[0] * 1.2:
                problems["WAIT-03"].append(f"{w.handle}: queries {len(w.queries)} at intervals "
                                           f"{[round(g, 2) for g in gaps]} s: no backoff")
            idle = [c.request for c in calls(ev.ledger) if c.request.get("script_id") == w.script
                    and w.execution.finished is not None and w.execution.finished < c.request["time"] < w.done_at]
            if idle:
                problems["WAIT-03"].append(f"{w.handle}: {len(idle)} model request(s) while waiting on it")
        for notified in _notified_while_down(ev, w.handle):
            judged["WAIT-04"] += 1
            settled = final is not None and final.time - notified >= SETTLED_AFTER_S
            if settled and not any(r["time"] > notified for r in w.continuation):
                problems["WAIT-04"].append(f"{w.handle}: its notification was acknowledged while the runtime was "
                                           "down, and the work never went on after the start")
    texts = {"WAIT-02": "each continuation after its own version's notification, once",
             "WAIT-06": "no continuation on a timed-out query", "WAIT-05": "no turn while the Pause stood",
             "WAIT-03": "queries with backoff, no model request while waiting",
             "WAIT-04": "notifications saved during a restart were continued after it"}
    return [r for c in ids for r in _judgement(c, problems[c], judged[c], "the run had no such moment", texts[c])]


def _notified_while_down(ev: Evidence, handle: str) -> list[float]:
    """When a ``notify`` of ``handle`` was acknowledged after a kill and before the next start was."""
    kills = [f.time for f in restarts(ev.history)]
    starts = [done.time for invoke, done in ev.history.completions()
              if invoke.f == "start" and done is not None and done.type == "ok"]
    out = []
    for invoke, done in ev.history.completions():
        if invoke.f != "notify" or invoke.value.get("handle") != handle or done is None or done.type != "ok":
            continue
        last_kill = max((t for t in kills if t <= invoke.time), default=None)
        if last_kill is not None and not any(last_kill < t <= invoke.time for t in starts):
            out.append(done.time)
    return out


def check_saved_waits(ev: Evidence) -> list[ClauseResult]:
    """WAIT-01 on the runtime's own account, while it waits."""
    ws = waited(ev)
    if not ws:
        return [_result("WAIT-01", Verdict.UNKNOWN, "no external operation was waited on")]
    problems, judged = [], 0
    work_of = ev.work_of_script()
    for w in ws:
        # while it waits: after its first reconciliation query, or while its work item says it waits
        queried = w.queries[0]["time"] if w.queries else INF
        during = [o for o in ev.snapshots() if w.execution.finished is not None and
                  w.execution.finished < o.time < w.done_at and o.snapshot.get("waits") is not None and
                  (o.time > queried or _says_waiting(o.snapshot, work_of.get(w.script)))]
        if not during:
            continue
        judged += 1
        waits = during[-1].snapshot["waits"]
        mine = [x for x in waits if x.get("handle") == w.handle]
        keys = [x.get("consumption_key") for x in waits]
        if not mine:
            problems.append(f"{w.handle}: not among the waits observed while the runtime waited on it")
        elif mine[0].get("observed_version") is None or keys.count(mine[0].get("consumption_key")) != 1:
            problems.append(f"{w.handle}: saved without an observed version or a consumption key of its own")
    return _judgement("WAIT-01", problems, judged, "no observation while a wait was open",
                      f"{judged} wait(s) saved with handle, observed version and a unique consumption key")


def _says_waiting(snapshot: dict[str, Any], work_id: str | None) -> bool:
    return any(i.get("work_id") == work_id and i.get("status") == "waiting"
               for i in snapshot.get("work_items") or [])


WAIT_CHECKS = (check_continuations, check_saved_waits)
