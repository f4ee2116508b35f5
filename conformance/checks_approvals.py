"""Approval checks (profile ``approvals``): what ran under which one-time approval, from the kit's own evidence.

Seed 000's safety boundary: within the scope of an uncertain effect every operation other than a trusted read
needs a one-time approval (APR-02), bound to the call and to the unknown-effect set (APR-03); seed 003: an
accepted approval is consumed once and an unaccepted one is never approved automatically (APR-06), and one not
granted stays so across a restart (APR-07).

- ``check_approved_executions`` (kit evidence): an execution *needs* an approval when the witness log shows it
  is an unknown-class probe of a script that started after another unknown-class execution of that script never
  gave out its result (the uncertain effect; the latest such is the one its approval must postdate). The user's
  grants are the kit's own ``approve`` operations (invoked, not refused); which approval is for which call is
  the runtime's ``tool_call_id`` (protocol 1.3) matched to the provider's ledger, where the kit wrote each
  call's probe token. Broke APR-01: it ran with no grant of its own after a call of another conversation (another
  script, submitted to another session) was approved; APR-02: it ran with no grant before it; APR-06: one call
  ran more often than it was granted; APR-03: its latest grant came before the uncertain effect it ran under (an
  older effect set).
- ``check_approval_states`` (the runtime's word): an approval shown approved or consumed before any ``approve``
  of it was invoked, or anything but denied after the user denied it (APR-06), and one pending before a restart
  that is anything but pending after it with no decision of the user's between (APR-07: neither auto-granted
  nor lost).

A runtime that does not observe ``approvals`` is not judged here (unknown): it may refuse instead of asking.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement, _result, kit_evidence, unobserved
from recoverykit.conformance.checks_waits import paused_spans
from recoverykit.conformance.history import restarts
from recoverykit.conformance.probe_tools import UNCLASSIFIED
from recoverykit.conformance.witness import Execution
from recoverykit.model.catalogue import Verdict

UNKNOWN_CLASSES = ("unknown", UNCLASSIFIED)


def _script(token: str) -> str:
    return token.rsplit(".", 3)[0]


def needing_approval(ev: Evidence) -> list[tuple[Execution, Execution]]:
    """(execution, the uncertain effect it ran under) for every execution that needed a one-time approval."""
    if ev.witness is None:
        return []
    unknown = [e for e in ev.witness.executions if e.effect_class in UNKNOWN_CLASSES]
    out = []
    for e in unknown:
        cut = [u for u in unknown if u.probe_token != e.probe_token and _script(u.probe_token) == _script(e.probe_token)
               and u.started < e.started and u.emitted is False]
        if cut:
            out.append((e, max(cut, key=lambda u: u.started)))
    return out


def token_of_call(ledger: list[dict[str, Any]]) -> dict[str, str | None]:
    """The provider's tool call id -> the probe token it carried (None when ids repeat across responses)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for r in ledger:
        if r.get("event") == "response":
            for call_id, token in zip(r.get("call_ids") or [], r.get("probe_tokens") or [], strict=False):
                seen[str(call_id)].add(str(token))
    return {call_id: next(iter(tokens)) if len(tokens) == 1 else None for call_id, tokens in seen.items()}


def approvals_seen(ev: Evidence) -> dict[str, dict[str, Any]]:
    """approval_id -> its latest record in any observation."""
    out: dict[str, dict[str, Any]] = {}
    for obs in ev.snapshots():
        for a in obs.snapshot.get("approvals") or []:
            out[a["approval_id"]] = a
    return out


def decisions(ev: Evidence, name: str) -> dict[str, list[float]]:
    """approval_id -> when each ``name`` (approve / deny) of it was invoked, of those not definitely refused."""
    out: dict[str, list[float]] = defaultdict(list)
    for invoke, done in ev.history.completions():
        if invoke.f == name and (done is None or done.type != "fail"):
            out[invoke.value.get("approval_id")].append(invoke.time)
    return out


def granted_at(ev: Evidence) -> dict[str, float]:
    """probe token -> the first time the user invoked ``approve`` of an approval for its call (protocol 1.3)."""
    if "approvals" not in ev.observes:
        return {}
    tokens, grants = token_of_call(ev.ledger), decisions(ev, "approve")
    out: dict[str, float] = {}
    for approval_id, a in approvals_seen(ev).items():
        token = tokens.get(str(a.get("tool_call_id"))) if a.get("tool_call_id") is not None else None
        if token is not None and grants.get(approval_id):
            out[token] = min(out.get(token, float("inf")), min(grants[approval_id]))
    return out


@kit_evidence
def check_approved_executions(ev: Evidence) -> list[ClauseResult]:
    ids = ("APR-01", "APR-02", "APR-03", "APR-06")
    if "approvals" not in ev.observes:
        return [unobserved(c, "approvals") for c in ids]
    needed = needing_approval(ev)
    if not needed:
        return [_result(c, Verdict.UNKNOWN, "no execution needed an approval in this run") for c in ids]
    tokens = token_of_call(ev.ledger)
    grants = decisions(ev, "approve")
    for_token: dict[str, list[str]] = defaultdict(list)
    mapped, seen = 0, approvals_seen(ev)
    for approval_id, a in seen.items():
        token = tokens.get(str(a.get("tool_call_id"))) if a.get("tool_call_id") is not None else None
        if token is not None:
            for_token[token].append(approval_id)
            mapped += 1
    if seen and not mapped:  # approvals were asked, but the kit cannot tell which call each one allows
        return [_result(c, Verdict.UNKNOWN, "no approval names the call it binds to (tool_call_id, protocol 1.3)")
                for c in ids]
    problems: dict[str, list[str]] = {c: [] for c in ids}
    runs: dict[str, list[Execution]] = defaultdict(list)
    granted_when = {token: sorted(t for a in aids for t in grants.get(a, [])) for token, aids in for_token.items()}
    for e, cut in needed:
        runs[e.probe_token].append(e)
        granted = granted_when.get(e.probe_token, [])
        before = [t for t in granted if t <= e.started]
        elsewhere = [token for token, times in granted_when.items()
                     if _script(token) != _script(e.probe_token) and times and times[0] <= e.started]
        if not before and elsewhere:
            problems["APR-01"].append(f"{e.probe_token} ran with no approval of its own, after the user approved "
                                      f"{elsewhere[0]}'s call in another conversation: the approval spread")
        elif not before:
            asked = ", ".join(for_token.get(e.probe_token, [])) or "none asked for its call"
            problems["APR-02"].append(f"{e.probe_token} (pid {e.pid}) ran after the unknown effect of "
                                      f"{cut.probe_token} with no approval granted before it (approvals: {asked})")
        elif before[-1] < cut.started:
            problems["APR-03"].append(f"{e.probe_token} ran under an approval granted before the unknown effect of "
                                      f"{cut.probe_token} began: it was bound to an older unknown-effect set")
    for token, executions in runs.items():
        granted = [a for a in for_token.get(token, []) if grants.get(a)]
        if granted and len(executions) > len(granted):  # none granted at all is APR-02's
            problems["APR-06"].append(f"{token} ran {len(executions)} times under {len(granted)} granted "
                                      f"approval(s) {granted}: an approval was consumed more than once")
    # APR-01 is at stake where one conversation's call was approved while another's was still undecided
    spread = sum(1 for t1, times in granted_when.items() if times for t2, other in granted_when.items()
                 if _script(t2) != _script(t1) and (not other or other[0] > times[0]))
    judged = {c: len(needed) for c in ids} | {"APR-01": spread}
    return [r for c in ids for r in _judgement(
        c, problems[c], judged[c], "no execution needed an approval" if c != "APR-01" else
        "no conversation's approval was granted while another's was undecided",
        f"{len(needed)} execution(s) needed an approval; each ran once under its own, granted for its effect set"
        if c != "APR-01" else f"{spread} approval(s) granted in one conversation allowed nothing in another")]


def check_approval_states(ev: Evidence) -> list[ClauseResult]:
    if "approvals" not in ev.observes:
        return [unobserved(c, "approvals") for c in ("APR-06", "APR-07")]
    approves, denies = decisions(ev, "approve"), decisions(ev, "deny")
    auto: list[str] = []
    judged_auto = 0
    for obs in ev.snapshots():
        for a in obs.snapshot.get("approvals") or []:
            denied = [t for t in denies.get(a["approval_id"], []) if t <= obs.time]
            if denied and not approves.get(a["approval_id"]):  # the user said no: it never becomes a yes
                judged_auto += 1
                if a.get("status") not in ("denied", "invalidated"):
                    auto.append(f"approval {a['approval_id']} is {a['status']} at observation {obs.index} though "
                                "the user denied it")
            elif a.get("status") in ("approved", "consumed"):
                judged_auto += 1
                if not any(t <= obs.time for t in approves.get(a["approval_id"], [])):
                    auto.append(f"approval {a['approval_id']} is {a['status']} at observation {obs.index} though "
                                "the user never approved it")
    kept: list[str] = []
    carried = 0
    observations = ev.snapshots()
    for fault in restarts(ev.history):
        before = next((o for o in reversed(observations) if o.index < fault.index
                       and o.snapshot.get("approvals") is not None), None)
        after = next((o for o in observations if o.index > fault.index
                      and o.snapshot.get("approvals") is not None), None)
        if before is None or after is None:
            continue
        now = {a["approval_id"]: a for a in after.snapshot["approvals"]}
        for a in before.snapshot["approvals"]:
            if a.get("status") != "pending":
                continue
            decided = [t for t in approves.get(a["approval_id"], []) + denies.get(a["approval_id"], [])
                       if before.time <= t <= after.time]
            if decided:
                continue
            carried += 1
            later = now.get(a["approval_id"])
            if later is None or later.get("status") != "pending":
                state = "gone" if later is None else later.get("status")
                kept.append(f"approval {a['approval_id']} was pending before the {fault.kind} (fault {fault.index}) "
                            f"and is {state} after it, with no decision of the user's")
    return [*_judgement("APR-06", auto, judged_auto, "no approval was shown approved, consumed or denied",
                        f"{judged_auto} approval record(s) approved or consumed only after the user's approve, "
                        "denied ones still denied"),
            *_judgement("APR-07", kept, carried, "no approval was pending across a restart",
                        f"{carried} pending approval(s) carried across a restart, still pending")]


def unreadable_windows(ev: Evidence) -> list[tuple[float, float]]:
    """(from, to): the kit's storage faults (the store unreadable or at a newer schema) until their restore."""
    from recoverykit.conformance.storage_fault import FAULT, RESTORE
    out, since = [], None
    for f in ev.history.faults:
        if f.kind == FAULT and since is None:
            since = f.time
        elif f.kind == RESTORE and since is not None:
            out.append((since, f.time))
            since = None
    if since is not None:
        out.append((since, float("inf")))
    return out


@kit_evidence
def check_unreadable_state(ev: Evidence) -> list[ClauseResult]:
    """APR-04 from the witness log and the kit's history: no write that needed an approval runs while the kit
    keeps the store unreadable (or at a newer schema): the recovery state it would be checked against cannot be
    read. Judged for each such window that came after the user's ``approve``: an approved write could have run."""
    windows = unreadable_windows(ev)
    grants = [t for times in decisions(ev, "approve").values() for t in times]
    if not windows or not grants:
        return [_result("APR-04", Verdict.UNKNOWN, "the store was never faulted after an approval")]
    problems, judged = [], 0
    needed = needing_approval(ev)
    for start, end in windows:
        if not any(t < end for t in grants):
            continue
        judged += 1
        for e, _ in needed:
            if start <= e.started < end:
                problems.append(f"{e.tool} ({e.probe_token}) ran at {e.started:.3f}, while the kit kept the store "
                                "faulted: execution went on without readable recovery state")
    return _judgement("APR-04", problems, judged, "the store was never faulted after an approval",
                      f"{judged} storage fault(s) after an approval: no write needing one ran meanwhile")


@kit_evidence
def check_decision_resumes_nothing(ev: Evidence) -> list[ClauseResult]:
    """APR-05 from the kit's history, the witness log and the provider's ledger: the user's decision on an
    approval of paused work does not resume it. Nothing of its script runs, and its model is asked nothing,
    between a decision taken while the Pause stood and the user's Resume."""
    if "approvals" not in ev.observes:
        return [unobserved("APR-05", "approvals")]
    seen, work_of = approvals_seen(ev), ev.work_of_script()
    script_of = {w: sid for sid, w in work_of.items()}
    problems, judged = [], 0
    for name in ("approve", "deny"):
        for approval_id, times in decisions(ev, name).items():
            work = (seen.get(approval_id) or {}).get("work_id")
            sid = script_of.get(work)
            for a, b in paused_spans(ev, work, ended_by=("resume", "end")):
                decided = [t for t in times if a <= t < b]
                if not decided or sid is None:
                    continue
                judged += 1
                ran = [e for e in (ev.witness.executions if ev.witness else [])
                       if _script(e.probe_token) == sid and min(decided) <= e.started < b]
                asked = [r for r in ev.ledger if r.get("event") == "request" and r.get("script_id") == sid
                         and min(decided) <= r.get("time", 0) < b]
                if ran or asked:
                    what = f"{ran[0].tool} ran" if ran else f"its model was asked (request {asked[0]['seq']})"
                    problems.append(f"{work}: after the user's {name} of {approval_id} while it was paused, {what} "
                                    "before any Resume: the decision resumed the work")
    return _judgement("APR-05", problems, judged, "no approval was decided while its work was paused",
                      f"{judged} decision(s) on paused work: it stayed paused until the Resume")


APPROVAL_CHECKS = (check_approved_executions, check_approval_states, check_unreadable_state,
                   check_decision_resumes_nothing)
