"""The history the runtime sends, judged from the kit's provider's record of every request.

After a crash the runtime repairs its history and asks the model again. What it asks is the kit's to see:
the scripted provider records each request's messages (role, the call ids an assistant message makes, the
call id a tool message answers, its text's digest) and the tools offered (``provider._conversation``).

- CTX-09: a tool result is sent only after an assistant message that made that call (in the same
  request): a result without its call is never a tool-protocol item;
- CTX-08: in every request each assistant message's calls are answered right after it (the results are
  adjacent to their call, before anything else), and the user messages of one script, request after request,
  keep their order (those a later request shares with earlier ones appear in the same order);
- EFF-02: the first request of a script after a restart tells the new turn which calls never started and which
  outcomes are unknown. The kit knows each call's fate from the witness log: a call (its probe token, named by
  the provider's response record; ``checks_repair.slots`` finds each call in each request) never started when no
  probe of it ran, and its outcome is unknown when its probe started before the restart and never wrote its
  result. The request must carry the calls of the step the restart interrupted, answer every such call (a tool
  message: the item that tells the model what became of a call), present none as a real result (a real result
  carries its probe's output, naming its token; these probes wrote none, so an answer naming the token of a probe
  that did write one passes another call's output off as this one's), and answer a call that never started
  and one whose outcome is unknown with different texts once call ids, probe tokens and tool names are masked
  (the same words for both tell the model nothing of either). A call the kit saw never start may still have been
  spawned by the runtime (killed before its probe wrote a line), so a runtime telling such a call "unknown" is
  careful, not wrong: one call that never started told apart from every unknown one is enough. The runtime's
  self-report of the same facts is FA-05's (``checks_crosscheck``). Which tools the recovery turn is offered is
  EFF-08's (``checks_effects``).

A run that sent no such request says nothing: unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, kit_evidence
from recoverykit.conformance.checks_repair import Slot, slots
from recoverykit.conformance.history import restarts
from recoverykit.conformance.provider_ledger import calls
from recoverykit.model.catalogue import Verdict


def _requests(ev: Evidence) -> list[Any]:
    return [c for c in calls(ev.ledger) if isinstance(c.request.get("messages"), list)]


def check_results_follow_calls(ev: Evidence) -> list[ClauseResult]:
    """CTX-09 and CTX-08 on every recorded request."""
    reqs = _requests(ev)
    orphans, apart, rewritten = [], [], []
    with_results = 0
    users: dict[str, list[str]] = {}
    for c in reqs:
        messages = c.request["messages"]
        rid = c.request.get("request_id")
        made: set[str] = set()
        for i, m in enumerate(messages):
            if m["role"] == "tool":
                with_results += 1
                if m.get("answers") not in made:
                    orphans.append(f"request {rid}: a result for call {m.get('answers')} with no earlier call "
                                   "made in that request")
            if m["role"] == "assistant" and m["calls"]:
                made |= set(m["calls"])
                following = messages[i + 1:i + 1 + len(m["calls"])]
                if sorted(f.get("answers") or "" for f in following if f["role"] == "tool") != sorted(m["calls"]):
                    apart.append(f"request {rid}: the results of calls {m['calls']} do not follow them directly "
                                 f"(next: {[f['role'] for f in following]})")
        script = c.request.get("script_id")
        mine = [m["sha"] for m in messages if m["role"] == "user"]
        if script:
            # the user messages this request shares with the script's earlier ones keep their order (a runtime
            # may send a new work item of the session without the earlier turns; it may never reorder them)
            before = users.get(script, [])
            common = [sha for sha in mine if sha in before]
            if common != [sha for sha in before if sha in common]:
                rewritten.append(f"request {rid}: script {script}'s user messages are out of their order")
            users[script] = before + [sha for sha in mine if sha not in before]
    out = []
    if not with_results:
        out.append(_result("CTX-09", Verdict.UNKNOWN, "no request carried a tool result"))
    else:
        out.append(_result("CTX-09", Verdict.INVALID if orphans else Verdict.VALID,
                           orphans[0] if orphans else f"{with_results} tool result(s), each after its call", orphans))
    if not reqs:
        out.append(_result("CTX-08", Verdict.UNKNOWN, "no request recorded with its messages"))
    elif apart or rewritten:
        problems = apart + rewritten
        out.append(_result("CTX-08", Verdict.INVALID, problems[0], problems))
    elif not with_results:
        out.append(_result("CTX-08", Verdict.UNKNOWN, "no request carried a call and its result"))
    else:
        out.append(_result("CTX-08", Verdict.VALID, f"{len(reqs)} request(s): calls and results adjacent, user "
                           "messages kept in order (the original-history part is judged by the user messages)"))
    return out


def _masked(text: str, names: list[str]) -> str:
    """``text`` with every call id, probe token and tool name in ``names`` replaced by one marker (longest first)."""
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        text = text.replace(name, "\x00")
    return text


def _same_answer(a: dict[str, Any], b: dict[str, Any], names: list[str]) -> bool | None:
    """Are two tool messages the same text once each one's own call (id, tool name, probe token) is masked? The
    provider's ``masked_sha`` says so; without it (an older record) the recorded heads, with ``names`` masked.
    None: the record cannot say (both texts go on past the recorded head, identical there, digests different)."""
    if a["sha"] == b["sha"]:
        return True
    if a.get("masked_sha") and b.get("masked_sha"):
        return a["masked_sha"] == b["masked_sha"]
    ma, mb = _masked(a["head"], names), _masked(b["head"], names)
    if a["len"] <= len(a["head"]) and b["len"] <= len(b["head"]):
        return ma == mb  # both recorded whole
    n = min(len(ma), len(mb)) - 40  # a name cut by the head's end is not masked: compare short of it
    if n > 0 and ma[:n] != mb[:n]:
        return False
    return None


def _fate(ev: Evidence, s: Slot, restart: float, asked: float) -> str | None:
    """What became of call slot ``s`` by the restart at ``restart`` (the witness log): "never_started" (no probe
    of it ran before the request at ``asked``), "unknown" (one started before the restart and none ever wrote a
    result), or None (it has a result, or the log cannot say)."""
    if not s.tokens:
        return None  # no delivered response the kit can match this call to
    runs = [e for t in s.tokens for e in ev.witness.by_token(t)]
    if any(e.emitted is None for e in runs) or any(e.emitted for e in runs):
        return None
    if not any(e.started < asked for e in runs):
        return "never_started"
    if any(e.started < restart for e in runs) and not any(restart <= e.started < asked for e in runs):
        return "unknown"
    return None


def _tool_names(ev: Evidence) -> dict[str, str]:
    """probe token -> the tool name its call asked for (the provider's response records)."""
    out: dict[str, str] = {}
    for c in calls(ev.ledger):
        if c.response:
            out.update(zip(c.response.get("probe_tokens") or [], c.response.get("tool_names") or [], strict=False))
    return out


def _interrupted_step(ev: Evidence, script: str, restart: float) -> tuple[int | None, list[str]]:
    """(step, probe tokens) of the script's last delivered response with tool calls before the restart, if any of
    its calls has no result (its probe wrote none): the step the restart interrupted, else (None, [])."""
    last = [c for c in calls(ev.ledger) if c.delivered and c.request.get("script_id") == script
            and c.response.get("probe_tokens") and c.response["time"] < restart]
    if not last:
        return None, []
    tokens = last[-1].response["probe_tokens"]
    emitted = {e.probe_token for e in ev.witness.executions if e.emitted is not False}
    return (last[-1].request.get("step"), tokens) if any(t not in emitted for t in tokens) else (None, [])


def check_calls_fate_told(ev: Evidence) -> list[ClauseResult]:
    """EFF-02: the first request of a script after a restart tells the new turn, call by call, which calls of the
    interrupted history never started and which have an unknown outcome (see the module's docstring)."""
    if ev.witness is None:
        return [_result("EFF-02", Verdict.UNKNOWN, "no witness log")]
    names = _tool_names(ev)
    every = slots(ev)
    # the probes that wrote a result: an answer naming one carries a real output (naming its own call's token, whose
    # probe wrote none, is only its arguments echoed)
    results = {e.probe_token for e in ev.witness.executions if e.emitted}
    problems: list[str] = []
    judged = told_apart = 0
    reqs = _requests(ev)
    for f in restarts(ev.history):
        for script in sorted({c.request.get("script_id") for c in reqs if c.request.get("script_id")}):
            first = next((c.request for c in reqs if c.request.get("script_id") == script
                          and c.request["time"] > f.time), None)
            if first is None:
                continue
            rid = first.get("request_id")
            mine = [s for s in every if s.request["seq"] == first["seq"]]
            fates = {id(s): _fate(ev, s, f.time, first["time"]) for s in mine}
            missing = [s for s in mine if fates[id(s)] is not None]
            step, tokens = _interrupted_step(ev, script, f.time)
            carried = {t for s in mine for t in s.tokens}
            # asking for that step again: the runtime never saved the response (lost with the process), so it never
            # knew those calls; nothing of them to tell
            if tokens and first.get("step") != step and not carried & set(tokens):
                judged += 1
                problems.append(f"request {rid}, script {script}'s first after the restart at event {f.index}, does "
                                f"not carry the calls of step {step}, which the restart interrupted, as the provider "
                                f"made them (tokens {tokens}): the new turn is not told which never started and which "
                                "have an unknown outcome")
            if not missing:
                continue
            judged += 1
            for s in missing:
                what = "never started" if fates[id(s)] == "never_started" else "has an unknown outcome"
                if s.answer is None:
                    problems.append(f"request {rid}: call {s.call_id} (script {script} step {s.step}), which "
                                    f"{what}, is not answered: the new turn is not told so")
                elif set(s.answer.get("probe_tokens") or []) & results:
                    problems.append(f"request {rid}: call {s.call_id} (script {script} step {s.step}), which {what}, "
                                    f"is answered with a probe's output ({s.answer['probe_tokens']}), as if it were "
                                    "a real result")
            never = [s for s in missing if fates[id(s)] == "never_started" and s.answer is not None]
            unknown = [s for s in missing if fates[id(s)] == "unknown" and s.answer is not None]
            if not (never and unknown):
                continue

            def same(x: Slot, y: Slot) -> bool | None:
                masks = [x.call_id, y.call_id, *x.tokens, *y.tokens,
                         *(names.get(t, "") for t in (*x.tokens, *y.tokens))]
                return _same_answer(x.answer, y.answer, masks)

            # a call the kit saw never start may still have been spawned (killed before its probe wrote a line): a
            # runtime that tells such a call "unknown" is careful, not wrong, so one call told apart is enough
            if any(all(same(a, b) is False for b in unknown) for a in never):
                told_apart += 1
                continue
            pair = next(((a, b) for a in never for b in unknown if same(a, b)), None)
            if pair is not None:
                a, b = pair
                problems.append(f"request {rid}: call {a.call_id} (step {a.step}), which never started, and call "
                                f"{b.call_id} (step {b.step}), whose outcome is unknown, are answered with the same "
                                f"text but for ids and names ({a.answer['head'][:60]!r}): the new turn cannot tell "
                                "them apart")
    if problems:
        return [_result("EFF-02", Verdict.INVALID, problems[0], problems)]
    if not judged:
        return [_result("EFF-02", Verdict.UNKNOWN, "no request after a restart carried a call without a result")]
    return [_result("EFF-02", Verdict.VALID, f"{judged} first request(s) after a restart answered every call without "
                    f"a result, none with a probe's output; {told_apart} pair(s) of a call that never started and one "
                    "whose outcome is unknown told apart")]


def check_duplicate_call_ids(ev: Evidence) -> list[ClauseResult]:
    """CTX-11: a response whose tool calls share an id is an explicit error, never guessed execution facts:
    none of its calls runs (witness log), and its work item ends showing a reason, not finished as if the
    calls had been sorted out."""
    ambiguous = [c for c in calls(ev.ledger) if c.delivered and len(c.response.get("call_ids") or [])
                 != len(set(c.response.get("call_ids") or []))]
    if not ambiguous:
        return [_result("CTX-11", Verdict.UNKNOWN, "no response carried duplicate call ids")]
    problems = []
    ran = {e.probe_token for e in ev.witness.executions} if ev.witness is not None else set()
    for c in ambiguous:
        guessed = sorted(set(c.response.get("probe_tokens") or []) & ran)
        if guessed:
            problems.append(f"response {c.request.get('request_id')} had duplicate call ids, yet its calls "
                            f"{guessed} ran")
    final = ev.history.final_observation()
    work_of = ev.work_of_script()
    for c in ambiguous if final is not None and final.quiescent else []:  # the outcome: only once settled
        work_id = work_of.get(c.request.get("script_id"))
        item = next((w for w in (final.snapshot.get("work_items") or [] if final else []) if w["work_id"] == work_id),
                    None)
        if item is not None and (item.get("status") == "finished" or not item.get("reason_code")):
            problems.append(f"{work_id} is {item.get('status')} with reason_code {item.get('reason_code')!r} after "
                            "a response with duplicate call ids (no explicit error)")
    if problems:
        return [_result("CTX-11", Verdict.INVALID, problems[0], problems)]
    if final is None or not final.quiescent:
        return [_result("CTX-11", Verdict.UNKNOWN, "the run never settled after the ambiguous response")]
    return [_result("CTX-11", Verdict.VALID, f"{len(ambiguous)} ambiguous response(s): no call ran, the work says why")]


REQUEST_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (
    kit_evidence(check_results_follow_calls), kit_evidence(check_calls_fate_told),
    kit_evidence(check_duplicate_call_ids))
