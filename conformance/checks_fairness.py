"""Fair queueing after a restart: no session starved by the others (FA-12), judged from the provider's ledger.

Seed 000: recover multiple sessions together to prove fair queueing. The kit sees every admission in its
provider's ledger without asking the runtime: a session is one script, and a request of step ``k`` starts a new
turn when ``k`` is 0 or the script's step ``k - 1`` was answered without tool calls (a reply with tool calls
continues its turn; a retry of a step is the same admission). An admission is told apart by its script, its
step and the last user message it carries (a runtime that sends each request without the session's earlier
turns asks for step 0 every time; its inputs still differ). After each restart, fair queueing means no
session gets a second admission while another session with work waits for its first: before a session's first
admission after the restart (or after the user last acted on it, if later: a session is not waiting before
its input arrives or while it is paused), every other session got at most ``FAIR_SLACK`` admissions.

The other half of FA-12, staying within the quotas the sessions share, needs the quota, which the adapter
protocol does not carry; it is not judged here. A restart after which fewer than two sessions were admitted,
or none twice, cannot show starvation: ``unknown``.
"""

from __future__ import annotations

from collections import defaultdict

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, kit_evidence
from recoverykit.conformance.checks_crosscheck import _restarts, _verdict
from recoverykit.conformance.provider_ledger import Call, calls
from recoverykit.model.catalogue import Verdict

# admissions another session may get before a waiting session's first: round robin allows one, and one more
# may go out while the waiting session's own recovery (its repair, its decision) is still under way
FAIR_SLACK = 2


def _last_user(c: Call) -> str:
    users = [m for m in c.request.get("messages") or [] if m.get("role") == "user"]
    return str(users[-1].get("sha") or users[-1].get("head") or "") if users else ""


def _admissions(ev: Evidence) -> dict[str, list[tuple[float, int]]]:
    """script -> (time of the first request, step) of every turn start, in order; a retry is the same one."""
    continues: set[tuple[str, int, str]] = set()  # (script, step, input) whose delivered answer called tools
    for c in calls(ev.ledger):
        if c.delivered and c.response.get("probe_tokens"):
            continues.add((c.request.get("script_id"), int(c.request.get("step") or 0), _last_user(c)))
    out: dict[str, list[tuple[float, int]]] = defaultdict(list)
    seen: set[tuple[str, int, str, int]] = set()  # (script, step, input, restart epoch)
    restarts = sorted(f.time for f in _restarts(ev))
    for c in calls(ev.ledger):
        script, step, said = c.request.get("script_id"), int(c.request.get("step") or 0), _last_user(c)
        if not script or (script, step - 1, said) in continues:
            continue
        t = float(c.request["time"])
        epoch = sum(1 for r in restarts if r < t)
        if (script, step, said, epoch) not in seen:
            seen.add((script, step, said, epoch))
            out[script].append((t, step))
    return out


def _acted(ev: Evidence) -> dict[str, list[float]]:
    """script -> when the user's operations on its work were acknowledged (a submit tagged with it, a resume,
    pause or end of its work items): a session is waiting for service only since the last of them."""
    from recoverykit.conformance.provider_script import SCRIPT_TAG_RE
    script_of: dict[str, str] = {}
    out: dict[str, list[float]] = defaultdict(list)
    from recoverykit.conformance.intent import submits
    for invoke, work_id in submits(ev.history):  # acknowledged, or indeterminate and seen to have happened
        for script in SCRIPT_TAG_RE.findall(str(invoke.value.get("text", ""))):
            script_of[work_id] = script
    for invoke, done in ev.history.completions():
        if done is not None and done.type == "fail":
            continue
        # an operation answered by an indefinite error may have happened, from when it was sent (or unanswered)
        t = done.time if done is not None and done.type == "ok" else invoke.time
        if invoke.f == "submit":
            for script in SCRIPT_TAG_RE.findall(str(invoke.value.get("text", ""))):
                out[script].append(t)
        elif invoke.f in ("resume", "pause", "end") and invoke.value.get("work_id") in script_of:
            out[script_of[invoke.value["work_id"]]].append(t)
        elif invoke.f == "stop_all":
            for script in set(script_of.values()):
                out[script].append(t)
    return out


def check_fair_queueing(ev: Evidence) -> list[ClauseResult]:
    """FA-12: after a restart, no session waits for its first admission while another gets a second."""
    admissions = _admissions(ev)
    restarts = sorted(f.time for f in _restarts(ev))
    acted = _acted(ev)
    problems: list[str] = []
    judged = 0
    for i, at in enumerate(restarts):
        until = restarts[i + 1] if i + 1 < len(restarts) else float("inf")
        after = {s: [a for a in got if at < a[0] < until] for s, got in admissions.items()}
        after = {s: got for s, got in after.items() if got}
        if len(after) < 2 or all(len(got) < 2 for got in after.values()):
            continue
        judged += 1
        for script, got in after.items():
            first = got[0][0]
            ready = max([at, *[t for t in acted.get(script, ()) if t < first]])  # it waits from here on
            for other, theirs in after.items():
                ahead = [step for t, step in theirs if ready < t < first]
                if other != script and len(ahead) > FAIR_SLACK:
                    problems.append(f"after the restart at {at:.3f}, session {script} waited for its first admission "
                                    f"while session {other} was admitted {len(ahead)} times (steps {ahead}): "
                                    "starved, not fair queueing")
    if judged and not problems:  # say what was judged: the quota half has nothing to compare with
        return [_result("FA-12", Verdict.VALID, f"fair queueing after {judged} restart(s); the shared quota is not "
                                                "judged: the protocol does not carry it")]
    return [_verdict("FA-12", problems, judged, "no restart after which two sessions were admitted and one of "
                                                "them twice")]


FAIRNESS_CHECKS = (kit_evidence(check_fair_queueing),)
