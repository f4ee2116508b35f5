"""Run intent and the user's priority over automatic continuation, judged from what the kit did and saw.

The kit knows what the user did (its history: every submit, pause and end, and when each was acknowledged) and
what the runtime then asked the model (the scripted provider's ledger: each request's user messages, by
digest and first characters). So, without asking the runtime:

- CTL-05 / FA-14 (new input): once the user's new input to a session whose work is under way has been
  acknowledged, the runtime does not go on with the old automatic continuation ahead of it. A request of that
  session sent after the acknowledgement either carries the input (steered into the continuation, or its own
  queued turn served first), or continues a turn that was alive at that moment (queue semantics: the turn in
  flight may finish; a request whose messages extend that turn's, with no restart in between). Anything else,
  before a request carrying the input was answered, is the old continuation going first. FA-14 counts inputs
  acknowledged during recovery (after a restart, while the session's work was unfinished).
- FA-14 (Pause / End): a stop acknowledged during recovery wins: the causal rule of CTL-07
  (``checks_flow.stop_breaches``): nothing the runtime decided after the acknowledgement starts.
- RI-06: once a start disabled automatic recovery (protocol 1.2), work a kill interrupted is not continued by
  itself: the provider hears nothing of it until the user resumes it.
- RI-07: a paused record an older version left, for a reason this version does not know (the adapter writes
  it during downtime, protocol 1.2), stays paused with a reason_code, and its input never reaches the model.
- REC-02 (user stop first): an item the user stopped before the kit took one of its resources away shows the
  user's stop, not the resource's reason, until the user resumes it (the reason is the runtime's word).
- REC-03 (runnable work queued): after a restart, work the kit still meant to run is queued or running, or held
  for a cause the kit itself saw (a fault reason only with a failed provider attempt in the ledger).

What became of the inputs themselves (INP-02, FA-03, RI-01) is ``checks_inputs``. Evidence the run did not
produce gives ``unknown``.
"""

from __future__ import annotations

from collections.abc import Callable

from recoverykit.conformance.checker import ClauseResult, Evidence, kit_evidence
from recoverykit.conformance.checks_crosscheck import _restarts, _verdict, _work_of_scripts
from recoverykit.conformance.checks_flow import _by_script, stop_breaches
from recoverykit.conformance.checks_inputs import copies
from recoverykit.conformance.intent import Intent, indeterminate
from recoverykit.conformance.provider_ledger import Call, calls
from recoverykit.conformance.provider_script import SCRIPT_TAG_RE

_NOT_RECOVERY = {"frontend_reload"}  # a reload only disconnects a client: no process stops, nothing recovers


def _shape(call: Call) -> list[tuple[str, str]]:
    return [(m.get("role"), m.get("sha")) for m in call.request.get("messages") or []]


def _extends(call: Call, base: Call) -> bool:
    mine, theirs = _shape(call), _shape(base)
    return len(mine) >= len(theirs) and mine[:len(theirs)] == theirs


def _finished_by(attempts: list[Call], t: float) -> bool:
    """Was the script's final answer delivered before ``t``?"""
    return any(c.delivered and c.request.get("script_steps") is not None
               and c.request.get("step") == c.request["script_steps"] - 1 and not c.response.get("probe_tokens")
               and c.response["time"] < t for c in attempts)


def _restart_times(ev: Evidence) -> list[float]:
    return [f.time for f in _restarts(ev) if f.kind not in _NOT_RECOVERY]


def check_input_priority(ev: Evidence) -> list[ClauseResult]:
    """CTL-05 and FA-14 (new input): the old automatic continuation never goes ahead of acknowledged input."""
    ledger = _by_script(ev)
    restarts = _restart_times(ev)
    judged = {"CTL-05": 0, "FA-14": 0}
    problems: dict[str, list[str]] = {"CTL-05": [], "FA-14": []}
    for invoke, done in ev.history.completions():
        if invoke.f != "submit" or done is None or done.type != "ok":
            continue
        text = str(invoke.value.get("text", ""))
        tags = SCRIPT_TAG_RE.findall(text)
        if len(tags) != 1:
            continue
        acked = done.time
        attempts = ledger.get(tags[0], [])
        earlier = [c for c in attempts if c.request["time"] < acked]
        if not earlier or _finished_by(attempts, acked) or any(copies(c, text) for c in earlier):
            continue  # nothing of the session was under way, or this is the input that started it
        def between(a: float, b: float) -> bool:
            return any(a < t < b for t in restarts)

        alive = [c for c in earlier if not between(c.request["time"], acked) and (
            c.response is None or c.response["time"] > acked or (c.delivered and c.response.get("probe_tokens")))]
        served = min((c.response["time"] for c in attempts if c.delivered and copies(c, text)), default=float("inf"))
        bad = []
        for c in attempts:
            sent = c.request["time"]
            if sent <= acked or sent > served or copies(c, text):
                continue
            if any(_extends(c, base) for base in alive) and not between(acked, sent):
                continue  # the turn in flight when the input came finishes first (queue semantics)
            bad.append(f"input {invoke.value.get('client_msg_id')!r} was acknowledged (op {done.index}), yet request "
                       f"{c.request.get('request_id')} of script {tags[0]} (step {c.request.get('step')}) went on "
                       "without it, continuing no turn that was alive then, before any request carrying the input "
                       "was answered")
        clauses = ("CTL-05", "FA-14") if any(t < acked for t in restarts) else ("CTL-05",)
        for clause_id in clauses:
            judged[clause_id] += 1
            problems[clause_id] += bad
    return [_verdict("CTL-05", problems["CTL-05"], judged["CTL-05"],
                     "no input was acknowledged while earlier work of its session was under way"),
            _verdict("FA-14", problems["FA-14"], judged["FA-14"],
                     "no input was acknowledged while recovery of its session's work was under way")]


def check_stops_during_recovery(ev: Evidence) -> list[ClauseResult]:
    """FA-14 (Pause / End): a stop acknowledged during recovery wins; the old version never continues."""
    owners = _work_of_scripts(ev)
    script_of = {w: s for s, ws in owners.items() for w in ws}
    ledger = _by_script(ev)
    restarts = _restart_times(ev)
    problems, judged = [], 0
    for done, work_id, found in stop_breaches(ev):
        attempts = ledger.get(script_of.get(work_id, ""), [])
        last = max((t for t in restarts if t < done.time), default=None)
        if last is None or _finished_by(attempts, done.time) or not any(c.request["time"] < last for c in attempts):
            continue  # not during recovery: no restart interrupted this item's work before the stop
        judged += 1
        problems += found
    return [_verdict("FA-14", problems, judged, "no Pause or End was acknowledged while an item was being recovered")]


def check_recovery_disabled(ev: Evidence) -> list[ClauseResult]:
    """RI-06: after a start that disabled automatic recovery (``start.automatic_recovery`` false, protocol 1.2),
    work a kill interrupted before it sends the provider nothing until the user resumes it (or a start enables
    recovery again): the ledger is the kit's own record of every request."""
    owners = _work_of_scripts(ev)
    ledger = _by_script(ev)
    starts = [op for op in ev.history.ops if op.type == "invoke" and op.f in ("start", "restart")
              and op.value.get("automatic_recovery") is not None]
    resumes = [(op.value.get("work_id"), op.time) for op in ev.history.ops if op.type == "invoke" and op.f == "resume"]
    problems, judged = [], 0
    for start in (s for s in starts if s.value["automatic_recovery"] is False):
        enabled = min((s.time for s in starts if s.time > start.time and s.value["automatic_recovery"]),
                      default=float("inf"))
        for script_id, attempts in ledger.items():
            if not any(c.request["time"] < start.time for c in attempts) or _finished_by(attempts, start.time):
                continue  # not under way when the runtime went down
            until = min([enabled, *(t for w, t in resumes if w in owners.get(script_id, ()) and t > start.time)])
            judged += 1
            late = [c for c in attempts if start.time < c.request["time"] < until]
            if late:
                problems.append(f"automatic recovery was disabled (start, op {start.index}), yet script {script_id}'s "
                                f"interrupted work sent request {late[0].request.get('request_id')} (step "
                                f"{late[0].request.get('step')}) before the user resumed it")
    return [_verdict("RI-06", problems, judged, "no start disabled automatic recovery while work was under way")]


def check_legacy_paused(ev: Evidence) -> list[ClauseResult]:
    """RI-07: a paused record an older version left, for a reason this version does not know (written by the
    adapter during downtime, ``plant_paused_record``), stays paused with an explanation: its input never reaches
    the provider (the kit's ledger) until the user resumes it, and every observation after it shows it still
    there, not meant to run, with a reason_code."""
    requests = [c for c in calls(ev.ledger) if isinstance(c.request.get("messages"), list)]
    problems, judged = [], 0
    for invoke, done in ev.history.completions():
        if invoke.f != "plant_paused_record" or done is None or done.type != "ok":
            continue
        work_id, text = done.value.get("work_id"), str(invoke.value.get("text", ""))
        until = min((op.time for op in ev.history.ops if op.type == "invoke" and op.f == "resume"
                     and op.value.get("work_id") == work_id and op.time > done.time), default=float("inf"))
        sent = [c for c in requests if done.time < c.request["time"] < until and copies(c, text)]
        if sent:
            problems.append(f"the old paused record {work_id} ({invoke.value.get('reason')!r}) was guessed to have "
                            f"been running: request {sent[0].request.get('request_id')} carried its input")
        seen = [o for o in ev.snapshots() if done.time < o.time < until and o.snapshot.get("work_items") is not None]
        for o in seen:
            item = next((w for w in o.snapshot["work_items"] if w["work_id"] == work_id), None)
            if item is None:
                problems.append(f"the old paused record {work_id} is gone at observation {o.index}")
            elif item["desired_state"] == "run" or item["status"] != "paused" or not item.get("reason_code"):
                problems.append(f"the old paused record {work_id} is {item['status']} / desired {item['desired_state']}"
                                f" / reason {item.get('reason_code')!r} at observation {o.index}: not kept paused with "
                                "an explanation")
        judged += bool(seen and any(o.quiescent for o in seen))
    return [_verdict("RI-07", problems, judged, "no old paused record was planted and then observed settled")]


USER_STOP_REASONS = {"user_paused", "user_stopped_all", "user_cancelled"}
FAULT_REASONS = {"retry_scheduled", "retry_exhausted"}


def check_runnable_queued(ev: Evidence) -> list[ClauseResult]:
    """REC-03 (its first rule): after a restart, work the kit still meant to run is queued or running (or finished),
    never held (waiting, paused, failed) for a cause the kit did not see: a fault reason needs a failed provider
    attempt of its script in the ledger, any other reason the cause ``checks_reasons`` accepts. Every observation
    between a restart and the next is judged, not only the settled one: a runtime that parks recovered work behind
    a retry that never comes looks settled and explained (RI-02 and RI-08 skip a fault reason)."""
    from recoverykit.conformance.checks_reasons import _caused
    from recoverykit.conformance.checks_resources import REASONS, variants
    intent = Intent(ev.history)  # an indeterminate stop may have happened: such an item is not judged
    meant_at = intent.meant_to_run
    missing = [(REASONS.get(v.resource), v.work_id, v.start_index) for v in variants(ev)]
    scripts: dict[str, set[str]] = {}
    for script_id, work_id in ev.work_of_script().items():
        scripts.setdefault(work_id, set()).add(script_id)
    failed = {c.request.get("script_id") for c in calls(ev.ledger) if (c.response or {}).get("status", 200) >= 400}
    faults = sorted(_restarts(ev), key=lambda f: f.index)
    problems, judged = [], 0
    for n, fault in enumerate(faults):
        end = faults[n + 1].index if n + 1 < len(faults) else 1 << 62
        for o in ev.snapshots():
            if not fault.index < o.index < end:
                continue
            for item in o.snapshot.get("work_items") or []:
                if not meant_at(item["work_id"], o.index) or item["status"] == "finished":
                    continue
                judged += 1
                if item["status"] in ("queued", "running"):
                    continue
                reason = item.get("reason_code") or ""
                mine = scripts.get(item["work_id"], set())
                took = any(r == reason and w == item["work_id"] and at < o.index for r, w, at in missing)
                why = (("the provider failed an attempt" if mine & failed else None) if reason in FAULT_REASONS
                       else "the kit took that resource away" if took else _caused(ev, item["work_id"], reason, mine))
                if why is None:
                    problems.append(f"{item['work_id']} is {item['status']} / {reason or '(no reason)'} at "
                                    f"observation {o.index} after the {fault.kind} (event {fault.index}), though the "
                                    "kit meant it to run and saw no such cause: runnable work is queued")
    return [_verdict("REC-03", problems, judged, "no unfinished work the kit meant to run was observed after a "
                                                "restart")]


def check_stop_first(ev: Evidence) -> list[ClauseResult]:
    """REC-02 (its first rule): an item the user stopped before the kit took a resource away from it shows the
    user's stop, not the resource's reason, for as long as the user has not resumed it."""
    from recoverykit.conformance.checks_resources import _item, _window, variants
    problems, judged = [], 0
    for v in variants(ev):
        stopped = resumed_at = None
        for invoke, done in ev.history.completions():
            if invoke.f not in ("pause", "end", "stop_all", "resume"):
                continue
            # a stop counts once acknowledged; a Resume that may have happened (indeterminate) ends the stop too
            if not ((done is not None and done.type == "ok") or (invoke.f == "resume" and indeterminate(done))):
                continue
            names = done.value.get("stopped", []) if invoke.f == "stop_all" else [invoke.value.get("work_id")]
            if v.work_id not in names:
                continue
            if invoke.f == "resume":
                if invoke.time < v.start:
                    stopped = None
                elif stopped is not None and resumed_at is None:
                    resumed_at = invoke.index
            elif invoke.time < v.start:
                stopped = done.index
        if stopped is None:
            continue
        for o in _window(ev, v):
            item = _item(o, v.work_id)
            if item is None or (resumed_at is not None and o.index > resumed_at):
                continue
            judged += 1
            if item.get("reason_code") not in USER_STOP_REASONS or item["desired_state"] == "run":
                problems.append(f"{v.work_id} was stopped by the user (op {stopped}) before {v.what.split(' of ')[0]}"
                                f" went missing, yet it shows {item['status']} / {item.get('reason_code')!r} (desired "
                                f"{item['desired_state']}) at observation {o.index}: the user's stop comes first")
    return [_verdict("REC-02", problems, judged, "no item the user had stopped lost a resource during downtime")]


INTENT_CHECKS: tuple[Callable[[Evidence], list[ClauseResult]], ...] = (
    kit_evidence(check_input_priority), kit_evidence(check_stops_during_recovery),
    kit_evidence(check_recovery_disabled), kit_evidence(check_legacy_paused),
    # the status and reason judged are the runtime's word (observe); the kit's evidence only refutes excuses
    check_stop_first, check_runnable_queued,
)
