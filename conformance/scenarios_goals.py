"""The Goal profile's scripts and drives; ``scenarios`` declares their ``Scenario`` entries in the single catalogue.

Each Goal is opened with ``goal_create`` (certify's drives and chaos alike: ``Scenario.opens_goal``); its
objective carries the session's script tag, so the scripted provider answers its worker requests from the
script's steps and its acceptance (a request marked ``X-Recoverykit-Role: verifier``) from the script's
``verifier`` replies, keyed by how many worker steps were delivered before it.

The scripted worker speaks its Goal actions as directives in its answer text (docs/adapter-guide.md, "Goals"):
``[[goal:todo ID]]``, ``[[goal:done ID]]``, ``[[goal:candidate]]``, ``[[goal:blocker KEY on=ID]]``. The verifier
answers JSON ``{"requirements": {"objective": {"verdict": "met", "evidence": ["step:N"]}}}``: a runtime
extracts the requirement ``objective`` from an objective without ``[[req:ID]]`` markers. What the kit
judges is in ``checks_goals``; the drives add only what a check cannot see (a refused Resume, the state
the Goal ends in).
"""

from __future__ import annotations

import json
import time
from typing import Any

from recoverykit.conformance.checker import ClauseResult, _result
from recoverykit.conformance.environment import Run
from recoverykit.conformance.pacing import GOAL_SETTLE, REPORT
from recoverykit.conformance.provider_script import script_tag
from recoverykit.model.catalogue import Verdict

GOAL_SETTLE_S = GOAL_SETTLE.seconds  # the Goal windows (``pacing``): scaled by the run's pacing
PAUSED_FOR_S = 0.3
HOLD_VERIFIER = [{"kind": "hold", "at_chunk": 0, "attempts": [1]}]


def verdict(outcome: str = "met", *evidence: int, faults: list | None = None,
            usage: tuple[int, int] = (40, 10)) -> dict:
    """A verifier reply: the requirement ``objective`` with ``outcome`` and evidence ``step:N`` for each N."""
    body = {"requirements": {"objective": {"verdict": outcome, "evidence": [f"step:{n}" for n in evidence]}}}
    return {"text": json.dumps(body), "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
            "faults": faults or []}


def verdicts(said: dict[str, tuple[str, ...]], faults: list | None = None, usage: tuple[int, int] = (40, 10)) -> dict:
    """A verifier reply for named requirements: {req_id: (verdict, "step:N", ...)}."""
    body = {"requirements": {req: {"verdict": v[0], "evidence": list(v[1:])} for req, v in said.items()}}
    return {"text": json.dumps(body), "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
            "faults": faults or []}


def work(text: str, tokens: tuple[int, int] = (30, 12)) -> dict:
    return {"text": text, "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}}


def goal_script(script_id: str, steps: list[dict], verifier: dict[int, dict], usage: str = "final") -> dict:
    return {"id": script_id, "usage_style": usage, "steps": steps, "verifier": {str(k): v for k, v in verifier.items()}}


def objective(script_id: str, text: str = "write the report") -> str:
    return f"{script_tag(script_id)} {text}"


def create(run: Run, script_id: str, budget: dict | None = None, text: str = "write the report",
           session: str | None = None) -> dict[str, Any] | None:
    """goal_create for the script's session (or ``session``); the reply's fields, or None if refused."""
    out = run.op("goal_create", session_id=session or f"s-{script_id}", objective=objective(script_id, text),
                 budget=budget)
    return out.reply.model_dump(mode="json") if out.ok else None


def goal(snapshot: dict[str, Any], goal_id: str | None) -> dict[str, Any] | None:
    return next((g for g in snapshot.get("goals") or [] if g["goal_id"] == goal_id), None)


def expect_state(snapshot: dict[str, Any], created: dict | None, states: set[str], clause_id: str,
                 when: str, quiescent: bool = True) -> ClauseResult:
    """``clause_id`` holds if the Goal is in one of ``states``; a Goal still active when the settle before this
    observation said the runtime had not settled (``quiescent`` false) is slow, not wrong: unknown."""
    if created is None:
        return _result(clause_id, Verdict.UNKNOWN, "goal_create was refused")
    found = goal(snapshot, created["goal_id"])
    if found is None:
        return _result(clause_id, Verdict.UNKNOWN, f"Goal {created['goal_id']} not observed {when}")
    ok = found["state"] in states
    detail = f"Goal {created['goal_id']} is {found['state']} {when}"
    if not ok and not quiescent and found["state"] == "active":
        from recoverykit.conformance.scenarios import unsettled  # it imports this module
        return _result(clause_id, Verdict.UNKNOWN, unsettled(f"{detail} (expected {sorted(states)})", GOAL_SETTLE_S,
                                                           GOAL_SETTLE.name))
    return _result(clause_id, Verdict.VALID if ok else Verdict.INVALID,
                   detail if ok else f"{detail} (expected {sorted(states)})")


def wait_state(run: Run, goal_id: str, states: set[str], timeout_s: float = GOAL_SETTLE_S) -> dict[str, Any]:
    """The first snapshot showing the Goal in one of ``states``, or the last one after the window (scaled)."""
    deadline = time.monotonic() + run.window(timeout_s)
    snap = run.observe()
    while time.monotonic() < deadline:
        found = goal(snap, goal_id)
        if found is not None and found["state"] in states:
            return snap
        time.sleep(0.1)
        snap = run.observe()
    return snap


# --- scripts --------------------------------------------------------------------------------------

THREE_TURNS = goal_script("gw", [work("[[goal:todo t1]] [[goal:todo t2]] plan: two parts"),
                                 work("[[goal:done t1]] part one written"),
                                 work("[[goal:done t2]] part two written")], {3: verdict("met", 1, 2)})
RESTARTED = goal_script("gk", [work("[[goal:todo t1]] [[goal:todo t2]] plan: two parts"),
                                {**work("[[goal:done t1]] part one written"), "faults": HOLD_VERIFIER},
                                work("[[goal:done t2]] part two written")], {3: verdict("met", 1, 2)})
# a later Goal (its own session: the scripted provider tells Goals apart by session history) must not replace
# the first one's terminal record (GOAL-10)
RESTARTED_NEXT = goal_script("gk2", [work("[[goal:candidate]] the next report")], {1: verdict("met", 0)})
DOWNTIME_JUMP_S = 600.0  # the restart moves the runtime's clock: downtime is never active time (USG-11, USG-12)
UNMET = goal_script("gu", [work("[[goal:candidate]] a first draft"), work("[[goal:candidate]] the draft, fixed")],
                    {1: verdict("unmet"), 2: verdict("met", 1)})
MISSING_EVIDENCE = goal_script("gm", [work("[[goal:candidate]] done, trust me"), work("[[goal:candidate]] proof")],
                               {1: verdict("met"), 2: verdict("met", 1)})
# two requirements; the worker adds and drops a Todo item named like one (a requirement stays, ACC-02); the
# revision leaves ``charts`` out without a reason, which is no waiver (ACC-11): both are judged again
REVISED_OBJECTIVE = "[[req:report]] write the report [[req:charts]] with charts"
REVISION_OBJECTIVE = "[[req:report]] write the report, with a summary"
REVISED = goal_script("gr", [work("[[goal:todo charts]] [[goal:drop charts]] [[goal:candidate]] the first objective "
                                  "done"),
                             work("[[goal:candidate]] the revised objective done")],
                      {1: verdicts({"report": ("met", "step:0"), "charts": ("met", "step:0")}, faults=HOLD_VERIFIER),
                       2: verdicts({"report": ("met", "step:1"), "charts": ("met", "step:1")})})
PAUSED = goal_script("gp", [work("[[goal:candidate]] done")], {1: verdict("met", 0, faults=HOLD_VERIFIER)})
CHAT_BESIDE = {"id": "gpc", "usage_style": "final", "steps": [work("an ordinary answer")]}
BLOCKED = goal_script("gb", [work("[[goal:todo t1]] [[goal:blocker dep on=t1]] waiting for the dependency"),
                             work("[[goal:blocker dep on=t1]] still waiting for the dependency")], {})
INDEPENDENT = goal_script("gi", [work("[[goal:todo t1]] [[goal:todo t2]] [[goal:blocker dep on=t1]] t1 waits"),
                                 work("[[goal:blocker dep on=t1]] working on t2 meanwhile"),
                                 work("[[goal:done t2]] [[goal:done t1]] the dependency came back")],
                          {3: verdict("met", 2)})
UNKNOWN_COST = goal_script("gc", [work("[[goal:todo t1]] step one"), work("[[goal:done t1]] step two")],
                           {2: verdict("met", 1)}, usage="none")
EXTERNAL = "probe_external"  # the kit's scripted external operation (drives_waits)
LIVE_WAIT = goal_script("gl", [{"tool_calls": [{"name": EXTERNAL, "arguments": {}}],
                                "usage": {"prompt_tokens": 20, "completion_tokens": 8}},
                               work("[[goal:candidate]] the operation completed")], {2: verdict("met", 1)})
WAIT_SEEN_S = REPORT.seconds  # how long the drive looks for the waiting phase (a runtime that never waits goes on)
IDLE_WINDOW_S = 0.5  # time an idle model turn has to happen while the Goal waits
EXHAUSTED = goal_script("ge", [work("[[goal:todo t1]] one"), work("[[goal:done t1]] two")], {2: verdict("met", 1)})
# 42 tokens a step: the second step reaches the limit just as the Todo is done, so acceptance waits for the budget
EXHAUST_LIMIT = {"max_tokens": 60, "max_cost_usd": None}
UNKNOWN_COST_LIMIT = {"max_tokens": 100000, "max_cost_usd": None}
# a time limit the first step's held response outlasts: admission must stop at it (USG-14); the second step is held
# too, so a runtime that goes on is observed past its limit before its next request
TIME_LIMIT = {"max_tokens": None, "max_cost_usd": None, "max_active_s": 0.05}
TIME_HELD_S = 0.2
TIMED = goal_script("gt", [{**work("[[goal:todo t1]] one"), "faults": HOLD_VERIFIER},
                           {**work("[[goal:todo t2]] two"), "faults": HOLD_VERIFIER},
                           work("[[goal:done t1]] [[goal:done t2]] three")], {3: verdict("met", 2)})


# --- drives ---------------------------------------------------------------------------------------


def drive_three_turns(run: Run) -> list[ClauseResult]:
    run.start()
    created = create(run, "gw")
    final_quiet, final = run.settle(GOAL_SETTLE_S)
    return [expect_state(final, created, {"achieved"}, "ACC-04", "after three work turns and one acceptance",
                         final_quiet)]


def drive_restart(run: Run) -> list[ClauseResult]:
    """An active Goal is killed mid-work and continues by itself; an achieved one stays achieved."""
    run.start()
    created = create(run, "gk")
    if created is None:
        return [_result("GOAL-01", Verdict.UNKNOWN, "goal_create was refused")]
    run.wait_held(GOAL_SETTLE_S, script_id="gk", step=1)
    run.observe()  # its active time before the kill: the restart neither resets it nor counts the downtime
    run.kill("tree_kill")
    run.provider.release(cut=True)
    run.start(clock_offset_s=run.clock_offset_s + DOWNTIME_JUMP_S)
    final_quiet, final = run.settle(GOAL_SETTLE_S)
    out = [expect_state(final, created, {"achieved"}, "GOAL-01", "after a kill mid-work", final_quiet)]
    run.kill("tree_kill")
    run.start()
    again_quiet, again = run.settle(GOAL_SETTLE_S)
    out.append(expect_state(again, created, {"achieved"}, "GOAL-06", "after another restart", again_quiet))
    create(run, "gk2")  # a later Goal ends too: the first one's terminal record stays its own (GOAL-10)
    run.settle(GOAL_SETTLE_S)
    return out


def drive_until_settled(script_id: str, budget: dict | None = None):
    def drive(run: Run) -> list[ClauseResult]:
        run.start()
        create(run, script_id, budget)
        run.settle(GOAL_SETTLE_S)
        return []
    drive.__name__ = f"drive_goal_{script_id}"
    return drive


def drive_revision_during_verifying(run: Run) -> list[ClauseResult]:
    run.start()
    created = create(run, "gr", text=REVISED_OBJECTIVE)
    if created is None:
        return [_result("GOAL-02", Verdict.UNKNOWN, "goal_create was refused")]
    run.wait_held(GOAL_SETTLE_S, script_id="gr", step=1)
    run.op("goal_update", goal_id=created["goal_id"], revision=created["revision"],
           objective=objective("gr", REVISION_OBJECTIVE), reason=None)
    run.provider.release()
    run.settle(GOAL_SETTLE_S)
    return []


def drive_pause_during_verifying(run: Run) -> list[ClauseResult]:
    run.start()
    created = create(run, "gp")
    if created is None:
        return [_result("GOAL-04", Verdict.UNKNOWN, "goal_create was refused")]
    run.wait_held(GOAL_SETTLE_S, script_id="gp", step=1)
    run.op("pause", work_id=created["work_id"])
    run.observe()  # paused: its active time stands still from the Pause on (USG-11), also while the reply comes
    time.sleep(PAUSED_FOR_S)
    run.observe()
    run.provider.release()
    _, paused = run.settle(GOAL_SETTLE_S)
    out = [expect_state(paused, created, {"paused"}, "GOAL-04", "after a Pause during verifying")]
    run.op("submit", session_id="s-gpc", text=f"{script_tag('gpc')} ordinary chat", client_msg_id="c-gpc-1")
    run.settle(GOAL_SETTLE_S)  # ordinary chat while the Goal is paused: none of its usage is the Goal's (USG-02)
    run.op("resume", work_id=created["work_id"])
    final_quiet, final = run.settle(GOAL_SETTLE_S)
    out.append(expect_state(final, created, {"achieved"}, "GOAL-05", "after Resume: acceptance again, then achieved",
                            final_quiet))
    return out


def drive_blocker(run: Run) -> list[ClauseResult]:
    run.start()
    blocked = create(run, "gb")
    independent = create(run, "gi")
    final_quiet, final = run.settle(GOAL_SETTLE_S)
    return [expect_state(final, blocked, {"blocked"}, "GOAL-07", "after the same blocker twice, no other work",
                         final_quiet),
            expect_state(final, independent, {"achieved"}, "GOAL-07", "with independent work left beside the blocker",
                         final_quiet)]


def drive_unknown_cost(run: Run) -> list[ClauseResult]:
    run.start()
    created = create(run, "gc", UNKNOWN_COST_LIMIT)
    timed = create(run, "gt", TIME_LIMIT)
    if timed is not None and run.wait_held(GOAL_SETTLE_S, script_id="gt", step=0):
        time.sleep(TIME_HELD_S)  # active time passes its limit while the first response is held
        run.provider.release()
        deadline = time.monotonic() + run.window(GOAL_SETTLE_S)
        while time.monotonic() < deadline:
            found = goal(run.observe(), timed["goal_id"]) or {}
            if found.get("state") != "active" or run.provider.held():
                break
            time.sleep(0.05)
        run.observe()
        run.provider.release()
    final_quiet, final = run.settle(GOAL_SETTLE_S)
    found = goal(final, created["goal_id"]) if created else None
    if found is None:
        return [_result("USG-16", Verdict.UNKNOWN, "the Goal was not observed")]
    ok = found["state"] == "paused" and found["reason_code"] == "budget_unknown_cost"
    if not ok and not final_quiet and found["state"] == "active":  # slow, not wrong
        from recoverykit.conformance.scenarios import unsettled
        return [_result("USG-16", Verdict.UNKNOWN, unsettled(f"the Goal is {found['state']}", GOAL_SETTLE_S,
                                                                GOAL_SETTLE.name))]
    return [_result("USG-16", Verdict.VALID if ok else Verdict.INVALID,
                    f"the Goal is {found['state']} ({found['reason_code']}) after an unknown-cost response")]


def drive_budget_raised(run: Run) -> list[ClauseResult]:
    run.start()
    created = create(run, "ge", EXHAUST_LIMIT)
    if created is None:
        return [_result("USG-16", Verdict.UNKNOWN, "goal_create was refused")]
    exhausted_quiet, exhausted = run.settle(GOAL_SETTLE_S)
    out = [expect_state(exhausted, created, {"budget_exhausted"}, "USG-16", "once the spent tokens reach the limit",
                        exhausted_quiet)]
    resumed = run.op("resume", work_id=created["work_id"])
    _, still = run.settle(GOAL_SETTLE_S)
    left = goal(still, created["goal_id"])
    if resumed.ok and left is not None and left["state"] != "budget_exhausted":
        out.append(_result("USG-16", Verdict.INVALID, f"a Resume without a budget change made it {left['state']}"))
    run.op("budget_set", work_id=created["work_id"], limit={"max_tokens": 100000, "max_cost_usd": None})
    final_quiet, final = run.settle(GOAL_SETTLE_S)
    out.append(expect_state(final, created, {"achieved"}, "USG-15", "after the budget was raised", final_quiet))
    return out


GOAL_BUDGETS: dict[str, dict] = {"gc": UNKNOWN_COST_LIMIT, "ge": EXHAUST_LIMIT}


def needs_live_wait(run: Run) -> str | None:
    """A live wait is the kit's scripted external operation: protocol 1.3 and the waits profile."""
    from recoverykit.conformance.drives_waits import needs_external
    why = needs_external(run)
    if why is None and "waits" not in run.profiles:
        why = "the adapter does not declare the waits profile: the kit has no live handle a Goal can wait on"
    return why


def drive_live_wait(run: Run) -> list[ClauseResult]:
    """The Goal's worker starts the kit's external operation and must wait on it (phase waiting, no model turn)
    until the kit completes and notifies it; then it goes on to acceptance."""
    from recoverykit.conformance.drives_waits import notify
    from recoverykit.conformance.witness import read_witness
    run.start()
    created = create(run, "gl")
    if created is None:
        return [_result("GOAL-08", Verdict.UNKNOWN, "goal_create was refused")]
    if not run.wait_witness(lambda e: e.tool == EXTERNAL and e.done and e.emitted, timeout_s=GOAL_SETTLE_S):
        return [_result("GOAL-08", Verdict.UNKNOWN, f"the external operation never started within "
                        f"{run.window(GOAL_SETTLE_S):g} s ({run.pacing.says(GOAL_SETTLE)})")]
    token = next(e.probe_token for e in read_witness(run.witness_path).executions if e.tool == EXTERNAL)
    deadline = time.monotonic() + run.window(WAIT_SEEN_S)
    while time.monotonic() < deadline:
        found = goal(run.observe(), created["goal_id"]) or {}
        if found.get("phase") == "waiting" or found.get("state") != "active":
            break
        time.sleep(0.1)
    time.sleep(IDLE_WINDOW_S)
    run.observe()
    run.external(f"op-{token}", "completed")
    notify(run, f"op-{token}")
    final_quiet, final = run.settle(GOAL_SETTLE_S)
    return [expect_state(final, created, {"achieved"}, "GOAL-08", "after its live wait was notified", final_quiet)]


# --- budget reservations (protocol 1.4: the snapshot section ``reservations``; judged by checks_reservations) ------

RESERVE_POINT = "provider.request.before"  # the first worker request is reserved, not yet sent, when held here
PERSIST_POINT = "usage.persist.before"  # the second one's usage is in hand, its receipt not yet durable, held here
RESERVATION_JUMP_S = 3600.0  # downtime longer than any reservation's expiry (the reference's is 300 s)
RESERVATION_LIMIT = {"max_tokens": 100000, "max_cost_usd": None}
RESERVED = goal_script("gv", [work("[[goal:todo t1]] one"), work("[[goal:done t1]] two")], {2: verdict("met", 1)})


def needs_reservations(run: Run) -> str | None:
    """The scenario reads the section ``reservations`` and kills the runtime at ``provider.request.before`` and at
    ``usage.persist.before``."""
    declared = {str(s) for s in run.init_ok.observes} if run.init_ok else set()
    if "reservations" not in declared:
        return "init_ok.observes lacks `reservations` (protocol 1.4): the runtime shows no budget reservations"
    lacking = [p for p in (RESERVE_POINT, PERSIST_POINT) if p not in {str(x) for x in run.init_ok.failpoints}]
    if lacking:
        return f"init_ok.failpoints lacks {', '.join(lacking)}: the kit cannot stop the runtime where it needs"
    return None


def drive_reservation_expiry(run: Run) -> list[ClauseResult]:
    """A Goal under a hard budget is stopped at its first request, reserved but not sent, and killed; the runtime
    starts again after a downtime longer than the reservation's expiry: that attempt never dispatches (a new one
    may, under a reservation of its own). Its second request's response is read but the runtime is killed before its
    receipt is durable (``usage.persist.before``) and restarted: the started reservation stays held and the Goal's
    spent tokens show nothing of that response, its usage unknown (USG-19, USG-06); a budget change lets the Goal
    finish."""
    run.start(failpoints=f"{RESERVE_POINT}=1*pause")
    created = create(run, "gv", RESERVATION_LIMIT)
    if created is None:
        return [_result("USG-19", Verdict.UNKNOWN, "goal_create was refused")]
    run.wait_hit(RESERVE_POINT, GOAL_SETTLE_S, held=True)
    run.observe()  # reserved, not sent
    run.kill("tree_kill")
    run.start(failpoints=f"{PERSIST_POINT}=1*off->1*pause", clock_offset_s=run.clock_offset_s + RESERVATION_JUMP_S)
    run.wait_hit(PERSIST_POINT, GOAL_SETTLE_S, held=True)
    run.observe()  # the second request started and answered, its receipt not yet written
    run.kill("tree_kill")
    run.start(failpoints="")
    run.settle(GOAL_SETTLE_S)  # its usage unknown: paid admission pauses (USG-16), the reservation stays
    run.op("budget_set", work_id=created["work_id"], limit=RESERVATION_LIMIT)
    run.settle(GOAL_SETTLE_S)
    return []
