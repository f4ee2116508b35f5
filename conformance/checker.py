"""The history checker: the contract's history clauses, judged after a run from the kit's evidence.

It is independent of the lockstep machine on purpose: it reads only what the kit recorded itself
(the operation history, the observations, the faults), the scripted provider's ledger and the probe
tools' witness log, never the model. So a bug shared by the model and a runtime cannot hide here.

Each check returns one ``ClauseResult`` per clause it judges. Its text is the clause's definition
("broke INP-01: ..."). Evidence the run did not produce (a section the adapter does not observe, no
unknown-effect tool ever executed) gives ``unknown``, never ``valid``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

from recoverykit.conformance.history import KILL_REFUSED, NOTHING_KILLED, Fault, History, Observation, Op, restarts
from recoverykit.conformance.probe_tools import UNCLASSIFIED
from recoverykit.conformance.provider_ledger import Call, calls, evidence_truncated
from recoverykit.conformance.provider_script import SCRIPT_TAG_RE
from recoverykit.conformance.witness import WitnessLog
from recoverykit.model.catalogue import Verdict
from recoverykit.model.contract import clause

_STOPPED = {"paused", "cancelled", "done"}


KIT = "kit"  # the verdict rests on evidence the kit owns: its provider's ledger, its probes' witness log ...
SELF_REPORTED = "self-reported"  # ... or on what the runtime says about itself in observe


@dataclass(frozen=True)
class ClauseResult:
    clause_id: str
    verdict: Verdict
    text: str
    evidence: tuple[str, ...] = ()
    basis: str = SELF_REPORTED  # KIT or SELF_REPORTED: which evidence the verdict rests on
    because: tuple[str, ...] = ()  # an aggregate verdict (FA-01): the clauses whose verdicts it rests on
    reason: str | None = None  # an unknown's class where it is made (conformance/unknowns.py), else None: from text

    def as_dict(self) -> dict[str, Any]:
        return {"clause": self.clause_id, "verdict": self.verdict.value, "text": self.text,
                "evidence": list(self.evidence), "basis": self.basis,
                **({"because": list(self.because)} if self.because else {}),
                **({"reason": self.reason} if self.reason else {})}


def kit_evidence(fn: Callable[[Evidence], list[ClauseResult]]) -> Callable[[Evidence], list[ClauseResult]]:
    """Mark a check whose verdicts rest on evidence the kit owns (``check`` labels its results ``kit``)."""
    fn.evidence = KIT  # type: ignore[attr-defined]
    return fn


@dataclass
class Evidence:
    """Everything a run leaves for the checker (and what a bundle stores)."""

    history: History
    ledger: list[dict[str, Any]] = field(default_factory=list)
    witness: WitnessLog | None = None
    observes: frozenset[str] = frozenset()

    def snapshots(self) -> list[Observation]:
        return self.history.observations

    def work_of_script(self) -> dict[str, str]:
        """script id -> work_id, from the tags the kit put in each submit: acknowledged, or indeterminate (``info``,
        unanswered) and resolved by an observation holding its client_msg_id (``intent.submits``)."""
        from recoverykit.conformance.intent import submits
        out: dict[str, str] = {}
        for invoke, work_id in submits(self.history):
            for script_id in SCRIPT_TAG_RE.findall(invoke.value.get("text", "")):
                out[script_id] = work_id
        return out


def _result(clause_id: str, verdict: Verdict, detail: str = "", evidence: Iterable[str] = ()) -> ClauseResult:
    statement = clause(clause_id).statement
    prefix = {Verdict.INVALID: "broke", Verdict.VALID: "held", Verdict.UNKNOWN: "not judged"}.get(verdict, "n/a")
    text = f"{prefix} {clause_id}: {statement}" + (f" ({detail})" if detail else "")
    return ClauseResult(clause_id, verdict, text, tuple(evidence))


def _judgement(clause_id: str, problems: list[str], judged: int, unknown: str, valid: str) -> list[ClauseResult]:
    """Invalid with every problem found; else valid once something was judged; else unknown, never valid."""
    if problems:
        return [_result(clause_id, Verdict.INVALID, problems[0], problems)]
    if not judged:
        return [_result(clause_id, Verdict.UNKNOWN, unknown)]
    return [_result(clause_id, Verdict.VALID, valid)]


def _section(observation: Observation | None, name: str) -> list[dict[str, Any]] | None:
    if observation is None:
        return None
    return observation.snapshot.get(name)


def check_inputs(ev: Evidence) -> list[ClauseResult]:
    """INP-01: an acknowledged input is present exactly once; a definitely failed one never."""
    final = ev.history.final_observation()
    items = _section(final, "work_items")
    submits = [(i, d) for i, d in ev.history.completions() if i.f == "submit"]
    if items is None or not submits:
        return [_result("INP-01", Verdict.UNKNOWN, "no submit, or work_items never observed")]
    seen = Counter(inp["client_msg_id"] for item in items for inp in item.get("inputs", []))
    problems = []
    for invoke, done in submits:
        cid, count = invoke.value.get("client_msg_id"), seen[invoke.value.get("client_msg_id")]
        if done is not None and done.type == "ok" and count != 1:
            problems.append(f"acknowledged input {cid!r} (op {invoke.index}) is present {count} times")
        elif done is not None and done.type == "fail" and count != 0:
            problems.append(f"input {cid!r} failed definitely (op {invoke.index}) but is present {count} times")
        elif count > 1:
            problems.append(f"input {cid!r} (indefinite, op {invoke.index}) is present {count} times")
    if problems:
        return [_result("INP-01", Verdict.INVALID, "; ".join(problems[:3]), problems)]
    return [_result("INP-01", Verdict.VALID, f"{len(submits)} submits")]


def _logical_call(token: str) -> tuple[str, str, str] | None:
    """A probe token is script.step.attempt.index; the logical call drops the attempt."""
    parts = token.rsplit(".", 3)
    return (parts[0], parts[1], parts[3]) if len(parts) == 4 else None


def check_unknown_effects(ev: Evidence) -> list[ClauseResult]:
    """FA-15: a non-idempotent write is never re-run, whether by replaying its call or re-asking the model."""
    if ev.witness is None:
        return [_result("FA-15", Verdict.UNKNOWN, "no witness log")]
    # a tool registered without a class (protocol 1.2) is unknown by default: its writes count too
    executions = [e for e in ev.witness.executions if e.effect_class in ("unknown", UNCLASSIFIED)]
    if not executions:
        return [_result("FA-15", Verdict.UNKNOWN, "no unknown-effect tool executed in this run")]
    approved = Counter()
    final = ev.history.final_observation()
    for approval in _section(final, "approvals") or []:
        if approval.get("status") in ("approved", "consumed"):
            approved[approval.get("work_id")] += 1
    work_of = ev.work_of_script()
    runs: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for e in executions:
        key = _logical_call(e.probe_token) or (e.probe_token, "", "")
        runs[key].append(f"{e.probe_token} pid={e.pid}")
    repeated = {k: v for k, v in runs.items() if len(v) > 1 + approved[work_of.get(k[0])]}
    if repeated:
        evidence = [f"script {k[0]} step {k[1]} call {k[2]} executed {len(v)} times: {', '.join(v)}"
                    for k, v in repeated.items()]
        return [_result("FA-15", Verdict.INVALID, evidence[0], evidence)]
    return [_result("FA-15", Verdict.VALID, f"{len(executions)} unknown-effect executions, none repeated")]


def _tokens(usage: dict[str, Any] | None) -> tuple[int, int] | None:
    if not usage:
        return None
    return usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)


MAX_TOTAL_PARTS = 12  # receipts of one work item searched for a set a total adds up (2**12 subsets at most)


def _adds_up(total: tuple[int, int], parts: list[tuple[str, tuple[int, int]]]) -> list[str] | None:
    """The ids of receipts whose tokens add up to ``total`` (a parent total counted beside them), or None."""
    if not sum(total):
        return None
    parts = parts[:MAX_TOTAL_PARTS]
    for size in range(1, len(parts) + 1):
        for chosen in combinations(parts, size):
            if (sum(t[0] for _, t in chosen), sum(t[1] for _, t in chosen)) == total:
                return [rid for rid, _ in chosen]
    return None


def check_usage(ev: Evidence) -> list[ClauseResult]:
    """USG-03 counted once, USG-05 watermark not sum, USG-10 unknown stays unknown (never fabricated).

    A receipt names its provider attempt by ``request_id``: the ``X-Request-Id`` the runtime sent, or the
    response ``id`` (``chatcmpl-...``) the provider returned for that attempt (what an OpenAI client keeps).
    USG-05 is judged only on attempts that reported usage in more than one chunk (style ``cumulative``):
    with one usage object, summing and a watermark agree, so such a run cannot tell them apart.
    A receipt with usage that names no attempt the provider received is fabricated (USG-10), unless its tokens
    add up receipts of the same work item that do name attempts: then it is a parent total counted beside its
    child details (USG-03, the seed's own example of counting twice).
    """
    final = ev.history.final_observation()
    receipts = _section(final, "usage_receipts")
    ledger_calls = [c for c in calls(ev.ledger)]
    ids = ("USG-03", "USG-05", "USG-10")
    if receipts is None or not ledger_calls:
        return [_result(i, Verdict.UNKNOWN, "usage_receipts not observed, or no provider request") for i in ids]
    all_header = all(c.header_request_id for c in ledger_calls)
    by_id: dict[str, list[Call]] = defaultdict(list)
    for c in ledger_calls:
        for key in c.ids():
            by_id[key].append(c)
    rec_by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in receipts:
        rec_by_id[r["request_id"]].append(r)
    once, watermark, unknown, unattributed = [], [], [], []
    cumulative_judged = 0
    details: dict[Any, list[tuple[str, tuple[int, int]]]] = defaultdict(list)  # work_id -> receipts naming attempts
    for r in receipts:
        if r["request_id"] in by_id and r["usage"] in ("known", "partial"):
            details[r.get("work_id")].append(
                (r["request_id"], (r.get("prompt_tokens") or 0, r.get("completion_tokens") or 0)))
    for rid, recs in rec_by_id.items():
        billed = [c for c in by_id.get(rid, [])]
        if len(recs) > max(1, len(billed)):
            once.append(f"request {rid}: {len(recs)} receipts for {len(billed)} provider attempts")
        known = [r for r in recs if r["usage"] == "known"]
        partial = [r for r in recs if r["usage"] == "partial"
                   and (r.get("prompt_tokens") or r.get("completion_tokens"))]  # a zero lower bound claims nothing
        if (known or partial) and not billed:
            if all_header:
                for r in [*known, *partial]:
                    got = (r.get("prompt_tokens") or 0, r.get("completion_tokens") or 0)
                    parts = _adds_up(got, details[r.get("work_id")])
                    if parts:
                        once.append(f"receipt {rid} ({r.get('work_id')}) names no provider attempt and its usage "
                                    f"{got} adds up receipts {parts}: a total counted beside its details")
                    else:
                        unknown.append(f"request {rid}: a receipt with usage but the provider never received it "
                                       "(fabricated)")
            else:  # no X-Request-Id: the id may be the runtime's own, which the kit cannot match
                unattributed.append(rid)
            continue
        seen_usage = [_tokens(c.usage_reported) for c in billed]
        cumulative = any(c.usage_chunks > 1 for c in billed)
        for r in [*known, *partial]:
            got = (r.get("prompt_tokens") or 0, r.get("completion_tokens") or 0)
            cumulative_judged += cumulative
            if all(u is None for u in seen_usage):
                unknown.append(f"request {rid}: {r['usage']} usage {got} but the response carried none "
                               "(should be unknown)")
            elif r["usage"] == "partial":  # a lower bound: never above what the client could have read
                if all(u is None or sum(got) > sum(u) for u in seen_usage):
                    watermark.append(f"request {rid}: partial receipt says {got}, above all the provider reported "
                                     f"{seen_usage} (cumulative snapshots summed?)")
            elif got not in seen_usage:
                bigger = any(u is not None and sum(got) > sum(u) for u in seen_usage)
                (watermark if bigger else unknown).append(
                    f"request {rid}: receipt says {got}, the provider reported {seen_usage}"
                    + (" (cumulative snapshots summed?)" if bigger else ""))
    if final is not None and final.quiescent:
        # Per work item, the receipts that name no attempt the kit knows: without X-Request-Id, one of them may
        # be an attempt the runtime named by its own id before it saw the response id.
        spare = Counter(r.get("work_id") for r in receipts if r["request_id"] not in by_id)
        work_of = ev.work_of_script()
        for c in ledger_calls:
            if c.response is None or any(key in rec_by_id for key in c.ids()):
                continue
            if c.header_request_id:
                unknown.append(f"request {c.header_request_id}: the provider answered but no receipt exists "
                               "(usage dropped)")
                continue
            work_id = work_of.get(c.request.get("script_id"))
            if not c.response_id_sent or work_id is None:
                continue  # the runtime never saw an id to name this attempt by (or the kit cannot tell whose)
            if spare[work_id] > 0:  # a receipt the kit could not match may be this one
                spare[work_id] -= 1
                continue
            unknown.append(f"response {c.response_id} ({work_id}): the provider answered but no receipt exists "
                           "(usage dropped)")
    matched = sum(len(recs) for rid, recs in rec_by_id.items() if rid in by_id)
    undecided = ""
    if unattributed:
        undecided = (f"{len(unattributed)} receipts with usage match neither an X-Request-Id the runtime sent nor a "
                     f"response id the provider returned (e.g. {unattributed[0]!r})")
    elif not matched and not all_header:
        undecided = ("the runtime sent no X-Request-Id and no receipt names a response id; "
                     "receipts cannot be matched to the provider's ledger")
    out = []
    for clause_id, problems in zip(ids, (once, watermark, unknown), strict=True):
        if problems:
            out.append(_result(clause_id, Verdict.INVALID, problems[0], problems))
        elif undecided:
            out.append(_result(clause_id, Verdict.UNKNOWN, undecided))
        elif clause_id == "USG-05" and not cumulative_judged:
            out.append(_result(clause_id, Verdict.UNKNOWN, "no receipt with usage for an attempt that reported "
                               "cumulative usage in more than one chunk"))
        else:
            out.append(_result(clause_id, Verdict.VALID, f"{len(receipts)} receipts"))
    return out


def check_generations(ev: Evidence) -> list[ClauseResult]:
    """OWN-02 one owner per work item; OWN-06 generations only move forward, stale writes rejected.

    An integer generation must never go back. An opaque token (protocol 1.4: a string, such as DBOS's per-execution
    ``owner_xid``) has no order, so it is judged by identity: a token that owns the item again after another
    replaced it went back, and a fenced write whose token is the current one was not stale."""
    observed = [o for o in ev.snapshots() if o.snapshot.get("leases") is not None]
    if not observed or not any(o.snapshot["leases"] for o in observed):
        return [_result(i, Verdict.UNKNOWN, "no lease ever observed") for i in ("OWN-02", "OWN-06")]
    owners, backwards = [], []
    latest: dict[str, int | str] = {}
    replaced: dict[str, set[str]] = {}  # work item -> opaque tokens a later token has replaced
    for o in observed:
        per_work = Counter(lease["work_id"] for lease in o.snapshot["leases"])
        owners += [f"observation {o.index}: {w} has {n} leases" for w, n in per_work.items() if n > 1]
        for lease in o.snapshot["leases"]:
            w, g = lease["work_id"], lease["generation"]
            before = latest.get(w)
            if isinstance(g, str) or isinstance(before, str):
                if g in replaced.get(w, set()):
                    backwards.append(f"observation {o.index}: {w} is owned again by token {g!r}, which a later "
                                     "token had replaced")
                if before is not None and before != g:
                    replaced.setdefault(w, set()).add(before)
                latest[w] = g
                continue
            if before is not None and g < before:
                backwards.append(f"observation {o.index}: {w} generation went back from {before} to {g}")
            latest[w] = max(g, before if before is not None else -1)
        for fw in o.snapshot.get("fenced_writes") or []:
            stale, current = fw["generation"], fw["current_generation"]
            opaque = isinstance(stale, str) or isinstance(current, str)
            if (stale == current) if opaque else (stale >= current):
                backwards.append(f"observation {o.index}: a write of generation {stale} was "
                                 f"'fenced' though it was current ({current})")
    return [_result("OWN-02", Verdict.INVALID if owners else Verdict.VALID, owners[0] if owners else "", owners),
            _result("OWN-06", Verdict.INVALID if backwards else Verdict.VALID,
                    backwards[0] if backwards else "", backwards)]


def _stops(ev: Evidence) -> list[tuple[str, float, int]]:
    """(work_id, time acknowledged, op index) for every acknowledged pause, end and stop_all."""
    out = []
    for invoke, done in ev.history.completions():
        if done is None or done.type != "ok":
            continue
        if invoke.f in ("pause", "end"):
            out.append((invoke.value["work_id"], done.time, done.index))
        elif invoke.f == "stop_all":
            out += [(w, done.time, done.index) for w in done.value.get("stopped", [])]
    return out


def check_stops(ev: Evidence) -> list[ClauseResult]:
    """RI-03: paused or stopped work is never continued (not by a restart, not by recovery)."""
    stops = _stops(ev)
    if not stops:
        return [_result("RI-03", Verdict.UNKNOWN, "no pause, end or stop_all was acknowledged")]
    resumes = [(i.value["work_id"], d.index) for i, d in ev.history.completions()
               if i.f == "resume" and d is not None and d.type != "fail"]
    script_of = {w: s for s, w in ev.work_of_script().items()}
    problems = []
    for work_id, _, at in stops:
        until = min([r for w, r in resumes if w == work_id and r > at], default=None)
        window = [o for o in ev.snapshots() if o.index > at and (until is None or o.index < until)]
        for o in window:
            item = next((w for w in o.snapshot.get("work_items") or [] if w["work_id"] == work_id), None)
            if item is not None and item["desired_state"] not in _STOPPED:
                problems.append(f"observation {o.index}: {work_id} desired_state is {item['desired_state']} "
                                f"after the stop acknowledged at op {at}")
        settled = next((o for o in window if o.quiescent), None)
        if settled is None or work_id not in script_of:
            continue
        end = next((e.time for e in ev.history.events if e.index == until), float("inf")) if until else float("inf")
        for c in calls(ev.ledger):
            if c.request.get("script_id") == script_of[work_id] and settled.time < c.request["time"] < end:
                problems.append(f"{work_id} sent provider request {c.request['request_id']} after it was "
                                f"stopped (op {at}) and had settled (observation {settled.index})")
    if problems:
        return [_result("RI-03", Verdict.INVALID, problems[0], problems)]
    return [_result("RI-03", Verdict.VALID, f"{len(stops)} stops held")]


def check_settled(ev: Evidence) -> list[ClauseResult]:
    """RI-02 work meant to run continues; UI-05 everything not running or finished says why."""
    final = ev.history.final_observation()
    items = _section(final, "work_items")
    if final is None or items is None or not items:
        return [_result(i, Verdict.UNKNOWN, "no work item observed") for i in ("RI-02", "UI-05")]
    if not final.quiescent:
        return [_result(i, Verdict.UNKNOWN, "the run never became quiescent") for i in ("RI-02", "UI-05")]
    from recoverykit.conformance.checks_reasons import _caused
    scripts: dict[str, set[str]] = defaultdict(set)
    for script_id, work_id in ev.work_of_script().items():
        scripts[work_id].add(script_id)
    stuck, unexplained = [], []
    for item in items:
        if item["desired_state"] == "run" and item["status"] in ("queued", "running"):
            stuck.append(f"{item['work_id']} is {item['status']} though the runtime reported quiescence")
        # held for a cause the kit itself made (recovery disabled at a start, a resource it took away): the Resume
        # that would end it is the user's (a submit whose reply was lost left the kit without the work_id to send it)
        caused = item.get("reason_code") and _caused(ev, item["work_id"], item["reason_code"],
                                                     scripts[item["work_id"]])
        if item["desired_state"] == "run" and item["status"] == "paused" and not caused:
            stuck.append(f"{item['work_id']} is paused though the user never paused it ({item['reason_code']})")
        if item["status"] not in ("running", "finished") and not item.get("reason_code"):
            unexplained.append(f"{item['work_id']} is {item['status']} without a reason_code")
    return [_result("RI-02", Verdict.INVALID if stuck else Verdict.VALID, stuck[0] if stuck else "", stuck),
            _result("UI-05", Verdict.INVALID if unexplained else Verdict.VALID,
                    unexplained[0] if unexplained else "", unexplained)]


def check_continuations(ev: Evidence) -> list[ClauseResult]:
    """REC-06: a continuation is admitted once: no two turns share a continuation key, no work item has two
    active turns at once, no two turns continue the same predecessor, and none continues a turn still active."""
    turns = _section(ev.history.final_observation(), "turns")
    # A null key is "the first turn of a request" (protocol), not a shared key: it cannot collide.
    keyed = [t for t in turns or [] if t.get("continuation_key") is not None]
    if not keyed:
        return [_result("REC-06", Verdict.UNKNOWN, "no turns with a continuation key observed")]
    if not restarts(ev.history):
        # REC-06 is about recovery consuming its intent: a run that never restarted cannot show the window
        return [_result("REC-06", Verdict.UNKNOWN, "the run never restarted, so no recovery admitted a continuation")]
    dup = [f"continuation key {k!r} admitted {n} times" for k, n in
           Counter(t["continuation_key"] for t in keyed).items() if n > 1]
    # The same continuation admitted twice under two keys (a key that does not bind what it should): in some
    # observation one work item has two active turns at once, two turns continue the same predecessor, or a
    # turn continues one that is still active (the admission before the crash was never consumed).
    for o in ev.snapshots():
        seen = _section(o, "turns") or []
        active = Counter(t["work_id"] for t in seen if t.get("status") == "active")
        dup += [f"observation {o.index}: {w} has {n} active turns at once" for w, n in active.items() if n > 1]
        forks = Counter((t["work_id"], t["predecessor"]) for t in seen if t.get("predecessor"))
        dup += [f"observation {o.index}: {n} turns of {w} continue the same turn {p}" for (w, p), n in forks.items()
                if n > 1]
        status = {t["turn_id"]: t.get("status") for t in seen}
        dup += [f"observation {o.index}: turn {t['turn_id']} continues turn {t['predecessor']}, which is still "
                "active: admitted beside it, not after it"
                for t in seen if status.get(t.get("predecessor")) == "active"]
    return [_result("REC-06", Verdict.INVALID if dup else Verdict.VALID, dup[0] if dup else "", dup)]


_USER_STOPS = {"pause", "end", "stop_all"}
_NOT_A_PAUSE = {"worker_kill", "tree_kill", "long_downtime", "host_identity_change", "crash_during_recovery",
                "normal_exit", "graceful_worker_restart", "kill", "crash"}


def _desired_after(ev: Evidence, at: int, until: int | None) -> tuple[dict[str, str], list[tuple[dict, set]]] | None:
    """desired_state per item at the last observation before event ``at``, and every observation after it
    (up to event ``until``), each with the items a user stop acknowledged since ``at`` (those may change);
    None without an observation on both sides. Every later observation counts, not only the first: a
    runtime that parks work a moment after it restarts has still taken the restart as a Pause."""
    before = next((o for o in reversed(ev.snapshots()) if o.index < at), None)
    later = [o for o in ev.snapshots() if o.index > at and (until is None or o.index < until)]
    if before is None or not later:
        return None
    stops = [(invoke.index, {invoke.value.get("work_id")} if invoke.f != "stop_all" else {"*"})
             for invoke in ev.history.ops if invoke.type == "invoke" and invoke.f in _USER_STOPS]
    after = []
    for o in later:
        stopped = set().union(*[ids for index, ids in stops if before.index < index < o.index])
        after.append(({w["work_id"]: w["desired_state"] for w in o.snapshot.get("work_items") or []}, stopped))
    return {w["work_id"]: w["desired_state"] for w in before.snapshot.get("work_items") or []}, after


def check_not_a_pause(ev: Evidence) -> list[ClauseResult]:
    """CTL-01 a frontend reload changes no intent; CTL-03 a crash, exit or restart is never a user Pause.

    From the last observation before the event, every observation after it (up to the next such event) is
    compared; only a user stop acknowledged in between may change an item's desired_state away from run."""
    out = []
    reloads = [done.index for invoke, done in ev.history.completions()
               if invoke.f == "reload" and done is not None and done.type == "ok"]
    faults = [f.index for f in ev.history.faults if f.kind in _NOT_A_PAUSE]
    events = sorted(reloads + faults)
    for clause_id, moments in (("CTL-01", reloads), ("CTL-03", faults)):
        judged, problems = 0, []
        for at in moments:
            around = _desired_after(ev, at, next((e for e in events if e > at), None))
            if around is None:
                continue
            judged += 1
            before, after = around
            for states, stopped in after:
                for work_id, was in before.items():
                    now = states.get(work_id)
                    if now is None or "*" in stopped or work_id in stopped or was != "run":
                        continue
                    if now not in ("run", "done"):  # finishing meanwhile is progress; anything else is a stop
                        problems.append(f"{work_id} went from desired_state {was} to {now} after event {at} "
                                        "with no user stop in between")
        if problems:
            out.append(_result(clause_id, Verdict.INVALID, problems[0], sorted(set(problems))))
        elif judged:
            out.append(_result(clause_id, Verdict.VALID, f"{judged} observed"))
        else:
            out.append(_result(clause_id, Verdict.UNKNOWN, "no such event between two observations"))
    return out


PROTOCOL = "protocol"  # pseudo-clause: the adapter broke the protocol (invalid) or went silent (unknown)
COMPLETION = "completion"  # pseudo-clause: the case could not finish, so its evidence is incomplete (unknown)
PSEUDO_CLAUSES = (PROTOCOL, COMPLETION)


def unobserved(clause_id: str, section: str) -> ClauseResult:
    """Unknown because the adapter leaves ``section`` out of ``init_ok.observes``: evidence it could supply."""
    return replace(_result(clause_id, Verdict.UNKNOWN, f"the adapter does not observe {section}"),
                   reason="adapter_could_supply")


def pseudo_result(clause_id: str, verdict: Verdict, detail: str, evidence: Iterable[str] = ()) -> ClauseResult:
    """A result for a pseudo-clause (not in the contract's catalogue, but a verdict all the same)."""
    what = {PROTOCOL: "the adapter keeps the adapter protocol (docs/protocol.md)",
            COMPLETION: "the case ran to its end, so its evidence is complete"}[clause_id]
    prefix = {Verdict.INVALID: "broke", Verdict.VALID: "held"}.get(verdict, "not judged")
    return ClauseResult(clause_id, verdict, f"{prefix} {clause_id}: {what} ({detail})", tuple(evidence))


def check_protocol(ev: Evidence) -> list[ClauseResult]:
    """The protocol breaks the kit recorded: an ``info`` completion carrying ``protocol`` (a break is invalid,
    silence unknown), and a ``kill_refused`` fault (``processes`` named a pid not of the run: invalid).
    A clean history gives no result: keeping the protocol is not a clause of the contract."""
    found: list[tuple[Verdict, str]] = []
    for event in ev.history.events:
        if isinstance(event, Fault) and event.kind == KILL_REFUSED:
            what = event.detail.get("text") or f"the kit refused to kill pid {event.detail.get('pid')}: " \
                                                f"{event.detail.get('why')}"
            found.append((Verdict.INVALID, f"fault {event.index} ({KILL_REFUSED}): {str(what)[:600]}"))
            continue
        if not isinstance(event, Op):
            continue
        op = event
        value = op.value if isinstance(op.value, dict) else {}
        if op.type != "info" or "protocol" not in value:
            continue
        verdict = Verdict.UNKNOWN if value.get("protocol") == Verdict.UNKNOWN.value else Verdict.INVALID
        found.append((verdict, f"op {op.index} ({op.f}): {str(value.get('text', ''))[:600]}"))
    if not found:
        return []
    worst = next((f for f in found if f[0] is Verdict.INVALID), found[0])
    return [pseudo_result(PROTOCOL, worst[0], worst[1], [text for _, text in found])]


def check_kills_landed(ev: Evidence) -> list[ClauseResult]:
    """A required kill that killed nothing (``nothing_killed``: the adapter listed no process to kill) left the
    case without the restart it was built on: its evidence is incomplete, so unknown, with that reason, as chaos
    says it. A kill allowed to find nothing (a random wave's) gives no result."""
    missed = [f"fault {f.index}: the {str(f.detail.get('during', 'kill')).replace('_', ' ')} killed nothing: the "
              f"adapter's processes reply listed {f.detail.get('listed') or 'no process'}, so no runtime process "
              "was interrupted" for f in ev.history.faults if f.kind == NOTHING_KILLED and f.detail.get("required")]
    if not missed:
        return []
    result = pseudo_result(COMPLETION, Verdict.UNKNOWN, missed[0], missed)
    listed = any(f.detail.get("listed") for f in ev.history.faults if f.kind == NOTHING_KILLED)
    return [result if listed else replace(result, reason="adapter_could_supply")]  # it listed none: it could


def check_complete(history: History) -> list[ClauseResult]:
    """A stored history whose operations did not all complete was cut short: its evidence is incomplete.

    Not part of ``check``: while a run is going, an operation in flight is normal."""
    done = {op.invoke for op in history.ops if op.type != "invoke"}
    dangling = [f"op {op.index} ({op.f}) was invoked and never completed" for op in history.ops
                if op.type == "invoke" and op.index not in done]
    if not dangling:
        return []
    return [pseudo_result(COMPLETION, Verdict.UNKNOWN, dangling[0], dangling)]


CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (
    check_inputs, kit_evidence(check_unknown_effects), kit_evidence(check_usage), check_generations, check_stops,
    check_settled, check_continuations, check_not_a_pause, check_protocol, check_kills_landed,
)


def check(ev: Evidence) -> list[ClauseResult]:
    """Every history clause, judged on one run's evidence; each result labelled with its evidence basis. None is
    valid in a run where the kit's script ran out (``checks_script``).

    When the provider had to drop evidence (its ledger hit its size cap: ``evidence_truncated``), no verdict
    can rest on the ledger, so every clause result is unknown, with that reason (a protocol break stays)."""
    from recoverykit.conformance.checks_script import unmet_by_failed_requests  # here: it imports this module
    results = unmet_by_failed_requests(ev, [replace(result, basis=getattr(fn, "evidence", SELF_REPORTED))
                                            for fn in all_checks() for result in fn(ev)])
    return unknown_if_truncated(results, ev.ledger)


TRUNCATED_WHY = "the provider ledger was truncated at its size cap, so the evidence is incomplete"


def unknown_if_truncated(results: list[ClauseResult], ledger: list[dict[str, Any]]) -> list[ClauseResult]:
    """``results`` as they are, or, when the provider dropped evidence (``evidence_truncated``), every one but a
    protocol break made unknown, plus one ``completion`` unknown saying why: missing evidence is never valid."""
    if not evidence_truncated(ledger):
        return results
    out = [r if r.clause_id == PROTOCOL or (r.verdict is Verdict.UNKNOWN and TRUNCATED_WHY in r.text) else
           replace(r, verdict=Verdict.UNKNOWN, text=f"not judged {r.clause_id}: {TRUNCATED_WHY} (was: {r.text})"[:2000])
           for r in results if not (r.clause_id == COMPLETION and TRUNCATED_WHY in r.text)]
    return [*out, pseudo_result(COMPLETION, Verdict.UNKNOWN, TRUNCATED_WHY)]


def all_checks() -> tuple[Callable[[Evidence], list[ClauseResult]], ...]:
    """Every history check, in the order ``check`` runs them (the judging registry reads this too)."""
    from recoverykit.conformance.checks_acceptance import ACCEPTANCE_CHECKS
    from recoverykit.conformance.checks_approvals import APPROVAL_CHECKS
    from recoverykit.conformance.checks_attempts import ATTEMPT_CHECKS
    from recoverykit.conformance.checks_backoff import BACKOFF_CHECKS
    from recoverykit.conformance.checks_crosscheck import CROSS_CHECKS  # they build on this module's types
    from recoverykit.conformance.checks_decisions import DECISION_CHECKS
    from recoverykit.conformance.checks_effects import EFFECT_CHECKS
    from recoverykit.conformance.checks_executors import EXECUTOR_CHECKS
    from recoverykit.conformance.checks_fairness import FAIRNESS_CHECKS
    from recoverykit.conformance.checks_flow import FLOW_CHECKS
    from recoverykit.conformance.checks_goal_records import GOAL_RECORD_CHECKS
    from recoverykit.conformance.checks_goals import GOAL_CHECKS
    from recoverykit.conformance.checks_inputs import INPUT_CHECKS
    from recoverykit.conformance.checks_intent import INTENT_CHECKS
    from recoverykit.conformance.checks_jobs import JOB_CHECKS
    from recoverykit.conformance.checks_outcomes import OUTCOME_CHECKS
    from recoverykit.conformance.checks_owners import OWNER_CHECKS
    from recoverykit.conformance.checks_paperclip import PAPERCLIP_CHECKS
    from recoverykit.conformance.checks_paperclip_messages import MESSAGE_CHECKS
    from recoverykit.conformance.checks_paperclip_records import RECORD_CHECKS
    from recoverykit.conformance.checks_paperclip_work import WORK_CHECKS
    from recoverykit.conformance.checks_pricing import PRICING_CHECKS
    from recoverykit.conformance.checks_reasons import REASON_CHECKS
    from recoverykit.conformance.checks_repair import REPAIR_CHECKS
    from recoverykit.conformance.checks_requests import REQUEST_CHECKS
    from recoverykit.conformance.checks_reservations import RESERVATION_CHECKS
    from recoverykit.conformance.checks_resources import RESOURCE_CHECKS
    from recoverykit.conformance.checks_spend import SPEND_CHECKS
    from recoverykit.conformance.checks_storage import STORAGE_CHECKS
    from recoverykit.conformance.checks_waits import WAIT_CHECKS
    return (*CHECKS, *CROSS_CHECKS, *FLOW_CHECKS, *REASON_CHECKS, *OUTCOME_CHECKS, *OWNER_CHECKS, *STORAGE_CHECKS,
            *RESOURCE_CHECKS, *REQUEST_CHECKS, *DECISION_CHECKS, *EXECUTOR_CHECKS, *ATTEMPT_CHECKS, *BACKOFF_CHECKS,
            *FAIRNESS_CHECKS, *INTENT_CHECKS, *INPUT_CHECKS, *EFFECT_CHECKS, *REPAIR_CHECKS, *ACCEPTANCE_CHECKS,
            *GOAL_CHECKS, *GOAL_RECORD_CHECKS, *APPROVAL_CHECKS, *WAIT_CHECKS, *PAPERCLIP_CHECKS, *WORK_CHECKS,
            *RECORD_CHECKS, *MESSAGE_CHECKS, *JOB_CHECKS, *PRICING_CHECKS, *RESERVATION_CHECKS,
            *SPEND_CHECKS)


def merge(results: Iterable[ClauseResult]) -> dict[str, Verdict]:
    """Per clause across runs: any invalid is invalid; else any valid is valid; else unknown."""
    out: dict[str, Verdict] = {}
    for r in results:
        now = out.get(r.clause_id)
        if r.verdict is Verdict.INVALID or now is Verdict.INVALID:
            out[r.clause_id] = Verdict.INVALID
        elif r.verdict is Verdict.VALID or now is Verdict.VALID:
            out[r.clause_id] = Verdict.VALID
        else:
            out[r.clause_id] = Verdict.UNKNOWN
    return out
