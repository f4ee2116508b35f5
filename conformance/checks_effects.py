"""Effect classes, the tool safety boundary and live tool children, judged from what the kit owns.

The kit registers every tool with its effect class (``registrations``: the trusted registry, as it was at each
moment), each probe leaves a witness of every real execution with the class it ran under (its argv: the
implementation identity at execution) and whether its result ever left it, and the scripted provider records
which tools each request offered and which tools each response asked for (``tool_names``, and the model's own
``read_only`` claims). An *unknown write* is an execution of a tool registered neither read_only nor
state_probe that started before a restart and never emitted its result: nobody can know what it did.

- EFF-08: the first request of that script after the restart (the recovery turn) offers only tools registered
  read_only or state_probe, and none of the unsafe calls its answer asks for runs;
- EFF-06: on that recovery turn a tool whose name contains "read", or a call the model claims is read-only, is
  treated by its registered class: not offered and never run when that class is not safe;
- EFF-10: the same for a tool named like a built-in investigation tool (read, grep, glob, list) or one whose
  plugin declares it read-only (``plugin_hints``, MCP's ``readOnlyHint``; protocol 1.2): neither qualifies it;
- EFF-07: when the write's tool was registered without a class (a custom tool, protocol 1.2), the recovery turn
  is restricted as after any unknown write: such tools default to unknown;
- EFF-05: when the kit re-registered the write's tool with a safe class during the downtime, the recovery turn
  is still restricted: the class that counts is the one the write ran under, not today's registration;
- EFF-03: the unknown write blocks neither investigation (the trusted reads that turn asks for run) nor
  independent work (the tool calls of scripts the kit submitted to other sessions, answered after the restart,
  run);
- EFF-11: once the run settles, if its work went on after the restart (its script asked the provider again), the
  turn that made the unknown write has ended as interrupted, its effect still unresolved (the runtime's turns and
  tool calls, matched to the witness by the call's child pid);
- OWN-07: a tool execution alive at a restart that did not kill it (a worker kill) is waited for: it runs to its
  own end (its finish record), runs once, and its session sends nothing on that call before it finished.

A run without the situation a clause needs says nothing about it: unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, _stops, kit_evidence
from recoverykit.conformance.checks_approvals import granted_at
from recoverykit.conformance.history import Fault, restarts
from recoverykit.conformance.probe_tools import UNCLASSIFIED
from recoverykit.conformance.provider_ledger import Call, calls
from recoverykit.conformance.provider_script import SCRIPT_TAG_RE
from recoverykit.conformance.registrations import SAFE, declared_read_only, registry_at, safe
from recoverykit.conformance.witness import Execution
from recoverykit.model.catalogue import Verdict

BUILTIN_INVESTIGATION = frozenset({"read", "grep", "glob", "list"})  # seed 000: the only qualifying built-ins


def _script(e: Execution) -> str:
    return e.probe_token.split(".")[0]


@dataclass(frozen=True)
class UnknownWrite:
    """A restart left the outcome of ``execution`` (a write of script ``script``) unknown."""

    fault: Fault
    execution: Execution

    @property
    def script(self) -> str:
        return _script(self.execution)


def unknown_writes(ev: Evidence) -> Iterator[UnknownWrite]:
    """Each (restart, unsafe execution before it whose result never left the probe), the first per script."""
    if ev.witness is None:
        return
    for f in restarts(ev.history):
        seen: set[str] = set()
        for e in ev.witness.executions:
            if e.effect_class not in SAFE and e.started < f.time and e.emitted is False and _script(e) not in seen:
                seen.add(_script(e))
                yield UnknownWrite(f, e)


def _approved_after(ev: Evidence, t: float) -> float | None:
    """When the user first approved something after ``t`` (an approval may lift the restriction), else None."""
    times = [d.time for i, d in ev.history.completions() if i.f == "approve" and d is not None and d.type == "ok"
             and d.time > t]
    return min(times, default=None)


def recovery_request(ev: Evidence, w: UnknownWrite) -> Call | None:
    """The first request of the write's script after the restart, unless an approval came first."""
    first = next((c for c in calls(ev.ledger) if c.request.get("script_id") == w.script
                  and c.request["time"] > w.fault.time and isinstance(c.request.get("tools_offered"), list)), None)
    approved = _approved_after(ev, w.fault.time)
    if first is None or (approved is not None and approved < first.request["time"]):
        return None
    return first


def _asked(call: Call) -> list[tuple[str, str, bool]]:
    """(probe token, tool name, the model claimed it read-only) for each tool call of a delivered response."""
    if not call.delivered:
        return []
    r = call.response or {}
    tokens, names = r.get("probe_tokens") or [], r.get("tool_names") or []
    claims = r.get("read_only_claims") or [False] * len(names)
    return list(zip(tokens, names, claims, strict=False))


def _ran(ev: Evidence, token: str) -> bool:
    """The call ran without the user's one-time approval (profile approvals: an approved call may run; whether
    it ran once under its own approval is judged by ``checks_approvals``)."""
    if ev.witness is None:
        return False
    granted = granted_at(ev).get(token)
    return any(granted is None or e.started < granted for e in ev.witness.by_token(token))


def _verdict(clause_id: str, problems: list[str], judged: int, none: str, held: str) -> ClauseResult:
    if problems:
        return _result(clause_id, Verdict.INVALID, problems[0], problems)
    if not judged:
        return _result(clause_id, Verdict.UNKNOWN, none)
    return _result(clause_id, Verdict.VALID, held)


# clause -> (why unknown, what held) for check_recovery_turn
TURN_TEXTS = {
    "EFF-08": ("no request followed a restart that left a write unknown",
               "{n} judgement(s): recovery turns offered and ran only trusted reads and state probes"),
    "EFF-06": ("no recovery turn met a tool named 'read...' or a read-only claim of the model's",
               "{n} tool(s) or call(s) looking read-only kept their registered class"),
    "EFF-10": ("no recovery turn met a tool named like a built-in read, grep, glob or list, or declared read-only "
               "by its plugin",
               "{n} tool(s) or call(s) named like a built-in or declared read-only by their plugin kept their "
               "registered class (acceptEdits flags are not judged)"),
    "EFF-05": ("no write's tool was re-registered with another class before its recovery",
               "{n} recovery turn(s) restricted by the class the write ran under, not its tool's later registration"),
    "EFF-07": ("no write of a tool registered without a class (protocol 1.2) was cut off",
               "{n} write(s) of a tool registered without a class taken as unknown (the general shell and MCP parts "
               "are the same default, not run separately)"),
}


def check_recovery_turn(ev: Evidence) -> list[ClauseResult]:
    """EFF-08, EFF-06, EFF-10, EFF-05 and EFF-07 on each recovery turn after an unknown write."""
    if ev.witness is None:
        return [_result(c, Verdict.UNKNOWN, "no witness log") for c in TURN_TEXTS]
    problems: dict[str, list[str]] = {c: [] for c in TURN_TEXTS}
    judged = dict.fromkeys(TURN_TEXTS, 0)
    for w in unknown_writes(ev):
        first = recovery_request(ev, w)
        if first is None:
            continue
        rid = first.request.get("request_id")
        registry = registry_at(ev.history, first.request["time"])
        plugin_says = declared_read_only(ev.history, first.request["time"])
        offered = first.request["tools_offered"]
        unsafe_offered = [t for t in offered if not safe(registry, t)]
        judged["EFF-08"] += 1
        if unsafe_offered:
            problems["EFF-08"].append(f"request {rid} (script {w.script}, the first after the restart at event "
                                      f"{w.fault.index}) offers {unsafe_offered} while a write's outcome is unknown")
        if w.execution.effect_class == UNCLASSIFIED:  # registered without a class: unknown by default
            judged["EFF-07"] += 1
            if unsafe_offered:
                problems["EFF-07"].append(
                    f"request {rid} offers {unsafe_offered} after {w.execution.tool}, registered without a class "
                    "(a custom tool, unknown by default), was cut off: it was not taken as unknown")
        now = registry.get(w.execution.tool)
        if now in SAFE:  # re-registered safe since the write ran: only the class at execution restricts the turn
            judged["EFF-05"] += 1
            if unsafe_offered:
                problems["EFF-05"].append(
                    f"request {rid} offers {unsafe_offered}: the unknown write of {w.execution.tool} ran as "
                    f"{w.execution.effect_class}; its tool's registration as {now} since then does not make it safe")
        for name in registry:
            if safe(registry, name):
                continue
            for clause_id, disguised in (("EFF-06", "read" in name.lower()),
                                         ("EFF-10", name.lower() in BUILTIN_INVESTIGATION or name in plugin_says)):
                if disguised:
                    judged[clause_id] += 1
                    if name in offered:
                        problems[clause_id].append(f"request {rid} offers {name} (registered "
                                                   f"{registry[name]}) on the recovery turn after an unknown write")
        for token, name, claimed in _asked(first):
            if safe(registry, name):
                continue
            ran = _ran(ev, token)
            judged["EFF-08"] += 1
            if ran:
                problems["EFF-08"].append(f"{name} (registered {registry.get(name, 'not at all')}) ran on the "
                                          f"recovery turn of script {w.script} (token {token})")
            for clause_id, disguised, why in (
                    ("EFF-06", "read" in name.lower() or claimed,
                     "its name contains 'read'" if "read" in name.lower() else "the model claimed it read-only"),
                    ("EFF-10", name.lower() in BUILTIN_INVESTIGATION or name in plugin_says,
                     "it is named like a built-in" if name.lower() in BUILTIN_INVESTIGATION
                     else "its plugin declares it read-only")):
                if disguised:
                    judged[clause_id] += 1
                    if ran:
                        problems[clause_id].append(f"{name} (registered {registry.get(name, 'not at all')}) ran on "
                                                   f"the recovery turn after an unknown write: {why} (token {token})")
    return [_verdict(c, problems[c], judged[c], none, held.format(n=judged[c]))
            for c, (none, held) in TURN_TEXTS.items()]


def _sessions(ev: Evidence) -> dict[str, str]:
    """script id -> the session the kit submitted it to (from the tags in each submit's text)."""
    out: dict[str, str] = {}
    for op in ev.history.ops:
        if op.type == "invoke" and op.f == "submit" and op.value.get("session_id"):
            for script in SCRIPT_TAG_RE.findall(op.value.get("text", "")):
                out.setdefault(script, op.value["session_id"])
    return out


def _disturbed(ev: Evidence, after: float) -> bool:
    """A restart or a user stop after ``after``: a call answered then may legitimately never run."""
    from recoverykit.conformance.intent import intent_of
    return (any(f.time > after for f in restarts(ev.history))
            or any(t > after for _, t, _ in _stops(ev))
            or bool(intent_of(ev.history).indeterminate_stops()))  # it may have happened then, or may still


def check_not_blocked(ev: Evidence) -> list[ClauseResult]:
    """EFF-03: an unknown write blocks neither investigation in its session nor independent work elsewhere."""
    final = ev.history.final_observation()
    if ev.witness is None or final is None or not final.quiescent:
        return [_result("EFF-03", Verdict.UNKNOWN, "no witness log, or the run never settled")]
    problems, reads, independent = [], 0, 0
    writers = {w.script for w in unknown_writes(ev)}
    session = _sessions(ev)
    for w in unknown_writes(ev):
        first = recovery_request(ev, w)
        answered_at = (first.response or first.request)["time"] if first is not None else 0.0
        if first is not None and not _disturbed(ev, answered_at):
            registry = registry_at(ev.history, first.request["time"])
            for token, name, _ in _asked(first):
                if safe(registry, name):
                    reads += 1
                    if not _ran(ev, token):
                        problems.append(f"the trusted read {name} asked for on the recovery turn of script {w.script} "
                                        f"never ran (token {token}): investigation was blocked")
        for c in calls(ev.ledger):
            script = c.request.get("script_id")
            if (script in writers or session.get(script) in (None, session.get(w.script)) or not c.delivered
                    or c.request["time"] <= w.fault.time
                    or _disturbed(ev, c.response["time"])):
                continue
            registry = registry_at(ev.history, c.request["time"])
            for token, name, _ in _asked(c):
                if name in registry:
                    independent += 1
                    if not _ran(ev, token):
                        problems.append(f"{name}, asked for by script {script} (another session, no unknown write) "
                                        f"after the restart, never ran (token {token}): the unknown write of script "
                                        f"{w.script} blocked independent work")
    if problems:
        return [_result("EFF-03", Verdict.INVALID, problems[0], problems)]
    if not reads + independent:
        return [_result("EFF-03", Verdict.UNKNOWN, "no investigation or independent work asked for after an unknown "
                                                   "write")]
    return [_result("EFF-03", Verdict.VALID, f"{reads} investigation call(s) and {independent} independent call(s) "
                                             "ran while a write's outcome stayed unknown")]


def check_interrupted_turn_ends(ev: Evidence) -> list[ClauseResult]:
    """EFF-11: the turn of an unknown write ends interrupted though its effect stays unresolved."""
    final = ev.history.final_observation()
    writes = list(unknown_writes(ev))
    if not writes:
        return [_result("EFF-11", Verdict.UNKNOWN, "no restart left a write unknown")]
    if final is None or not final.quiescent:
        return [_result("EFF-11", Verdict.UNKNOWN, "the run never settled after the unknown write")]
    turns, tool_calls = final.snapshot.get("turns"), final.snapshot.get("tool_calls")
    if turns is None or tool_calls is None:
        return [_result("EFF-11", Verdict.UNKNOWN, "turns or tool_calls not observed")]
    status = {t["turn_id"]: t["status"] for t in turns}
    problems, judged = [], 0
    for w in writes:
        e = w.execution
        if not any(c.request.get("script_id") == w.script and c.request["time"] > w.fault.time
                   for c in calls(ev.ledger)):
            continue  # its work did not go on (stopped, or waiting on something else): no recovery ended the turn
        mine = [c for c in tool_calls if c.get("pid") is not None and c["pid"] in (e.pid, e.ppid)]
        for c in mine:
            judged += 1
            if status.get(c["turn_id"]) != "interrupted":
                problems.append(f"turn {c['turn_id']}, which made the call {c['call_id']} whose outcome is unknown "
                                f"(the witness: {e.tool} never emitted its result), is "
                                f"{status.get(c['turn_id'], 'missing')} after the run settled, not interrupted")
    return [_verdict("EFF-11", problems, judged, "no observed tool call matched an unknown write (by its child pid)",
                     f"{judged} turn(s) with an unresolved effect ended interrupted")]


def check_live_child_awaited(ev: Evidence) -> list[ClauseResult]:
    """OWN-07: a tool child a restart left alive is waited for, never killed nor re-run, nothing sent early."""
    if ev.witness is None:
        return [_result("OWN-07", Verdict.UNKNOWN, "no witness log")]
    final = ev.history.final_observation()
    from recoverykit.conformance.intent import intent_of
    intent = intent_of(ev.history)
    maybe = intent.indeterminate_stops()  # stops that may have happened (an indefinite reply): a cancel is allowed
    ended = {w for w, _, _ in _stops(ev)} | {w for w, _ in maybe if w is not None}
    if any(w is None for w, _ in maybe):
        ended |= set(intent.submits)
    work_of = ev.work_of_script()
    problems, judged = [], 0
    faults = restarts(ev.history)
    for f in faults:
        for e in ev.witness.executions:
            if not (e.started < f.time and (e.finished is None or e.finished > f.time)):
                continue
            # every restart since it started is the kit's own kill (pids recorded: certify's or chaos's), and none
            # of them killed it: a restart the runtime did itself says nothing of which processes it took down
            since = [g.detail.get("pids", g.detail.get("killed")) for g in faults if e.started < g.time <= f.time]
            if any(killed is None or e.pid in killed for killed in since):
                continue
            if work_of.get(_script(e)) in ended:
                continue  # the user ended the work: an explicit cancel is allowed
            if e.finished is None and not (final is not None and final.quiescent):
                continue  # still running when the run ended: nothing to say
            judged += 1
            if e.finished is None:
                problems.append(f"{e.tool} (pid {e.pid}, token {e.probe_token}) was alive at the restart at event "
                                f"{f.index}, which did not kill it, and never finished: the runtime killed it")
                continue
            if ev.witness.count(e.probe_token) > 1:
                problems.append(f"{e.tool} (token {e.probe_token}) ran {ev.witness.count(e.probe_token)} times: "
                                "a live child was started again")
            call_id = next((cid for c in calls(ev.ledger) for tok, cid in
                            zip((c.response or {}).get("probe_tokens") or [], (c.response or {}).get("call_ids") or [],
                                strict=False) if tok == e.probe_token), None)
            early = [c for c in calls(ev.ledger) if f.time < c.request["time"] < e.finished
                     and call_id in (c.request.get("tool_results_for") or [])]
            if early:
                problems.append(f"request {early[0].request.get('request_id')} answered call {call_id} at "
                                f"{early[0].request['time']:.3f}, before its tool (alive through the restart) "
                                f"finished at {e.finished:.3f}: a running tool was taken as stopped")
    return [_verdict("OWN-07", problems, judged, "no tool child outlived a restart that spared it",
                     f"{judged} tool child(ren) alive through a restart were waited for, once each")]


EFFECT_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (
    kit_evidence(check_recovery_turn), kit_evidence(check_not_blocked), check_interrupted_turn_ends,
    kit_evidence(check_live_child_awaited))
