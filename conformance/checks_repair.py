"""Context repair judged from what the kit saw: the provider's record of every request, the probes' witness log.

After a crash the runtime repairs its history and asks the model again; the scripted provider records what it
was sent (``checks_requests`` reads the same record). The kit knows every call it made: the k-th assistant
message of a request is its script's step k (that is how the provider picks the step), the i-th call of that
message is that step's i-th call, whose probe token the provider's response record names; a probe's real result
names its token (``provider._shape``'s ``probe_tokens``), and the witness log says whether that probe ran and
whether it ever wrote its result. So for each call slot (script, step, index) in each request the kit knows if
the runtime sent the real result, another call's real result, or a text of its own (a placeholder, a refusal):

- CTX-01: a request after a restart carries the script's user input no more often than it was submitted (the
  recovery turn does not re-append the input);
- CTX-02: after a restart, no call whose real result the provider had already been sent, and no unsafe call
  whose outcome the restart left unknown, runs again as the same call (the same probe token: replayed from a
  checkpoint, not asked of the model again, which is FA-15's business): the checkpoint recovery resumed from
  covers committed effects and replays no unknown write;
- CTX-04: a call's real result, once sent, is sent in every later request that carries the call (never
  displaced by a placeholder), and a result the runtime surely had (its probe wrote it, and no process went down
  between the call's start and the request) is sent, never a text of the runtime's own in its place; and no
  usage receipt is fabricated (a known or partial one names an attempt the
  provider saw, with no more tokens than the provider reported to the client);
- CTX-06: each result goes to its nearest call: a real result never answers another call, and when call ids
  repeat across responses, a later call's answer never displaces an earlier call's;
- CTX-07: a call whose result went missing across a restart (its probe never wrote one) is answered by the same
  text in every request (a deterministic placeholder);
- CTX-10: a response cut off mid-stream while the runtime lived is kept in the next request: its partial text
  (the provider's ``text_sent``) with an interruption marker;
- CTX-12: the repaired history grants no execution: after a restart that left an unsafe write's outcome unknown,
  no unsafe tool of that script runs without an approval (or before a state probe of that script could have
  reconciled the write: seed 000, "reconcile first or obtain explicit user authorization").

A run that sent no request the clause needs says nothing: unknown.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, kit_evidence
from recoverykit.conformance.history import restarts
from recoverykit.conformance.provider_ledger import Call, calls
from recoverykit.conformance.provider_script import SCRIPT_TAG_RE, script_tag
from recoverykit.conformance.registrations import SAFE
from recoverykit.model.catalogue import Verdict


@dataclass(frozen=True)
class Slot:
    """One call of one request's history, and what the request answered it with."""

    request: dict[str, Any]
    script: str
    step: int
    index: int
    call_id: str
    token: str | None  # the probe token the provider gave this call (None: no delivered response for the step)
    answer: dict[str, Any] | None  # the tool message answering it (None: not answered in this request)
    tokens: frozenset[str] = frozenset()  # the tokens of every delivered attempt of this call (a step asked again)

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.script, self.step, self.index)

    @property
    def real(self) -> bool:
        return self.answer is not None and bool(self.tokens & set(self.answer.get("probe_tokens", [])))

    @property
    def foreign(self) -> list[str]:
        """Other calls' real results sent as this call's."""
        return [t for t in (self.answer or {}).get("probe_tokens", []) if t not in self.tokens]


def _requests(ev: Evidence) -> list[Call]:
    return [c for c in calls(ev.ledger) if isinstance(c.request.get("messages"), list) and c.request.get("script_id")]


def _tokens_by_step(ev: Evidence) -> dict[tuple[str, int], list[tuple[float, list[str], list[str]]]]:
    """(script, step) -> [(time delivered, probe tokens, call ids)] of its delivered responses."""
    out: dict[tuple[str, int], list[tuple[float, list[str], list[str]]]] = defaultdict(list)
    for c in calls(ev.ledger):
        if c.delivered and c.response.get("probe_tokens"):
            out[(c.request.get("script_id"), c.request.get("step"))].append(
                (c.response["time"], c.response["probe_tokens"], c.response.get("call_ids") or []))
    return out


def _cut_partials(ev: Evidence) -> dict[str, tuple[set[str], set[str]]]:
    """script -> (partial texts of its responses cut off, digests of its texts delivered whole)."""
    out: dict[str, tuple[set[str], set[str]]] = defaultdict(lambda: (set(), set()))
    for c in calls(ev.ledger):
        text, script = (c.response or {}).get("text_sent"), (c.response or {}).get("script_id")
        if text and script:
            if c.delivered:
                out[script][1].add(hashlib.sha256(text.encode()).hexdigest()[:16])
            else:
                out[script][0].add(text)
    return out


def _retained_partial(m: dict[str, Any], partials: tuple[set[str], set[str]]) -> bool:
    """An interrupted response kept in the history: the provider counts it as no step (``provider``), nor do we."""
    cut, whole = partials
    return (m["role"] == "assistant" and not m["calls"] and m["sha"] not in whole
            and any(m["head"].startswith(p[:160]) for p in cut))


def slots(ev: Evidence) -> list[Slot]:
    """Every call slot of every recorded request, in request order."""
    delivered = _tokens_by_step(ev)
    partials = _cut_partials(ev)
    out = []
    for c in _requests(ev):
        messages, script = c.request["messages"], c.request["script_id"]
        step = -1
        for i, m in enumerate(messages):
            if m["role"] != "assistant" or _retained_partial(m, partials[script]):
                continue
            step += 1
            if not m["calls"] or len(set(m["calls"])) != len(m["calls"]):
                continue  # duplicate ids within one response are CTX-11's business
            before = [d for d in delivered.get((script, step), []) if d[0] <= c.request["time"] and d[2] == m["calls"]]
            tokens = before[-1][1] if before else []
            attempts = [d[1] for d in before]
            block = []
            for f in messages[i + 1:]:
                if f["role"] != "tool":
                    break
                block.append(f)
            for n, call_id in enumerate(m["calls"]):
                answer = next((f for f in block if f.get("answers") == call_id), None)
                out.append(Slot(c.request, script, step, n, call_id, tokens[n] if n < len(tokens) else None, answer,
                                frozenset(t[n] for t in attempts if n < len(t))))
    return out


def _results_in_hand(ev: Evidence) -> dict[str, tuple[float, float]]:
    """probe token -> (since, finished) of each execution that wrote its result: ``since`` is the earlier of its
    start and the provider's answer that asked for the call (the kit records a kill when it begins, which may be
    just before a probe already dispatched logs its start: such a result may never have been read)."""
    if ev.witness is None:
        return {}
    asked = {t: c.response["time"] for c in calls(ev.ledger) if c.response
             for t in c.response.get("probe_tokens") or ()}
    return {e.probe_token: (min(e.started, asked.get(e.probe_token, e.started)), e.finished)
            for e in ev.witness.executions if e.emitted and e.finished}


def _emitted(ev: Evidence) -> set[str]:
    return {e.probe_token for e in ev.witness.executions if e.emitted} if ev.witness is not None else set()


def _verdict(clause_id: str, problems: list[str], judged: int, nothing: str, held: str) -> ClauseResult:
    if problems:
        return _result(clause_id, Verdict.INVALID, problems[0], problems)
    if not judged:
        return _result(clause_id, Verdict.UNKNOWN, nothing)
    return _result(clause_id, Verdict.VALID, held.format(judged))


def check_repaired_slots(ev: Evidence) -> list[ClauseResult]:
    """CTX-04 (real results win), CTX-06 (nearest call), CTX-07 (deterministic placeholder) from the slots."""
    all_slots = [s for s in slots(ev) if s.token is not None]
    faults = restarts(ev.history)
    emitted = _emitted(ev)
    by_key: dict[tuple[str, int, int], list[Slot]] = defaultdict(list)
    for s in all_slots:
        by_key[s.key].append(s)
    lost_real, misplaced, displaced, unstable = [], [], [], []
    judged = {"CTX-04": 0, "CTX-06": 0, "CTX-07": 0}
    had = _results_in_hand(ev)
    for s in all_slots:  # the runtime lived from the call's start to this request, and the probe wrote its result
        kept = [t for t in s.tokens if t in had and had[t][1] < s.request["time"]
                and not any(had[t][0] <= f.time <= s.request["time"] for f in faults)]
        if kept and s.answer is not None and not s.foreign:
            judged["CTX-04"] += 1
            if not s.real:
                lost_real.append(f"request {s.request.get('request_id')}: call {s.call_id} (script {s.script} step "
                                 f"{s.step}) is answered with {_said(s)}, though its probe ({kept[0]}) wrote its "
                                 "result to a runtime that never went down meanwhile: the real result was there")
    for key, seq in by_key.items():
        first_real = next((n for n, s in enumerate(seq) if s.real), None)
        if first_real is not None and len(seq) > first_real + 1:
            judged["CTX-04"] += 1
            for s in seq[first_real + 1:]:
                if s.answer is not None and not s.real:  # an answer apart from its call is CTX-08's business
                    lost_real.append(f"request {s.request.get('request_id')}: call {s.call_id} (script {key[0]} step "
                                     f"{key[1]}) is answered with {_said(s)} although its real result was sent in "
                                     f"request {seq[first_real].request.get('request_id')}")
        # a missing result: the probe never wrote one, and a restart fell between the call and the request
        missing = [s for s in seq if s.answer is not None and not s.real and not s.foreign and not s.tokens & emitted
                   and any(f.time < s.request["time"] for f in faults)]
        if len(missing) > 1:
            judged["CTX-07"] += 1
            texts = list(dict.fromkeys(s.answer["sha"] for s in missing))
            if len(texts) > 1:
                changed = next(s for s in missing if s.answer["sha"] != texts[0])
                unstable.append(f"call {missing[0].call_id} (script {key[0]} step {key[1]}), whose result went "
                                f"missing, is answered with {_said(missing[0])} in request "
                                f"{missing[0].request.get('request_id')} but {_said(changed)} in request "
                                f"{changed.request.get('request_id')}")
    for s in all_slots:
        if s.foreign:
            misplaced.append(f"request {s.request.get('request_id')}: call {s.call_id} (script {s.script} step "
                             f"{s.step}, token {s.token}) is answered with the real result of {s.foreign}")
    for rid, group in _by_request(all_slots).items():
        ids = defaultdict(list)
        for s in group:
            ids[s.call_id].append(s)
        for call_id, same in ids.items():
            if len(same) < 2:
                continue
            judged["CTX-06"] += 1
            for early, late in pairwise(same):
                earlier = [x for x in by_key[early.key] if x.request["time"] < early.request["time"] and x.answer]
                if (early.answer and late.answer and early.answer["sha"] == late.answer["sha"] and earlier
                        and earlier[-1].answer["sha"] != early.answer["sha"]):
                    displaced.append(f"request {rid}: call id {call_id} of step {early.step} is answered with step "
                                     f"{late.step}'s answer ({_said(late)}); request "
                                     f"{earlier[-1].request.get('request_id')} answered it {_said(earlier[-1])}")
    return [
        _verdict("CTX-04", lost_real + _fabricated_usage(ev), judged["CTX-04"],
                 "no call's real result was sent in two requests", "{} call(s) kept their real result once sent"),
        _verdict("CTX-06", misplaced + displaced, judged["CTX-06"] if not misplaced else 1,
                 "no request carried one call id in two responses",
                 "{} reused call id(s): every result went to its nearest call"),
        _verdict("CTX-07", unstable, judged["CTX-07"], "no call's missing result was answered in two requests",
                 "{} call(s) with no real result across a restart: the same answer in every request"),
    ]


def _said(s: Slot) -> str:
    return f"{s.answer['head'][:60]!r} (sha {s.answer['sha']})" if s.answer else "nothing"


def _by_request(all_slots: list[Slot]) -> dict[str, list[Slot]]:
    out: dict[str, list[Slot]] = defaultdict(list)
    for s in all_slots:
        out[f"{s.request.get('seq')}:{s.request.get('request_id')}"].append(s)
    return out


def _fabricated_usage(ev: Evidence) -> list[str]:
    """Known tokens in the settled receipts for no attempt the provider saw at all: usage the repair made up (the
    client cannot know tokens it was never told). An attempt the provider saw, counted wrong, is judged by USG-05
    (running totals summed), FA-04 (in flight at a fault) and USG-18 (cut off: a lower bound)."""
    final = ev.history.final_observation()
    receipts = (final.snapshot.get("usage_receipts") or []) if final is not None and final.quiescent else []
    attempts = {i: c for c in calls(ev.ledger) for i in c.ids()}
    out = []
    for r in receipts:
        if r.get("usage") not in ("known", "partial"):
            continue
        c = attempts.get(r.get("request_id"))
        if c is not None:
            continue  # an attempt the provider saw, counted wrong, is USG-05's (summing), FA-04's or USG-18's
        got = (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)
        reported = (c.usage_reported or {}) if c is not None else {}
        most = (reported.get("prompt_tokens") or 0) + (reported.get("completion_tokens") or 0)
        if got > most:  # zero known tokens is USG-10's business (unknown must not read as zero), not fabrication
            out.append(f"receipt {r.get('request_id')} says {r.get('usage')} {got} tokens; the provider reported "
                       f"{most if reported else 'none'}{'' if c is not None else ' (no such attempt)'}: fabricated")
    return out


def check_input_once(ev: Evidence) -> list[ClauseResult]:
    """CTX-01: a request after a restart carries the script's input no more often than it was submitted."""
    faults = restarts(ev.history)
    submitted: dict[str, list[float]] = defaultdict(list)
    for invoke, done in ev.history.completions():
        if invoke.f == "submit" and (done is None or done.type != "fail"):
            for script in SCRIPT_TAG_RE.findall(invoke.value.get("text", "")):
                submitted[script].append(invoke.time)
    problems, judged = [], 0
    for c in _requests(ev):
        script, t = c.request["script_id"], c.request["time"]
        if script not in submitted or not any(f.time < t for f in faults):
            continue
        judged += 1
        tag = script_tag(script)
        sent = sum(1 for m in c.request["messages"] if m["role"] == "user" and tag in m["head"])
        allowed = sum(1 for s in submitted[script] if s < t)
        if sent > allowed:
            problems.append(f"request {c.request.get('request_id')} after a restart carries script {script}'s input "
                            f"{sent} times; it was submitted {allowed} time(s): the recovery re-appended it")
    return [_verdict("CTX-01", problems, judged, "no request followed a restart",
                     "{} request(s) after a restart: the input sent as often as it was submitted")]


def _unsafe(e: Any) -> bool:
    """The class the tool ran under (its witness record: the implementation identity at execution)."""
    return e.effect_class not in SAFE


def check_no_replay(ev: Evidence) -> list[ClauseResult]:
    """CTX-02: nothing committed or unknown before a restart runs again after it; CTX-12: the repair grants no
    execution of an unsafe tool while a write's outcome is unknown (approvals aside)."""
    if ev.witness is None:
        return [_result(i, Verdict.UNKNOWN, "no witness log") for i in ("CTX-02", "CTX-12")]
    faults = restarts(ev.history)
    execs = ev.witness.executions
    sent_real: dict[str, float] = {}
    for s in slots(ev):
        if s.real:
            for token in s.tokens & set(s.answer["probe_tokens"]):
                sent_real.setdefault(token, s.request["time"])
    final = ev.history.final_observation()
    approved = {a.get("work_id") for a in (final.snapshot.get("approvals") or [] if final is not None else [])
                if a.get("status") in ("approved", "consumed")}
    work_of = ev.work_of_script()
    replayed, granted = [], []
    judged = {"CTX-02": 0, "CTX-12": 0}
    for f in faults:
        before = [e for e in execs if e.started < f.time]
        after = [e for e in execs if e.started > f.time]
        # the same token again is the old call replayed from a checkpoint (asking the model again is a new token)
        covered = {e.probe_token for e in before
                   if sent_real.get(e.probe_token, float("inf")) < f.time or (_unsafe(e) and not e.emitted)}
        judged["CTX-02"] += len(covered)
        for e in after:
            if e.probe_token in covered:
                replayed.append(f"{e.tool} call {e.probe_token} ran again (pid {e.pid}) after the "
                                f"{f.kind} at event {f.index}, though its effect was committed or unknown before it")
        unknown = {e.probe_token.split(".")[0] for e in before if _unsafe(e) and not e.emitted}
        for script in sorted(unknown):
            if work_of.get(script) in approved:
                continue
            judged["CTX-12"] += 1
            mine = [e for e in after if e.probe_token.split(".")[0] == script]
            # a state probe may have reconciled the write ("reconcile first"): what runs after one is not judged
            probed = min((e.started for e in mine if e.effect_class == "state_probe"), default=float("inf"))
            for e in mine:
                if _unsafe(e) and e.started < probed:
                    granted.append(f"{e.tool} call {e.probe_token} ran after the {f.kind} at event {f.index} left "
                                   f"script {script}'s write unknown, with no approval: the repair granted it")
    return [
        _verdict("CTX-02", replayed, judged["CTX-02"], "no call was committed or left unknown before a restart",
                 "{} call(s) committed or unknown before a restart: none ran again"),
        _verdict("CTX-12", granted, judged["CTX-12"], "no restart left an unsafe write unknown",
                 "{} restart(s) left a write unknown: no unsafe tool ran without an approval"),
    ]


def check_interrupted_response(ev: Evidence) -> list[ClauseResult]:
    """CTX-10: the next request after a response cut off mid-stream (the runtime lived through the cut) carries the
    partial text the provider had sent, as an assistant message, with an interruption marker (more text in that
    message, or a system message right after it). The chat-completions wire has no reasoning signature for a
    runtime to reuse, so that half holds by construction here."""
    faults = restarts(ev.history)
    reqs = _requests(ev)
    problems, judged = [], 0
    for c in calls(ev.ledger):
        partial = (c.response or {}).get("text_sent") or ""
        if c.delivered or not partial or not c.response.get("script_id") or c.response.get("status") != 200:
            continue
        asked, script = c.request["time"], c.response["script_id"]
        nxt = next((r for r in reqs if r.request["script_id"] == script and r.request["time"] > c.response["time"]),
                   None)
        # never asked again, or a process died between the request and the next (the response record of a stream
        # held when the runtime was killed is written after the kill): a fragment perhaps never persisted
        if nxt is None or any(asked <= f.time < nxt.request["time"] for f in faults):
            continue
        judged += 1
        messages = nxt.request["messages"]
        kept = [i for i, m in enumerate(messages) if m["role"] == "assistant" and not m["calls"]
                and m["head"].startswith(partial[:160])]
        rid = nxt.request.get("request_id")
        if not kept:
            problems.append(f"request {rid}, the next after response {c.request.get('request_id')} was cut off "
                            f"mid-stream, drops the partial text the runtime received ({partial[:60]!r})")
            continue
        i = kept[-1]
        marked = messages[i]["len"] > len(partial) or (i + 1 < len(messages) and messages[i + 1]["role"] == "system")
        if not marked:
            problems.append(f"request {rid} sends the partial text {partial[:60]!r} of a response cut off mid-stream "
                            "with no interruption marker, as if it were a complete answer")
    return [_verdict("CTX-10", problems, judged, "no response was cut off mid-stream while the runtime lived",
                     "{} response(s) cut off mid-stream: the next request kept the partial text with a marker")]


REPAIR_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (
    kit_evidence(check_repaired_slots), kit_evidence(check_input_once), kit_evidence(check_no_replay),
    kit_evidence(check_interrupted_response))
