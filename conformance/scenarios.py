"""The scenario catalogue, the only one: certify and chaos both run these scenarios.

A scenario is data (its id, the profile it needs, its provider scripts, one per session, the probe
tools it uses, the clause ids it exercises) plus a short ``drive`` function that performs the
operations through a ``Run``, and its chaos spec (``Chaos``): which restart kinds and which of the
points the scenario reaches chaos interrupts it at, and the user's action during recovery.

- ``recoverykit certify`` runs each applicable scenario once, without a fault of the kit's choosing
  (``drive``), then judges the evidence with the history checker; a drive function may add results
  of its own for clauses the checker cannot see (e.g. CTL-02: what stop all stopped is still stopped
  after the restart).
- ``recoverykit chaos`` runs each applicable scenario once per (interruption point, hit, restart kind)
  it really reaches: a dry run against the adapter (``recoverykit.chaos.dry_run``) counts the points,
  so adding a scenario here gives it certify cases and chaos cells at once. ``Chaos.none`` says why a
  scenario has no chaos cells.

A scenario whose profile the adapter did not declare is reported not applicable, never passed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from recoverykit.conformance import storage_fault, workdirs
from recoverykit.conformance.checker import ClauseResult, _result
from recoverykit.conformance.environment import Run
from recoverykit.conformance.pacing import DWELL, FAIR, LIVE_CHILD, REPORT, SETTLE, current
from recoverykit.conformance.provider_script import script_tag
from recoverykit.model.catalogue import (
    OLD_HIDDEN_EXPIRY_S,
    OPT_IN_POINTS,
    RECOVERY_POINTS,
    Profile,
    RestartKind,
    StorageFault,
    Verdict,
)
from recoverykit.model.errors import InvalidArgument

Drive = Callable[[Run], list[ClauseResult]]
SETTLE_S = SETTLE.seconds  # the settle and request windows (``pacing``): scaled by the run's pacing
HOLD_FIRST = [{"kind": "hold", "at_chunk": 0, "attempts": [1]}]


def text_step(text: str = "done", faults: list | None = None, tokens: tuple[int, int] = (30, 12)) -> dict:
    return {"text": text, "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]},
            "faults": faults or []}


def tool_step(tool: str, arguments: dict | None = None, faults: list | None = None) -> dict:
    return {"tool_calls": [{"name": tool, "arguments": arguments or {}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 8}, "faults": faults or []}


def script(script_id: str, *steps: dict, usage: str = "cumulative") -> dict:
    """One session's provider script. ``usage`` is its usage style (``provider_script.USAGE_STYLES``):
    scenarios that exercise USG-05 keep ``cumulative`` (summing must be visible), others use OpenAI's
    ``final``, and one ``none`` (usage must end unknown, never invented), so no single style hides a bug."""
    return {"id": script_id, "usage_style": usage, "steps": list(steps)}


TOOL_SLEEP_S = 1.0  # tool.running: long enough to be caught alive, short enough to wait for after a kill
HOLD_POINTS = {"provider.request.inflight": 0, "provider.response.midstream": 1}  # point -> chunk held at


@dataclass(frozen=True)
class Chaos:
    """How chaos interrupts a scenario: every (point, hit) the dry run finds, times these kinds."""

    kinds: tuple[RestartKind, ...] | None = None  # None: every restart kind
    points: tuple[str, ...] | None = None  # None: every point the dry run finds the scenario reaching
    during: str | None = None  # a user action taken while held: pause, end, input
    double_start: bool = False  # after a kill, two starts race: a repeated notification must admit once
    clauses: tuple[str, ...] = ()  # what its chaos cases aim at (the failure-acceptance report's cells)
    none: str = ""  # why the scenario has no chaos cells at all (then nothing else is read)
    # how a chaos case starts the scenario's work instead of one submit per session: called with the case's
    # environment (chaos.case_env.CaseEnv) in a thread of its own; it must tolerate the kill (scenarios_paperclip)
    kick: Callable[[Any], None] | None = field(default=None, repr=False, compare=False)
    # points reached only after a restart the kit makes in the middle of the scenario's work (#19759: a restart
    # during bootstrap, then a failed re-preparation settles the claimed coordinator). A case at one of them starts
    # the runtime with ``restart_first`` armed and runs ``restart_kick(env, spec)`` instead of ``kick``: it brings
    # the work to that restart and starts the runtime again with ``spec`` (the case's pause) armed
    # count a point's hits per work item across processes, not per process: the runtime may run one item's
    # successive attempts in different processes (a task's runs, each claimed anew by whichever worker is free), so
    # a per-process hit number would depend on the scheduler. A case then holds the item's k-th pass in any process
    # (the broker's ``hold_nth``)
    item_hits: bool = False
    restart_points: tuple[str, ...] = ()
    restart_first: str = ""
    restart_kick: Callable[[Any, str], None] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    profile: Profile
    scripts: tuple[dict, ...]
    tools: tuple[str, ...]
    clauses: tuple[str, ...]
    drive: Drive = field(repr=False, compare=False)
    chaos: Chaos = field(default_factory=Chaos)
    # why the adapter cannot run it though it declared the profile (a capability it did not declare), else None;
    # such a scenario is not applicable, and its clauses are not required of that adapter
    unsupported: Callable[[Run], str | None] | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.id

    @property
    def sessions(self) -> tuple[str, ...]:
        """One submit per session under chaos: each session is one provider script."""
        return tuple(sc["id"] for sc in self.scripts)

    @staticmethod
    def script_id(session: str) -> str:
        return session

    @property
    def kinds(self) -> tuple[RestartKind, ...] | None:
        return self.chaos.kinds

    @property
    def during(self) -> str | None:
        return self.chaos.during

    @property
    def double_start(self) -> bool:
        return self.chaos.double_start

    @property
    def has_chaos(self) -> bool:
        return not self.chaos.none

    def chaos_points(self, reached: dict[str, int]) -> dict[str, int]:
        """The points (with their hit counts) chaos interrupts this scenario at, of those reached. Opt-in points
        (durable writes) are reached only when the run asked for them, and then every one counts: the case list
        covers every commit boundary the scenario passes, whatever points its own cells aim at."""
        if not self.has_chaos:
            return {}
        wanted = self.chaos.points
        return {p: n for p, n in reached.items() if n > 0 and (wanted is None or p in wanted or p in OPT_IN_POINTS)}

    def provider_script(self, point: str | None = None, hit: int = 1, *, chaos: bool = False) -> dict:
        """The scripted provider's script. For certify as written; for chaos (``chaos=True`` or a
        ``point``) without the drive's own holds, with the environment's hold at ``point`` instead."""
        if point is None and not chaos:
            return {"scripts": list(self.scripts), "hold_timeout_s": 120.0}
        return {"scripts": [_chaos_script(sc, point, hit) for sc in self.scripts], "hold_timeout_s": 120.0}

    def applies(self, profiles: set[str]) -> bool:
        return self.profile.value in profiles

    def missing_capability(self, run: Run) -> str | None:
        return self.unsupported(run) if self.unsupported is not None else None

    @property
    def opens_goal(self) -> bool:
        """A Goal scenario's work is opened with ``goal_create``, every other's with ``submit``."""
        return self.profile is Profile.GOALS

    def open_request(self, session: str, session_id: str, client_msg_id: str, text: str) -> tuple[str, dict[str, Any]]:
        """The request that opens one session's work under chaos: (type, fields); ``text`` carries the script tag."""
        if self.opens_goal:
            from recoverykit.conformance.scenarios_goals import GOAL_BUDGETS
            return "goal_create", {"session_id": session_id, "objective": text,
                                   "budget": GOAL_BUDGETS.get(self.script_id(session))}
        return "submit", {"session_id": session_id, "client_msg_id": client_msg_id, "text": text}


def _chaos_script(original: dict, point: str | None, hit: int) -> dict:
    """One session's script for a chaos case: the drive's holds removed, the case's hold added."""
    steps = []
    for step in original["steps"]:
        step = {k: v for k, v in step.items() if k != "faults"}
        if "tool_calls" in step:
            calls = []
            for call in step["tool_calls"]:
                args = {k: v for k, v in (call.get("arguments") or {}).items() if k not in ("hold", "sleep_s")}
                if point == "tool.running":
                    args["sleep_s"] = TOOL_SLEEP_S
                if point == "tool.finished.uncommitted":
                    args["hold"] = True
                calls.append({**call, "arguments": args})
            step["tool_calls"] = calls
        steps.append(step)
    if point in HOLD_POINTS and hit <= len(steps):
        steps[hit - 1]["faults"] = [{"kind": "hold", "at_chunk": HOLD_POINTS[point], "attempts": [1]}]
    if point in RECOVERY_POINTS or point == FIRST_HOLD:  # a first crash needs something in flight to recover
        steps[0]["faults"] = [{"kind": "hold", "at_chunk": 0, "attempts": [1]}]
    return {**original, "steps": steps}


FIRST_HOLD = "first_request_held"  # the dry run's recovery pass: hold the first request, as recovery cases do


# --- helpers the drive functions share -------------------------------------------------------------


def submit(run: Run, script_id: str, session: str | None = None, n: int = 1) -> str | None:
    """Submit one tagged input; the work_id if acknowledged."""
    out = run.op("submit", session_id=session or f"s-{script_id}", text=f"{script_tag(script_id)} request {n}",
                 client_msg_id=f"c-{script_id}-{n}")
    return out.reply.work_id if out.ok else None


def item(snapshot: dict[str, Any], work_id: str | None) -> dict[str, Any] | None:
    return next((w for w in snapshot.get("work_items") or [] if w["work_id"] == work_id), None)


def expect_desired(snapshot: dict[str, Any], work_ids: list[str | None], allowed: set[str], clause_id: str,
                   when: str, quiescent: bool = True, window_s: float = SETTLE_S) -> ClauseResult:
    """``clause_id`` holds if every item's desired_state is in ``allowed`` at this observation.

    ``quiescent`` is what the settle before it answered: an item still meant to run when the runtime had not
    settled is slow, not wrong (unknown, with the window it was given), when ``allowed`` asks it to be finished."""
    bad, slow = [], []
    for work_id in work_ids:
        found = item(snapshot, work_id)
        if found is None:
            bad.append(f"{work_id} is missing {when}")
        elif found["desired_state"] not in allowed:
            text = f"{work_id} desired_state is {found['desired_state']} {when} (expected {sorted(allowed)})"
            (slow if not quiescent and found["desired_state"] == "run" else bad).append(text)
    if None in work_ids:
        return _result(clause_id, Verdict.UNKNOWN, "a submit was not acknowledged")
    if slow and not bad:
        return _result(clause_id, Verdict.UNKNOWN, unsettled(slow[0], window_s))
    return _result(clause_id, Verdict.INVALID if bad else Verdict.VALID, bad[0] if bad else when, bad)


def unsettled(what: str, window_s: float, window: str = "settle") -> str:
    """Why a goal state a slow runtime had not reached yet is not judged: the window (base ``window_s``, scaled by
    the current pacing) and the time it was given."""
    pacing = current()
    given = pacing(window_s)
    return (f"not judged: {what}, but the runtime had not settled: quiesce({given:g}) answered quiescent: false "
            f"(the kit gave it {given:g} s: {pacing.says(window, given)})")


def final_answer_times(ledger: list[dict[str, Any]]) -> dict[str, float]:
    """script id -> when the provider finished delivering that script's final answer (its last step)."""
    from recoverykit.conformance.provider_ledger import calls
    out: dict[str, float] = {}
    for c in calls(ledger):
        steps = c.request.get("script_steps")
        if c.delivered and steps is not None and c.request.get("step") == steps - 1:
            out.setdefault(c.request["script_id"], c.response["time"])
    return out


def restart_kit_side(run: Run, kind: str = "tree_kill", **env: Any) -> None:
    """A kill the kit does itself (psutil), then start: the runtime recovers from committed records."""
    run.kill(kind)
    run.start(**env)


def graceful_or_kill(run: Run, kind: str = "normal_exit") -> None:
    if kind in {str(k) for k in run.init_ok.restart_kinds}:
        run.restart(kind)
    else:
        restart_kit_side(run)


# --- chat core -------------------------------------------------------------------------------------


def drive_read_tool(run: Run) -> list[ClauseResult]:
    run.start()
    submit(run, "read")
    run.settle(SETTLE_S)
    return []


def drive_unknown_write(run: Run) -> list[ClauseResult]:
    run.start()
    work_id = submit(run, "write")
    # The probe has done its write and holds before exiting: "tool done, result not committed".
    run.wait_witness(lambda e: e.tool == "probe_unknown" and e.done, timeout_s=SETTLE_S)
    run.observe()
    restart_kit_side(run, "tree_kill")
    run.release_probes()
    after = run.observe()
    run.settle(SETTLE_S)
    return [expect_desired(after, [work_id], {"run", "done"}, "CTL-03", "after a worker crash")]


LIVE_CHILD_WAIT_S = LIVE_CHILD.seconds  # chat_long_tool's child sleeps 1.5 s: a live one finishes within this


def drive_long_tool(run: Run) -> list[ClauseResult]:
    run.start()
    work_id = submit(run, "long")
    run.wait_witness(lambda e: e.tool == "probe_unknown", timeout_s=SETTLE_S)
    run.observe()  # mid-flight: the owner and its generation before the kill
    restart_kit_side(run, "worker_kill")  # the tool child lives on: reconnect, never re-run
    after = run.observe()
    run.settle(SETTLE_S)
    # a child the runtime neither waited for nor cancelled is still running: let it finish, so the witness
    # log shows it lived through the kill (OWN-01: was its result used?)
    run.wait_witness(lambda e: e.tool == "probe_unknown" and e.done, timeout_s=LIVE_CHILD_WAIT_S)
    return [expect_desired(after, [work_id], {"run", "done"}, "CTL-03", "after a worker-only kill")]


def drive_multi_session(run: Run) -> list[ClauseResult]:
    run.start()
    ids = [submit(run, f"ms{i}", session=f"session-{i}") for i in (1, 2, 3)]
    run.wait_held(SETTLE_S, script_id="ms1")  # a provider request in flight; the others queued or running
    run.observe()  # mid-flight: every item has exactly one owner
    restart_kit_side(run, "tree_kill")
    after = run.observe()
    quiescent, final = run.settle(SETTLE_S)
    results = [expect_desired(after, ids, {"run", "done"}, "CTL-03", "after a tree kill")]
    if quiescent:
        results.append(expect_desired(final, ids, {"done"}, "RI-02", "after recovering three sessions together"))
    return results


def drive_pause_restart(run: Run) -> list[ClauseResult]:
    run.start()
    work_id = submit(run, "pz")
    held = run.wait_held(SETTLE_S, script_id="pz")
    run.op("pause", work_id=work_id)
    run.provider.release(held)  # the in-flight answer arrives after the pause: it must not continue the work
    run.settle(SETTLE_S)
    graceful_or_kill(run, "normal_exit")
    after = run.observe()
    _, settled = run.settle(SETTLE_S)
    results = [expect_desired(after, [work_id], {"paused"}, "RI-03", "right after the restart"),
               expect_desired(settled, [work_id], {"paused"}, "RI-03", "after the restart settled")]
    run.op("resume", work_id=work_id)
    run.settle(SETTLE_S)
    return results


def drive_stop_all_restart(run: Run) -> list[ClauseResult]:
    run.start()
    ids = [submit(run, f"sa{i}", session=f"session-{i}") for i in (1, 2)]
    run.wait_held(SETTLE_S, script_id="sa1")
    before = run.observe()
    out = run.op("stop_all")
    acked = time.time()
    stopped = list(out.reply.stopped) if out.ok else [None]
    # What stop all must stop is what the kit submitted and saw unfinished, not what the reply lists: a
    # runtime that stops nothing and says so would otherwise hold CTL-02 vacuously.
    meant = [w for w in ids if w is not None and (item(before, w) or {}).get("status") != "finished"]
    restart_kit_side(run, "tree_kill")
    _, settled = run.settle(SETTLE_S)
    if not out.ok or None in ids:
        results = [_result("CTL-02", Verdict.UNKNOWN, "stop all or a submit was not acknowledged")]
    elif not meant:
        results = [_result("CTL-02", Verdict.UNKNOWN, "every item had finished before stop all")]
    else:
        listed = [w for w in meant if w in stopped]
        results = [expect_desired(settled, listed, {"paused"}, "CTL-02",
                                  f"after stop all and a restart ({len(listed)} item(s) it stopped)")]
        # An item stop all did not list may only have finished before stop all was acknowledged: the
        # provider's ledger says when its final answer went out (kit evidence, not the runtime's word).
        answered = final_answer_times(run.evidence().ledger)
        script_of = {w: f"sa{i}" for i, w in zip((1, 2), ids, strict=True)}
        late = [w for w in meant if w not in stopped and not answered.get(script_of[w], float("inf")) <= acked]
        if late and results[0].verdict is not Verdict.INVALID:
            results = [_result("CTL-02", Verdict.INVALID, f"stop all neither stopped {late} nor had they finished "
                                                          "before it was acknowledged", late)]
    for work_id in ids:
        if work_id in stopped:
            run.op("resume", work_id=work_id)
    run.settle(SETTLE_S)
    return results


def drive_long_downtime(run: Run) -> list[ClauseResult]:
    run.start()
    work_id = submit(run, "ld")
    run.wait_held(SETTLE_S, script_id="ld")
    run.kill("long_downtime")
    run.clock_jump(OLD_HIDDEN_EXPIRY_S + 600)
    run.start(clock_offset_s=run.clock_offset_s)
    quiescent, final = run.settle(SETTLE_S)
    if not quiescent:
        return [_result("RI-05", Verdict.UNKNOWN, unsettled("the work after the downtime", SETTLE_S))]
    return [expect_desired(final, [work_id], {"done"}, "RI-05", "after downtime past two hours")]


def drive_together(run: Run) -> list[ClauseResult]:
    """Three sessions, a tree kill while the first request is in flight, then a start and, while the recovered
    first request is held again, a second start (a repeated notification): nothing may be admitted twice. The
    held request is let go only once the other two sessions have finished, so a runtime that the repeated start
    led to take it over has had every chance to ask for it a second time (FA-13)."""
    run.start()
    ids = [submit(run, sid, session=f"together-{sid}") for sid in ("ta", "tb", "tc")]
    run.wait_held(SETTLE_S, script_id="ta")
    run.observe()  # mid-flight: every item has exactly one owner
    run.kill("tree_kill")
    run.provider.release(cut=True)
    run.start()
    again = run.wait_held(SETTLE_S, script_id="ta")  # the recovered request, held too (HOLD_TWICE)
    run.start()  # a second start, as a repeated notification would send: nothing may be admitted twice
    deadline = time.monotonic() + run.window(SETTLE_S)
    while time.monotonic() < deadline and not {"tb", "tc"} <= set(final_answer_times(run.provider.records())):
        time.sleep(0.02)
    run.provider.release(again)
    _, final = run.settle(SETTLE_S)
    return [expect_desired(final, ids, {"run", "done"}, "CTL-03", "after a kill and a doubled start")]


def drive_pause_then_restart(run: Run) -> list[ClauseResult]:
    """Pause while the first request is in flight (its answer calls a tool), then a restart."""
    run.start()
    work_id = submit(run, "ptr")
    held = run.wait_held(SETTLE_S, script_id="ptr")
    run.op("pause", work_id=work_id)
    run.provider.release(held)  # the tool call arrives after the pause: it must not run
    run.settle(SETTLE_S)
    graceful_or_kill(run, "normal_exit")
    _, settled = run.settle(SETTLE_S)
    return [expect_desired(settled, [work_id], {"paused"}, "RI-03", "after a pause and a restart")]


def _during_recovery(action: str) -> Drive:
    """A tree kill while the request is in flight; the user acts while recovery's own request is held."""
    expected = {"pause": {"paused"}, "end": {"cancelled"}, "input": {"run", "done"}}[action]
    clause_id = "INP-01" if action == "input" else "RI-03"

    def drive(run: Run) -> list[ClauseResult]:
        run.start()
        script_id = f"dr{action[0]}"
        work_id = submit(run, script_id)
        run.wait_held(SETTLE_S, script_id=script_id)
        run.kill("tree_kill")
        run.provider.release(cut=True)
        run.start()
        # the recovered turn's request is held too (its script holds attempts 1 and 2): the user's action
        # lands while recovery is under way, never after the work already finished
        held = run.wait_held(SETTLE_S, script_id=script_id)
        if action == "input":
            submit(run, script_id, n=2)
        else:
            run.op(action, work_id=work_id)
        run.provider.release(held)
        _, settled = run.settle(SETTLE_S)
        return [expect_desired(settled, [work_id], expected, clause_id, f"after {action} during recovery")]

    drive.__name__ = f"drive_{action}_during_recovery"
    return drive


BUSY_HOLD_S = 1.0  # how long the owner stays busy on one model call while other sessions keep workers awake


def drive_busy_owner(run: Run) -> list[ClauseResult]:
    """One owner busy on a slow model call while two other sessions keep the other workers busy and awake:
    a runtime that takes over a live owner (a lease TTL, a liveness check by age) does it in this window,
    and the provider sees two processes asking for the same work item at once (OWN-02)."""
    run.start()
    submit(run, "bo", session="busy-owner")
    held = run.wait_held(SETTLE_S, script_id="bo")
    for i in (1, 2):
        submit(run, f"bw{i}", session=f"busy-other-{i}")
    time.sleep(BUSY_HOLD_S)
    run.provider.release(held)
    run.settle(SETTLE_S)
    return []


STALE_WINDOW_S = 1.0  # how long a paused-then-superseded owner has to show a stale write, at most


def _sender_of(run: Run, seq: int) -> int | None:
    return next((r.get("sender_pid") for r in run.provider.records()
                 if r.get("event") == "request" and r.get("seq") == seq), None)


def _wait_for_request(run: Run, pid: int | None, script_id: str, timeout_s: float, *, other: bool = False) -> bool:
    """Until process ``pid`` (``other``: any process but it) sends a new request of ``script_id`` (True), or
    ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    before = {r.get("seq") for r in run.provider.records() if r.get("event") == "request"}
    while time.monotonic() < deadline:
        if any(r.get("event") == "request" and r.get("seq") not in before and (r.get("sender_pid") == pid) != other
               and r.get("script_id") == script_id for r in run.provider.records()):
            return True
        time.sleep(0.02)
    return False


def drive_paused_owner(run: Run) -> list[ClauseResult]:
    """Jepsen's pause nemesis: the process owning a request in flight is stopped (SIGSTOP) while two other
    sessions keep the other workers awake, then let go on (SIGCONT). A stopped process is alive: it keeps its
    work (REC-12), and nobody else acts for it meanwhile (OWN-02); a runtime that does take it over must
    refuse the old owner's writes once it goes on (OWN-06, ``check_superseded_owner_silent``)."""
    run.start()
    submit(run, "po", session="paused-owner")
    held = run.wait_held(SETTLE_S, script_id="po")
    sender = _sender_of(run, held.seq)
    paused = sender is not None and run.pause_process(sender)
    for i in (1, 2):
        submit(run, f"pw{i}", session=f"paused-other-{i}")
    time.sleep(BUSY_HOLD_S)
    run.continue_paused()
    run.provider.release(held)
    # The next step's first request is held, whoever sent it. Sent by a newer owner that took the work during
    # the pause, it stays held a while: the old owner, let go on, meets the work still in progress, and a
    # stale write of its own (its answer committed, the tool run, the next step asked) has time to show.
    nxt = run.wait_held(SETTLE_S, script_id="po", step=1)
    if _sender_of(run, nxt.seq) != sender:
        _wait_for_request(run, sender, "po", STALE_WINDOW_S)
    run.provider.release(nxt)
    run.settle(SETTLE_S)
    if not paused:
        return [_result("REC-12", Verdict.UNKNOWN, "the owner of the request in flight could not be paused "
                                                   "(the runtime does not list it)")]
    return []


def drive_host_change(run: Run) -> list[ClauseResult]:
    """Host-restart semantics through process-identity changes (seed 000's failure acceptance): a request in
    flight, every process killed, the runtime started under another host identity (the work's owner was on the
    first host: it must not be taken over silently, nor read as a Pause), then killed again and started under
    the first host's identity with new processes, as after a reboot: the work meant to run is recovered. Judged
    by ``checks_owners.check_host_change`` from the provider's ledger and the start operations' host ids."""
    run.start()
    home = run.host_id
    work_id = submit(run, "hc")
    run.wait_held(SETTLE_S, script_id="hc")
    run.observe()
    run.kill("host_identity_change")
    run.provider.release(cut=True)
    run.start(host_id=f"{home}-other")
    run.settle(SETTLE_S)
    run.kill("tree_kill")
    run.start(host_id=home)
    _, final = run.settle(SETTLE_S)
    return [expect_desired(final, [work_id], {"run", "done"}, "CTL-03", "after a host identity change and back")]


SECOND_CRASH_POINT = "recovery.repair.after"


def drive_second_crash(run: Run) -> list[ClauseResult]:
    """Another crash during recovery (seed 000's failure acceptance): every process is killed after an
    unknown-effect write ran but before its result was committed; the runtime starts armed to hold at
    ``recovery.repair.after`` (its recovery has repaired the turn and chosen its mode), is killed there again,
    and starts once more. The second recovery must find the first one's work done and keep its mode: one owner,
    nothing answered or admitted twice, the unknown write's restriction kept (``check_second_crash``, FA-11)."""
    run.start()
    work_id = submit(run, "sc")
    run.wait_witness(lambda e: e.tool == "probe_unknown" and e.done, timeout_s=SETTLE_S)
    run.kill("tree_kill")
    run.release_probes()
    run.start(failpoints=f"{SECOND_CRASH_POINT}=1*pause")
    run.wait_hit(SECOND_CRASH_POINT, SETTLE_S, held=True)
    run.kill("crash_during_recovery")
    run.start(failpoints="")
    quiet, final = run.settle(SETTLE_S)
    return [expect_desired(final, [work_id], {"done"}, "RI-02", "after a crash during recovery", quiet)]


def _needs_second_crash_point(run: Run) -> str | None:
    declared = {str(p) for p in (run.init_ok.failpoints if run.init_ok else [])}
    return None if SECOND_CRASH_POINT in declared else f"init_ok.failpoints lacks {SECOND_CRASH_POINT}"


RELOAD_WATCH_S = 0.5  # how long the owner's request stays open after a reload (a takeover shows within it);
# more than checks_owners.TOLERANCE_S, so a takeover's overlap is never mistaken for a dead client's


def drive_frontend_reload(run: Run) -> list[ClauseResult]:
    """The frontend reloads (its client disconnects and reconnects) while a request is in flight: the work
    goes on, its intent unchanged (CTL-01), and its owner is not taken for dead (OWN-05). Observations on both
    sides of the reload; the check compares every one after it (``check_not_a_pause``)."""
    run.start()
    work_id = submit(run, "fr")
    held = run.wait_held(SETTLE_S, script_id="fr")
    run.observe()
    out = run.op("reload")
    run.observe()
    # the owner lives on, its request open: a runtime that took the disconnect for its death would have another
    # process ask for the same work now (OWN-05, ``check_disconnect_not_death``); give it the chance to show
    if _wait_for_request(run, _sender_of(run, held.seq), "fr", RELOAD_WATCH_S, other=True):
        time.sleep(RELOAD_WATCH_S)  # both open at once for longer than a dead client could go unnoticed
    run.provider.release(held)
    _, final = run.settle(SETTLE_S)
    if not out.ok:
        return [_result("CTL-01", Verdict.UNKNOWN, "the reload was not acknowledged")]
    return [expect_desired(final, [work_id], {"run", "done"}, "CTL-01", "after a frontend reload")]


def drive_duplicate_call_ids(run: Run) -> list[ClauseResult]:
    """A response whose two tool calls share one id: which result belongs to which call would be a guess."""
    run.start()
    submit(run, "dup")
    run.settle(SETTLE_S)
    return []


def drive_graceful_midwork(run: Run) -> list[ClauseResult]:
    """A graceful restart while a tool runs: the answered step is a saved checkpoint, never asked again."""
    run.start()
    work_id = submit(run, "gm")
    run.wait_witness(lambda e: e.tool == "probe_read", timeout_s=SETTLE_S)
    run.observe()
    graceful_or_kill(run, "normal_exit")
    after = run.observe()
    run.settle(SETTLE_S)
    return [expect_desired(after, [work_id], {"run", "done"}, "CTL-03", "after a graceful restart")]


INPUT_POINTS = ("input.accept.before", "input.accept.after")


def _interrupted_submit(run: Run, point: str, text: str, client_msg_id: str) -> None:
    """A submit the runtime crashes on at ``point`` (armed ``crash``); the crash the kit's broker saw is recorded
    with the submit it interrupted (fault ``input_crash``: ``checks_intent`` judges what it left)."""
    from recoverykit.conformance.checks_inputs import INPUT_CRASH
    seen = max((h.seq for h in run.broker.hits()), default=0) if run.broker else 0
    out = run.op("submit", session_id="s-ia", text=text, client_msg_id=client_msg_id)
    try:
        hit = run.wait_hit(point, REPORT.seconds, after=seen) if run.broker else None
    except Exception:  # FailpointNotHit: the runtime did not crash there, so the kit claims nothing about it
        hit = None
    if hit is not None and hit.action == "crash" and not out.ok:
        run.recorder.fault(INPUT_CRASH, point=point, client_msg_id=client_msg_id, text=text, pid=hit.pid)


def drive_input_acceptance(run: Run) -> list[ClauseResult]:
    """The runtime crashes before accepting one submit (a draft only the client has) and after accepting
    another; the client sends the second again after the restart, as a client does with a submit it never saw
    acknowledged. The draft must never appear; the accepted input is saved once and sent once per request."""
    tag = script_tag("ia")
    run.start(failpoints="input.accept.before=1*crash")
    _interrupted_submit(run, "input.accept.before", f"{tag} a draft the runtime never accepted", "c-ia-draft")
    restart_kit_side(run, "tree_kill", failpoints="input.accept.after=1*crash")
    run.observe()
    _interrupted_submit(run, "input.accept.after", f"{tag} request 1", "c-ia-1")
    run.observe()  # the run intent as saved before the restart (read from the store while the runtime is down)
    restart_kit_side(run, "tree_kill", failpoints="")
    run.provider.release(cut=True)  # a request the work sent before the kill was held: it never finished then
    run.provider.auto_release()
    run.observe()
    run.op("submit", session_id="s-ia", text=f"{tag} request 1", client_msg_id="c-ia-1")
    run.settle(SETTLE_S)
    return []


def drive_recovery_disabled(run: Run) -> list[ClauseResult]:
    """Work in flight, a kill, then a start with automatic recovery explicitly disabled (protocol 1.2): the
    interrupted work must not go on by itself (RI-06, judged from the ledger by ``checks_intent``); the user's
    Resume then lets it finish."""
    run.start()
    work_id = submit(run, "ard")
    run.wait_held(SETTLE_S, script_id="ard")
    run.observe()
    run.kill("tree_kill")
    run.provider.release(cut=True)
    run.start(automatic_recovery=False)
    run.settle(SETTLE_S)
    run.op("resume", work_id=work_id)
    run.settle(SETTLE_S)
    return []


LEGACY_REASON = "paused_recoverable_v0"  # a pause reason an older version stored, in no vocabulary of today


def drive_legacy_paused_record(run: Run) -> list[ClauseResult]:
    """During downtime the adapter writes a paused record as an older version left it, for a reason this version
    does not know (protocol 1.2, ``plant_paused_record``); the runtime starts, and restarts once more: the record
    must stay paused with an explanation, and its input must never reach the model (RI-07, ``checks_intent``)."""
    run.start()
    run.kill("tree_kill")
    out = run.op("plant_paused_record", session_id="s-lgp", text=f"{script_tag('lgp')} request 1",
                 client_msg_id="c-lgp-1", reason=LEGACY_REASON)
    run.start()
    run.settle(SETTLE_S)
    graceful_or_kill(run, "normal_exit")
    run.settle(SETTLE_S)
    if not out.ok:
        return [_result("RI-07", Verdict.UNKNOWN, f"the adapter did not plant the record ({out.error})")]
    return []


def _needs_legacy_record(run: Run) -> str | None:
    if run.init_ok.legacy_paused_record:
        return None
    return ("init_ok.legacy_paused_record is not declared (protocol 1.2): the kit cannot have an old paused record "
            "written")


PRICE_TABLES = ({"input_usd_per_mtok": 3.0, "output_usd_per_mtok": 15.0},
                {"input_usd_per_mtok": 5.0, "output_usd_per_mtok": 25.0})


def drive_pricing_history(run: Run) -> list[ClauseResult]:
    """Prices set, a turn, its receipt observed; the prices changed, a tree kill, a second turn: the first
    receipt keeps the quote it was given and the second is quoted at the new table (USG-09, ``checks_pricing``)."""
    run.start()
    run.op("pricing_set", **PRICE_TABLES[0])
    submit(run, "pra")
    run.settle(SETTLE_S)
    run.op("pricing_set", **PRICE_TABLES[1])
    run.observe()
    restart_kit_side(run, "tree_kill")
    submit(run, "prb")
    run.settle(SETTLE_S)
    return []


def _needs_pricing(run: Run) -> str | None:
    if run.init_ok.pricing:
        return None
    return "init_ok.pricing is not declared (protocol 1.4): the runtime keeps no pricing table the kit can change"


def _needs_recovery_setting(run: Run) -> str | None:
    if run.init_ok.automatic_recovery_setting:
        return None
    return ("init_ok.automatic_recovery_setting is not declared (protocol 1.2): the kit cannot disable automatic "
            "recovery")


def _needs_input_points(run: Run) -> str | None:
    declared = {str(p) for p in run.init_ok.failpoints}
    missing = [p for p in INPUT_POINTS if p not in declared]
    if not missing:
        return None
    return f"init_ok.failpoints lacks {', '.join(missing)}, where the kit crashes the runtime during a submit"


# The tools of effect_boundary besides the standard probes: a custom write (registered without a class where the
# adapter speaks protocol 1.2, else unknown), and two tools registered unknown whose names suggest reading (one
# named like a built-in); the write's tool is re-registered read_only during downtime.
BOUNDARY_WRITE = "sync_notes"
BOUNDARY_TOOLS = ((BOUNDARY_WRITE, None), ("read_notes", "unknown"), ("grep", None))
BOUNDARY_HINTS = {"grep": {"readOnlyHint": True}}  # grep's plugin declares it read-only, as MCP annotations do


def _speaks(run: Run, version: tuple[int, int]) -> bool:
    """Does the adapter speak at least protocol ``version`` (MAJOR, MINOR)?"""
    try:
        major, minor = (int(x) for x in run.init_ok.protocol_version.split(".")[:2])
    except (AttributeError, ValueError):
        return False
    return (major, minor) >= version


def _needs_start_tools(run: Run) -> str | None:
    """effect_boundary registers its tools with ``start.probe_tools`` (protocol 1.1): None if the adapter takes it."""
    if _speaks(run, (1, 1)):
        return None
    return (f"the adapter speaks protocol {run.init_ok.protocol_version}; the tools of effect_boundary are registered "
            "with start.probe_tools (protocol 1.1)")


def drive_effect_boundary(run: Run) -> list[ClauseResult]:
    """A custom write registered without a class (so unknown by default; an adapter older than protocol 1.2 gets
    it as unknown), a tree kill while it holds its result, and during the downtime its tool is re-registered
    read_only (version 2). The recovery turn's answer asks for ``read_notes`` (registered unknown) and ``grep``
    (registered without a class, its plugin declaring it read-only), the model claiming both read-only, and for
    ``probe_read``; another session, submitted once the restarted runtime
    settled (the write's recovery done), asks for ``probe_idempotent``. A changed tool may make the work wait: the
    user accepts it (Resume). The checks (``checks_effects``) read it all from the ledger, the witness and the
    history."""
    from recoverykit.conformance.probe_tools import probe_tool

    bare = _speaks(run, (1, 2))  # a tool without a class (ProbeTool.effect_class null) is protocol 1.2
    tools = [*run.probe_tools, *(probe_tool(name, cls if cls or bare else "unknown", run.witness_path,
                                            plugin_hints=BOUNDARY_HINTS.get(name) if bare else None)
                                 for name, cls in BOUNDARY_TOOLS)]
    run.start(probe_tools=tools)
    work_id = submit(run, "eb")
    run.wait_witness(lambda e: e.tool == BOUNDARY_WRITE and e.done, timeout_s=SETTLE_S)
    run.observe()
    run.kill("tree_kill")
    run.release_probes()
    upgraded = [probe_tool(t.name, "read_only", run.witness_path, version="2") if t.name == BOUNDARY_WRITE else t
                for t in tools]
    run.start(probe_tools=upgraded)
    run.settle(SETTLE_S)  # the write's recovery is done (its outcome recorded unknown) before the other session
    submit(run, "ebi", session="s-ebi")
    _, settled = run.settle(SETTLE_S)
    if _apr.deny_pending(run, settled):  # a runtime that asks to approve the writes: the user denies them
        _, settled = run.settle(SETTLE_S)
    if (item(settled, work_id) or {}).get("status") == "waiting":
        run.op("resume", work_id=work_id)
        _, settled = run.settle(SETTLE_S)
        if _apr.deny_pending(run, settled):
            run.settle(SETTLE_S)
    return []


def drive_repair_twice(run: Run) -> list[ClauseResult]:
    """An unknown write (a read asked for with it never starts) and a crash; the recovery turn runs a read; a
    second crash while its next request is in flight; then the end.

    Recovery repairs the history (a placeholder for the write's missing result, another telling the read never
    started) and its turn commits a real read
    result; the second recovery resumes from that checkpoint. Every request after the first crash shows the kit the
    repaired history: the same placeholder each time, the real result kept once sent, the input once, nothing
    re-run. The provider reuses call ids from one response to the next (``reuse_call_ids``), so each result must go
    to its nearest call; the recovery turn's model asks for the write again besides the read."""
    run.start()
    submit(run, "rp")
    run.wait_witness(lambda e: e.tool == "probe_unknown" and e.done, timeout_s=SETTLE_S)
    run.observe()
    restart_kit_side(run, "tree_kill")
    run.release_probes()
    # the recovery turn's second request: the second crash comes now (a runtime that asks to approve the write
    # again is denied, as the user of a chat-core runtime that refuses it would have it)
    _apr.wait_held_denying(run, "rp")
    run.observe()
    run.kill("tree_kill")
    run.provider.release(cut=True)
    run.start()
    run.settle(SETTLE_S)
    return []


def drive_interrupted_stream(run: Run) -> list[ClauseResult]:
    """The provider cuts a streamed answer off after part of its text; the runtime, alive, asks again."""
    run.start()
    submit(run, "cut")
    run.settle(SETTLE_S)
    return []


# --- profiles beyond chat core (run only when declared) --------------------------------------------




_CHAT = Profile.CHAT_CORE
_K = RestartKind


HOLD_TWICE = [{"kind": "hold", "at_chunk": 0, "attempts": [1, 2]}]  # the first request and its re-send


def chaos_only_script(script_id: str, tool: str = "probe_unknown", usage: str = "cumulative",
                      hold: list | None = None) -> dict:
    """Tool, then answer, the first request held (certify's drives fault there; chaos drops the hold and
    puts the case's own where the case says)."""
    return script(script_id, tool_step(tool, faults=HOLD_FIRST if hold is None else hold),
                  {"text": f"done {script_id}", "usage": {"prompt_tokens": 40, "completion_tokens": 3}}, usage=usage)


def _with_step(body: dict, step: dict) -> dict:
    """``body`` (a script) with one more step at its end."""
    return {**body, "steps": [*body["steps"], step]}


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("chat_unknown_write", "chat with an unknown-effect write, crash before its result is committed", _CHAT,
             (script("write", tool_step("probe_unknown", {"hold": True}), text_step()),), ("probe_unknown",),
             ("FA-15", "CTL-03", "INP-01", "RI-02", "USG-03", "USG-05", "USG-10"), drive_unknown_write,
             Chaos(clauses=("FA-01", "FA-03", "FA-04", "FA-05", "FA-06", "FA-09", "FA-10", "FA-11", "FA-15"))),
    Scenario("chat_read_tool", "ordinary chat with a read-only tool", _CHAT,
             (script("read", tool_step("probe_read", {"output": "readme"}), text_step()),), ("probe_read",),
             ("INP-01", "USG-03", "USG-05", "USG-10", "RI-02", "UI-05"),
             drive_read_tool, Chaos(kinds=(_K.TREE_KILL,), points=("input.accept.after", "tool.dispatch.after",
                                                                  "tool.result.commit.after", "usage.persist.after"))),
    Scenario("chat_long_tool", "chat with a long-running tool child, worker killed while it runs", _CHAT,
             (script("long", tool_step("probe_unknown", {"sleep_s": 1.5}), text_step()),), ("probe_unknown",),
             ("FA-15", "CTL-03", "RI-02", "OWN-06", "OWN-01", "OWN-07"), drive_long_tool,
             Chaos(kinds=(_K.WORKER_KILL,), points=("tool.running", "tool.dispatch.after"), clauses=("FA-15",))),
    Scenario("multi_session", "three sessions recovered together (one owner each, nothing twice)", _CHAT,
             tuple(script(f"ms{i}", text_step(faults=HOLD_FIRST if i == 1 else None), usage="none")
                   for i in (1, 2, 3)), (),
             ("OWN-02", "REC-06", "RI-02", "CTL-03", "INP-01", "USG-10"), drive_multi_session,
             Chaos(kinds=(_K.TREE_KILL,), points=("provider.request.inflight", "usage.persist.before",
                                                 "completion.commit.before_projection"), clauses=("FA-13",))),
    Scenario("pause_restart", "pause while a provider request is in flight, then restart", _CHAT,
             (script("pz", text_step(faults=HOLD_FIRST), usage="final"),), (), ("RI-03", "RI-02", "INP-01"),
             drive_pause_restart,
             Chaos(kinds=(_K.NORMAL_EXIT, _K.TREE_KILL), points=("provider.response.midstream",
                                                                "usage.persist.before"),
                   during="pause", clauses=("RI-03", "FA-01"))),
    Scenario("stop_all_restart", "stop all, then restart", _CHAT,
             tuple(script(f"sa{i}", text_step(faults=HOLD_FIRST if i == 1 else None), usage="final")
                   for i in (1, 2)), (),
             ("CTL-02", "RI-03", "RI-02"), drive_stop_all_restart,
             Chaos(none="stop all is itself a restart kind (stop_all_exit), which chaos applies at every point of "
                        "chat_unknown_write")),
    Scenario("long_downtime", "downtime past the old two-hour window", _CHAT,
             (script("ld", text_step(faults=HOLD_FIRST), usage="final"),), (), ("RI-05", "RI-02"), drive_long_downtime,
             Chaos(kinds=(_K.LONG_DOWNTIME,), points=("provider.request.inflight", "usage.persist.after"))),
    Scenario("sessions_together", "three sessions recover together: fair queueing, shared quota, one owner each",
             # only the first session's request is held: a held session the restarted runtime serves first
             # would keep a worker from the others for the hold's whole timeout
             _CHAT, tuple(chaos_only_script(sid, "probe_read", hold=HOLD_TWICE if sid == "ta" else [])
                          for sid in ("ta", "tb", "tc")), ("probe_read",),
             ("INP-01", "OWN-02", "CTL-03", "FA-13"), drive_together,
             Chaos(kinds=(_K.WORKER_KILL, _K.TREE_KILL, _K.NORMAL_EXIT), double_start=True,
                   points=("provider.request.inflight", "tool.result.commit.before", "recovery.claim.after"),
                   clauses=("FA-12", "FA-13", "REC-06"))),
    Scenario("pause_then_restart", "the user pauses while a request is in flight or a result uncommitted, then "
             "the runtime restarts: paused work must stay paused", _CHAT, (chaos_only_script("ptr", usage="final"),),
             ("probe_unknown",), ("RI-03", "INP-01"), drive_pause_then_restart,
             Chaos(kinds=(_K.WORKER_KILL, _K.TREE_KILL, _K.NORMAL_EXIT, _K.GRACEFUL_WORKER_RESTART),
                   points=("provider.request.inflight", "tool.result.commit.before"), during="pause",
                   clauses=("RI-03", "FA-01"))),
    Scenario("pause_during_recovery", "the user pauses while recovery is held at a recovery phase", _CHAT,
             (chaos_only_script("drp", usage="final", hold=HOLD_TWICE),), ("probe_unknown",),
             ("RI-03", "INP-01", "FA-14"),
             _during_recovery("pause"),
             Chaos(kinds=(_K.FRONTEND_RELOAD, _K.TREE_KILL), points=RECOVERY_POINTS, during="pause",
                   clauses=("FA-14", "RI-03"))),
    Scenario("end_during_recovery", "the user ends the work while recovery is held at a recovery phase", _CHAT,
             (chaos_only_script("dre", usage="final", hold=HOLD_TWICE),), ("probe_unknown",), ("RI-03", "INP-01"),
             _during_recovery("end"),
             Chaos(kinds=(_K.FRONTEND_RELOAD, _K.TREE_KILL), points=("recovery.claim.after",), during="end",
                   clauses=("FA-14", "RI-03"))),
    Scenario("input_during_recovery", "the user sends new input while recovery is held at a recovery phase", _CHAT,
             # a read-only tool: the new input's own turn may ask for it again, which is no re-run; a runtime that
             # answers the new input in its own turn, after the recovered one, asks for a third step
             (_with_step(chaos_only_script("dri", "probe_read", usage="final", hold=HOLD_TWICE),
                         text_step("done dri, second input")),), ("probe_read",),
             ("INP-01", "RI-02", "CTL-05", "FA-14"), _during_recovery("input"),
             Chaos(kinds=(_K.FRONTEND_RELOAD, _K.TREE_KILL), points=("recovery.claim.after",), during="input",
                   clauses=("FA-14", "INP-01"))),
    Scenario("graceful_midwork", "a graceful restart while a tool runs: checkpoints saved, nothing asked twice",
             _CHAT, (script("gm", tool_step("probe_read", {"sleep_s": 1.0}), text_step(), usage="final"),),
             ("probe_read",), ("CTL-04", "CTL-03", "RI-02", "INP-01"), drive_graceful_midwork,
             Chaos(none="a graceful restart is itself a restart kind (normal_exit, graceful_worker_restart), which "
                        "chaos applies at every point of the chat scenarios")),
    Scenario("input_acceptance", "crashes before and after input acceptance: a draft never appears, an accepted "
             "input is saved and sent once", _CHAT, (script("ia", text_step(faults=HOLD_FIRST), usage="final"),), (),
             ("INP-02", "FA-03", "INP-01", "RI-01", "RI-02"), drive_input_acceptance,
             Chaos(none="the scenario is the kit's own crashes at both input-acceptance points; chaos applies those "
                        "points to every chat scenario"), _needs_input_points),
    Scenario("recovery_disabled", "automatic recovery explicitly disabled at a restart: the interrupted work waits "
             "for the user's Resume", _CHAT, (script("ard", text_step(faults=HOLD_FIRST), usage="final"),), (),
             ("RI-06", "RI-01", "RI-02"), drive_recovery_disabled,
             Chaos(none="the operator's setting across one kill is the scenario; chaos's points would only move the "
                        "kill"), _needs_recovery_setting),
    Scenario("legacy_paused_record", "an old paused record with a reason this version does not know stays paused "
             "with an explanation", _CHAT, (script("lgp", text_step(), usage="final"),), (),
             ("RI-07",), drive_legacy_paused_record,
             Chaos(none="the record is written during downtime by the adapter; chaos's points would only move the "
                        "kill before it"), _needs_legacy_record),
    Scenario("pricing_history", "prices set, a turn; the prices changed and a tree kill, a second turn: each receipt "
             "keeps its tokens and the prices it was quoted at, never rewritten", _CHAT,
             (script("pra", text_step(), usage="final"), script("prb", text_step(), usage="final")), (),
             ("USG-09", "INP-01"), drive_pricing_history,
             Chaos(none="a price change is an operator's act, not an interruption point; the drive's own kill "
                        "checks that quotes survive a restart"), _needs_pricing),
    Scenario("busy_owner", "one owner busy on a slow model call while other sessions keep every worker awake",
             _CHAT, (script("bo", text_step(faults=HOLD_FIRST), usage="final"),
                     script("bw1", text_step(), usage="final"), script("bw2", text_step(), usage="none")), (),
             ("OWN-02", "INP-01", "RI-04", "USG-10"), drive_busy_owner,
             Chaos(none="ownership without a fault: chaos's kills of sessions_together judge ownership across "
                        "restarts")),
    Scenario("paused_owner", "the owner of a request in flight is paused (SIGSTOP) and let go on (SIGCONT)",
             # the paused owner's answer calls a tool and the next step is held too: a newer owner is still at work
             # when the old one goes on, and an old generation that is not fenced goes on visibly (the tool, then
             # the next step's request), where a final answer would only be committed (OWN-06)
             _CHAT, (script("po", tool_step("probe_read", faults=HOLD_FIRST), text_step(faults=HOLD_FIRST),
                            usage="final"),
                     script("pw1", text_step(), usage="final"), script("pw2", text_step(), usage="final")),
             ("probe_read",), ("REC-12", "OWN-02", "INP-01", "RI-04"), drive_paused_owner,
             Chaos(none="a pause is a nemesis of its own, not a restart kind")),
    Scenario("host_change", "every process killed with a request in flight, started under another host identity, "
             "then back under the first with new processes", _CHAT,
             (script("hc", text_step(faults=HOLD_FIRST), usage="final"),), (),
             ("OWN-03", "FA-02", "CTL-03", "RI-02"), drive_host_change,
             Chaos(none="a host identity change is itself a restart kind (host_identity_change), which chaos applies "
                        "at every point of chat_unknown_write")),
    Scenario("second_crash", "killed after an unknown write ran, its result uncommitted, then killed again while "
             "recovery holds after its repair phase, then started", _CHAT,
             (script("sc", tool_step("probe_unknown", {"hold": True}), text_step(), usage="final"),),
             ("probe_unknown",),
             ("FA-11", "RI-02"), drive_second_crash,
             Chaos(none="another crash during recovery is itself a restart kind (crash_during_recovery), which chaos "
                        "applies at every recovery point of the chat scenarios"),
             unsupported=_needs_second_crash_point),
    Scenario("frontend_reload", "the frontend reloads while a request is in flight: the work goes on", _CHAT,
             (script("fr", text_step(faults=HOLD_FIRST), usage="final"),), (),
             ("CTL-01", "RI-04", "INP-01"), drive_frontend_reload,
             Chaos(none="a frontend reload is itself a restart kind (frontend_reload), which chaos applies at every "
                        "point of the chat scenarios")),
    Scenario("duplicate_call_ids", "a response's tool calls share one id: an explicit error, nothing guessed",
             _CHAT, (script("dup", {**tool_step("probe_unknown"), "tool_calls": [
                 {"name": "probe_unknown", "arguments": {}}, {"name": "probe_unknown", "arguments": {}}],
                 "duplicate_call_ids": True}, text_step(), usage="final"),), ("probe_unknown",),
             ("CTX-11", "INP-01", "UI-05"), drive_duplicate_call_ids,
             Chaos(none="the fault is the provider's response itself; no restart is involved")),
    Scenario("effect_boundary", "an unknown custom write is cut off by a kill and its tool re-registered read_only; "
             "the recovery turn offers and runs only tools registered safe, whatever their names or the model's "
             "claims, while investigation and another session's work go on", _CHAT,
             (script("eb", tool_step(BOUNDARY_WRITE, {"hold": True}),
                     {"text": "read_notes and grep only read: they are read-only.", "tool_calls": [
                         {"name": "read_notes", "arguments": {"read_only": True}},
                         {"name": "grep", "arguments": {"read_only": True}},
                         {"name": "probe_read", "arguments": {}}],
                      "usage": {"prompt_tokens": 30, "completion_tokens": 9}},
                     text_step("done eb"), usage="final"),
              script("ebi", tool_step("probe_idempotent"), text_step("done ebi"), usage="final")),
             (BOUNDARY_WRITE, "read_notes", "grep", "probe_read", "probe_idempotent"),
             # EFF-07 is judged too, but only of adapters speaking protocol 1.2 (a tool without a class): not required
             ("EFF-03", "EFF-05", "EFF-06", "EFF-08", "EFF-10", "EFF-11", "INP-01"), drive_effect_boundary,
             Chaos(none="the tools are registered by the drive's own starts (start.probe_tools), which chaos's cases "
                        "do not make; chat_unknown_write's chaos cells interrupt the same unknown write"),
             _needs_start_tools),
    Scenario("repair_twice", "an unknown write, a crash, and a second crash while the recovery turn's next request "
             "is in flight: the repaired history the provider sees", _CHAT,
             # the first answer asks for a write and a read: the write holds after its effect, so the read (dispatched
             # after it) never starts before the kill: the recovery turn must tell the two apart (EFF-02)
             ({**script("rp", {**tool_step("probe_unknown"), "tool_calls": [
                            {"name": "probe_unknown", "arguments": {"hold": True}},
                            {"name": "probe_read", "arguments": {"output": "before"}}]},
                        {"tool_calls": [{"name": "probe_unknown", "arguments": {}},
                                        {"name": "probe_read", "arguments": {"output": "after"}}]},
                        text_step(faults=HOLD_FIRST), usage="final"), "reuse_call_ids": True},),
             ("probe_unknown", "probe_read"),
             ("CTX-01", "CTX-02", "CTX-04", "CTX-06", "CTX-07", "CTX-12", "EFF-02", "FA-15", "INP-01"),
             drive_repair_twice,
             Chaos(kinds=(_K.TREE_KILL, _K.CRASH_DURING_RECOVERY),
                   points=("tool.finished.uncommitted", "provider.request.inflight", "recovery.repair.after"),
                   clauses=("FA-15", "CTX-02", "CTX-07", "CTX-12", "EFF-02"))),
    Scenario("interrupted_stream", "a streamed answer is cut off after part of its text: the next request keeps "
             "the partial text with an interruption marker", _CHAT,
             (script("cut", text_step("The answer comes in three parts, of which two arrive.",
                                      faults=[{"kind": "cut", "at_chunk": 2, "attempts": [1]}]), usage="final"),),
             (), ("CTX-10", "INP-01"), drive_interrupted_stream,
             Chaos(kinds=(_K.TREE_KILL,), points=("provider.response.midstream",), clauses=("CTX-10",))),
)


# --- storage faults (kit-owned: conformance.storage_fault; judged by conformance.checks_storage) ------------

STORAGE_DWELL_S = DWELL.seconds  # how long the runtime runs on a faulted store at most (ends early on a model request)


def _storage_fault(fault: StorageFault) -> Drive:
    """Work in flight, a kill, then the kit faults the store during the downtime; the runtime starts on it and
    is observed; the kit restores the store, takes `retry` (a second start), and the held work must go on."""
    script_id = {StorageFault.UNREADABLE: "su", StorageFault.NEWER_SCHEMA: "sn"}[fault]

    def drive(run: Run) -> list[ClauseResult]:
        run.start()
        work_id = submit(run, script_id)
        run.wait_held(SETTLE_S, script_id=script_id)
        run.observe()  # before the fault: its lease and generation
        run.kill("tree_kill")
        run.provider.release(cut=True)
        applied = storage_fault.apply(run, fault, script=script_id, work_id=work_id)
        run.start()  # on the faulted store: it must come up, say so and write nothing
        run.settle(SETTLE_S)
        seen = len(run.provider.records())
        deadline = time.monotonic() + run.window(STORAGE_DWELL_S)
        while time.monotonic() < deadline and not any(
                r.get("event") == "request" for r in run.provider.records()[seen:]):
            time.sleep(0.05)  # a runtime acting on facts it cannot read shows itself in the ledger
        run.observe()
        storage_fault.restore(run, applied)
        run.start()  # the `retry` action
        run.settle(SETTLE_S)
        return []

    drive.__name__ = f"drive_storage_{fault.value}"
    return drive


def _needs_storage(fault: StorageFault) -> Callable[[Run], str | None]:
    return lambda run: storage_fault.supports(run, fault)


_STORAGE_CLAUSES = ("REC-01", "RES-05", "OWN-04", "INP-01")
_NO_STORAGE_CHAOS = Chaos(none="the kit faults the store itself during downtime, after a kill; chaos's points and "
                               "kinds add nothing a storage fault needs")
SCENARIOS += (
    Scenario("storage_unreadable", "the store is unreadable after a kill: the runtime starts, says so, writes "
             "nothing, clears nothing, and goes on once it is restored and retried", _CHAT,
             (script("su", text_step(faults=HOLD_FIRST), usage="final"),), (), _STORAGE_CLAUSES,
             _storage_fault(StorageFault.UNREADABLE), _NO_STORAGE_CHAOS, _needs_storage(StorageFault.UNREADABLE)),
    Scenario("migration_newer_schema", "the store is at a newer schema after a kill (a newer runtime migrated "
             "it): the runtime refuses to migrate or write, says so, and goes on once it is back and retried", _CHAT,
             (script("sn", text_step(faults=HOLD_FIRST), usage="final"),), (), _STORAGE_CLAUSES,
             _storage_fault(StorageFault.NEWER_SCHEMA), _NO_STORAGE_CHAOS, _needs_storage(StorageFault.NEWER_SCHEMA)),
)
SCENARIOS_BY_ID: dict[str, Scenario] = {s.id: s for s in SCENARIOS}


def all_scenarios() -> tuple[Scenario, ...]:
    """The catalogue, read when called: certify, chaos and the pytest plugin all ask here, so a scenario
    added to ``SCENARIOS`` (a test's fixture scenario too) reaches every one of them."""
    return SCENARIOS


def scenario_named(name: str) -> Scenario:
    found = next((s for s in SCENARIOS if s.id == name), None)
    if found is None:
        raise InvalidArgument(f"unknown scenario {name!r}; known: {', '.join(s.id for s in SCENARIOS)}")
    return found


# Profiles the catalogue has no scenario for yet, and why. A runtime may declare one; its clauses are then all
# required and none can be judged, so certify says unknown for it, never valid.
NO_SCENARIO_YET: dict[Profile, str] = {}  # every profile has scenarios now (waits since issue 14)


def required_clauses(profile: Profile | str = Profile.CHAT_CORE) -> frozenset[str]:
    """Clauses that must end valid for a valid verdict of ``profile``: those its scenarios exercise, or, for a
    profile the catalogue has no scenario for (``NO_SCENARIO_YET``), every clause of it."""
    mine = frozenset(c for s in all_scenarios() if s.profile.value == str(profile) for c in s.clauses)
    if mine or Profile(str(profile)) not in NO_SCENARIO_YET:
        return mine
    from recoverykit.model.contract import CLAUSES
    return frozenset(c.id for c in CLAUSES if c.profile.value == str(profile))


# --- resources changed during downtime (protocol 1.1: init_ok.resources) ----------------------------

RESOURCE_SCRIPTS = {"model": "rm", "credentials": "rc", "working_dir": "rd", "tool_version": "rt"}
CHANGED_TOOL = "probe_idempotent"  # the probe whose declared version the kit changes (only "rt" calls it)


def drive_resources(run: Run) -> list[ClauseResult]:
    """Each declared resource is taken from one session during downtime, side by side in one run.

    The kit kills the runtime while the first requests are in flight, then takes the resources away (the
    provider answers that session's model 404 and its key 401, the session's working directory is removed,
    the probe tool it calls gets a new version) and starts it again. While they are missing: one Retry and
    one more restart. Then each comes back (a changed tool by the user accepting it) and the user resumes.
    The checks (``checks_resources``) read all of it from the history, the ledger and the witness log.
    """
    from recoverykit.conformance.probe_tools import probe_tool
    from recoverykit.model.catalogue import EffectClass

    declared = [kind for kind in RESOURCE_SCRIPTS if kind in run.resources]
    workdir = run.run_dir / "workdir-rd"  # created by the kit, given as the session's working directory
    run.start()
    work: dict[str, str | None] = {}
    for kind in declared:
        sid = RESOURCE_SCRIPTS[kind]
        extra = {}
        if kind == "working_dir":
            workdir.mkdir(mode=0o700)
            extra["working_dir"] = str(workdir)
        out = run.op("submit", session_id=f"s-{sid}", text=f"{script_tag(sid)} request 1", client_msg_id=f"c-{sid}-1",
                     **extra)
        work[kind] = out.reply.work_id if out.ok else None
    declared = [kind for kind in declared if work[kind]]  # a resource is taken only from acknowledged work
    if not declared:
        return []
    run.wait_held(SETTLE_S)  # work in flight; the rest accepted and queued (or held too)
    run.observe()
    run.kill("long_downtime")
    run.provider.release(cut=True)
    run.provider.auto_release()  # the holds were for the kill; from here on requests go through
    tools = run.probe_tools
    for kind in declared:
        sid, detail = RESOURCE_SCRIPTS[kind], {}
        if kind == "model":
            run.provider.refuse(sid, model=run.model)
            detail = {"model": run.model}
        elif kind == "credentials":
            run.provider.refuse(sid, api_key=run.api_key)
        elif kind == "working_dir":
            detail = {"path": str(workdir), **workdirs.take_away(workdir)}
        else:
            tools = [probe_tool(CHANGED_TOOL, EffectClass.IDEMPOTENT, run.witness_path, version="2")
                     if t.name == CHANGED_TOOL else t for t in tools]
            detail = {"tool": CHANGED_TOOL, "version": "2"}
        run.recorder.fault("resource_missing", resource=kind, script_id=sid, work_id=work[kind], **detail)
    run.clock_jump(OLD_HIDDEN_EXPIRY_S + 600)
    run.start(clock_offset_s=run.clock_offset_s, probe_tools=tools if "tool_version" in declared else None)
    run.settle(SETTLE_S)
    for kind in declared:  # Retry while still missing (a changed tool's Retry would accept it: not yet)
        if kind != "tool_version":
            run.op("resume", work_id=work[kind])
    run.settle(SETTLE_S)
    restart_kit_side(run, "tree_kill")  # and a restart while still missing: the records are kept
    run.settle(SETTLE_S)
    for kind in declared:
        sid, back = RESOURCE_SCRIPTS[kind], {}
        if kind in ("model", "credentials"):
            run.provider.restore(sid)
        elif kind == "working_dir":
            back = workdirs.give_back(workdir)  # the runtime may have made it again, or left a link: never followed
        run.recorder.fault("resource_restored", resource=kind, script_id=sid, work_id=work[kind],
                           by="resume" if kind == "tool_version" else "kit", **back)
    for kind in declared:
        run.op("resume", work_id=work[kind])
    run.settle(SETTLE_S)
    return []


def drive_stop_before_resource(run: Run) -> list[ClauseResult]:
    """The user pauses work in flight; during the downtime that follows the kit removes its working directory;
    two starts while it is missing: the user's stop must show, not the resource's reason (REC-02). Then the
    directory comes back and the user resumes: the work goes on."""
    workdir = run.run_dir / "workdir-sbr"
    workdir.mkdir(mode=0o700)
    run.start()
    out = run.op("submit", session_id="s-sbr", text=f"{script_tag('sbr')} request 1", client_msg_id="c-sbr-1",
                 working_dir=str(workdir))
    if not out.ok:
        return [_result("REC-02", Verdict.UNKNOWN, "the submit was not acknowledged")]
    work_id = out.reply.work_id
    run.wait_held(SETTLE_S, script_id="sbr")
    run.op("pause", work_id=work_id)
    run.observe()
    run.kill("tree_kill")
    run.provider.release(cut=True)
    gone = workdirs.take_away(workdir)
    run.recorder.fault("resource_missing", resource="working_dir", script_id="sbr", work_id=work_id,
                       path=str(workdir), **gone)
    run.start()
    run.settle(SETTLE_S)
    restart_kit_side(run, "tree_kill")
    run.settle(SETTLE_S)
    back = workdirs.give_back(workdir)
    run.recorder.fault("resource_restored", resource="working_dir", script_id="sbr", work_id=work_id, by="kit",
                       **back)
    run.op("resume", work_id=work_id)
    run.settle(SETTLE_S)
    return []


def _needs_working_dir(run: Run) -> str | None:
    if "working_dir" in run.resources:
        return None
    return "init_ok.resources does not declare working_dir (protocol 1.1), so no directory is removed"


def _needs_resources(run: Run) -> str | None:
    """None when the adapter declares at least one resource (``init_ok.resources``), else why not applicable."""
    if run.resources & set(RESOURCE_SCRIPTS):
        return None
    return (f"init_ok.resources declares none of {', '.join(RESOURCE_SCRIPTS)} (protocol 1.1), so no resource is "
            "changed during downtime")


def resource_script(script_id: str, tool: str) -> dict:
    return script(script_id, tool_step(tool, faults=HOLD_FIRST), text_step(f"done {script_id}"), usage="final")


SCENARIOS += (
    Scenario("resources_after_downtime", "a missing model, revoked credentials, a removed working directory and a "
             "changed tool version during downtime: each waits with its precise reason, nothing is switched, the "
             "work continues once restored", _CHAT,
             tuple(resource_script(sid, CHANGED_TOOL if kind == "tool_version" else "probe_read")
                   for kind, sid in RESOURCE_SCRIPTS.items()), ("probe_read", CHANGED_TOOL),
             ("RES-01", "RES-02", "RES-04", "RES-06", "RI-02", "INP-01"), drive_resources,
             Chaos(none="the resource changes are this scenario's own faults, made between a kill and the next "
                        "start; chaos's interruption points would only move the kill"),
             _needs_resources),
    Scenario("stop_before_resource", "the user pauses work, then its working directory goes missing during "
             "downtime: the user's stop shows first", _CHAT, (resource_script("sbr", "probe_read"),), ("probe_read",),
             ("REC-02", "RI-03", "RI-01"), drive_stop_before_resource,
             Chaos(none="the pause and the removed directory are the scenario's own, around one kill; chaos's points "
                        "would only move the kill"), _needs_working_dir),
)
SCENARIOS_BY_ID = {s.id: s for s in SCENARIOS}


# --- a crash after the completion commit, before its projection (judged by conformance.checks_decisions) -----

PROJECTION_POINT = "completion.commit.before_projection"


def drive_projection_crash(run: Run) -> list[ClauseResult]:
    """FA-09: the runtime is held at the point after its completion commit and before the projection is delivered,
    observed there, then the whole tree is killed and started again: the completion must stand, not run again."""
    from recoverykit.conformance.broker import FailpointNotHit
    run.start(failpoints=f"{PROJECTION_POINT}=1*pause")
    work_id = submit(run, "pj")
    try:
        if run.broker is None:
            raise FailpointNotHit("no failpoint broker")
        run.wait_hit(PROJECTION_POINT, SETTLE_S, held=True)
    except FailpointNotHit:
        return [_result("FA-09", Verdict.UNKNOWN, f"the runtime never reached {PROJECTION_POINT} within "
                        f"{run.window(SETTLE_S):g} s ({run.pacing.says('failpoint', run.window(SETTLE_S))})")]
    held = run.observe()  # the completion is committed; its projection is not delivered
    restart_kit_side(run, "tree_kill", failpoints="")
    run.settle(SETTLE_S)
    if (item(held, work_id) or {}).get("status") != "finished":
        return [_result("FA-09", Verdict.UNKNOWN, f"{work_id} was not shown finished at {PROJECTION_POINT}")]
    return []


def _reaches_projection_point(run: Run) -> str | None:
    points = {str(p) for p in (run.init_ok.failpoints if run.init_ok else ())}
    return None if PROJECTION_POINT in points else f"the adapter does not implement the point {PROJECTION_POINT}"


SCENARIOS += (
    Scenario("projection_crash", "a crash after the completion commit, before its projection is delivered: the "
             "completion stands and nothing runs again", _CHAT,
             (script("pj", tool_step("probe_read", {"output": "notes"}), text_step(), usage="final"),),
             ("probe_read",), ("FA-09", "UI-03", "INP-01", "RI-02"), drive_projection_crash,
             Chaos(none="chaos already interrupts chat_unknown_write and multi_session at "
                        "completion.commit.before_projection under every kill, and judges FA-09 there"),
             _reaches_projection_point),
)
SCENARIOS_BY_ID = {s.id: s for s in SCENARIOS}


# --- temporary provider faults: retries, their receipts, their backoff --------------------------------------

FAULT_WAIT_S = REPORT.seconds  # how long the drive waits for the runtime to say it scheduled the retry


def faulted_step(tokens: tuple[int, int] = (30, 12), errors: tuple[int, ...] = (2,)) -> dict:
    """One answer whose first attempt is cut after two cumulative usage chunks (consumption the client saw part
    of: a lower bound) and whose attempts ``errors`` are each a 503 (nothing billed); the next one goes through."""
    return {"text": "done after retries", "chunks": 4,
            "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]},
            "faults": [{"kind": "cut", "at_chunk": 2, "attempts": [1]},
                       {"kind": "error", "status": 503, "attempts": list(errors),
                        "message": "overloaded, retry later"}]}


def _wait_ledger(run: Run, predicate: Callable[[dict[str, Any]], bool], timeout_s: float) -> dict[str, Any] | None:
    """The first ledger record matching ``predicate`` within the window ``timeout_s`` (scaled); None if none."""
    deadline = time.monotonic() + run.window(timeout_s)
    while time.monotonic() < deadline:
        found = next((r for r in run.provider.records() if predicate(r)), None)
        if found is not None:
            return found
        time.sleep(0.02)
    return None


PF_ERRORS = 2  # provider_faults' 503s: the kill lands in the wait after the second


def drive_provider_faults(run: Run) -> list[ClauseResult]:
    """A temporary fault three times on one request (a stream cut after usage, then two 503s); once the runtime
    says it scheduled the retry after the second 503, a tree kill and an immediate start: the retry time must
    survive (checks_backoff), each attempt keeps its own receipt (checks_attempts).

    The kill waits for the second 503 so that the wait it lands in follows a wait after an HTTP error answer: both
    are the runtime's own, with nothing of its client's latency in them (after the cut stream, how late the client
    noticed the cut is not the runtime's to answer for, and a comparison with that wait proves nothing)."""
    run.start()
    work_id = submit(run, "pf")
    errors = []

    def second_503(r: dict[str, Any]) -> bool:
        if r.get("event") == "response" and r.get("status") == 503 and r.get("seq") not in errors:
            errors.append(r.get("seq"))
        return len(errors) >= PF_ERRORS
    fault = _wait_ledger(run, second_503, SETTLE_S)
    if fault is not None:
        deadline = time.monotonic() + run.window(FAULT_WAIT_S)
        while time.monotonic() < deadline:  # the runtime's own word that the retry time is on record
            if (item(run.observe(), work_id) or {}).get("reason_code") == "retry_scheduled":
                break
            if any(r.get("event") == "request" and r.get("seq", 0) > fault["seq"] for r in run.provider.records()):
                break  # it retried already: there is no backoff left to kill in
            time.sleep(0.02)
        restart_kit_side(run, "tree_kill")
    run.settle(SETTLE_S)
    return []


FAIR_HOLD_S = FAIR.seconds  # how long fair_queueing waits for the second backlog's first request to be in flight
FAIR_BACKLOG = 4  # inputs of each backlog: a FIFO scheduler admits them all (over checks_fairness.FAIR_SLACK)


def drive_fair_queueing(run: Run) -> list[ClauseResult]:
    """Two sessions with a backlog of four inputs each, their first requests in flight, a third session with
    one input queued behind them; a tree kill and a start: the third session must not wait for both backlogs
    (checks_fairness)."""
    run.start()
    for script_id in ("fqa", "fqb"):
        for n in range(1, FAIR_BACKLOG + 1):
            submit(run, script_id, session=f"fair-{script_id}", n=n)
    run.wait_held(SETTLE_S, script_id="fqa")
    deadline = time.monotonic() + run.window(FAIR_HOLD_S)  # a runtime running one item at a time never sends fqb's yet
    while time.monotonic() < deadline and not any(h.script_id == "fqb" for h in run.provider.held()):
        time.sleep(0.02)
    submit(run, "fqc", session="fair-fqc")
    run.observe()
    run.kill("tree_kill")
    run.provider.release(cut=True)
    run.provider.auto_release()  # the holds were for the kill; a request first sent after it goes through
    run.start()
    run.settle(SETTLE_S)
    return []


SCENARIOS += (
    Scenario("fair_queueing", "two sessions with a backlog and a third with one input recover together: fair "
             "queueing, no session starved", _CHAT,
             # one answer per input, whatever step a runtime asks for (with or without the session's earlier turns)
             tuple({**script(sid, text_step(sid, faults=HOLD_FIRST if sid != "fqc" else None), usage="final"),
                    "when_exhausted": "repeat_last"} for sid in ("fqa", "fqb", "fqc")), (),
             ("FA-12", "INP-01", "RI-02", "OWN-02"), drive_fair_queueing,
             Chaos(none="the restart is the drive's, placed while both backlogs wait; chaos's sessions_together "
                        "recovers several sessions at every point already")),
    Scenario("provider_faults", "a request fails three times on temporary faults (a stream cut after usage, two "
             "503s), with "
             "a kill during the backoff: each attempt counted on its own, the cut one as a lower bound, the retry "
             "time durable", _CHAT, (script("pf", faulted_step(errors=(2, 3))),), (),
             ("USG-04", "USG-18", "RES-03", "INP-01", "RI-02", "USG-10"), drive_provider_faults,
             Chaos(none="the faults are the provider's own and the kill is the drive's, placed inside the backoff; "
                        "chaos's points would only move the kill away from it")),
)
SCENARIOS_BY_ID = {s.id: s for s in SCENARIOS}


# --- Goals (profile goals): scripts and drives in conformance/scenarios_goals.py --------------------------------
from recoverykit.conformance.scenarios_goals import (  # noqa: E402
    BLOCKED,
    CHAT_BESIDE,
    EXHAUSTED,
    INDEPENDENT,
    LIVE_WAIT,
    MISSING_EVIDENCE,
    PAUSED,
    RESERVED,
    RESTARTED,
    RESTARTED_NEXT,
    REVISED,
    THREE_TURNS,
    TIMED,
    UNKNOWN_COST,
    UNMET,
    drive_blocker,
    drive_budget_raised,
    drive_live_wait,
    drive_pause_during_verifying,
    drive_reservation_expiry,
    drive_restart,
    drive_revision_during_verifying,
    drive_three_turns,
    drive_unknown_cost,
    drive_until_settled,
    needs_live_wait,
    needs_reservations,
)

_GOALS = Profile.GOALS
_GOAL_EVERY_POINT = Chaos(kinds=(_K.TREE_KILL,), clauses=("FA-08", "GOAL-04", "ACC-04"))
SCENARIOS += (
    Scenario("goal_work_turns", "a Goal that needs three work turns and one acceptance", _GOALS, (THREE_TURNS,), (),
             ("GOAL-01", "GOAL-04", "ACC-01", "ACC-03", "ACC-04", "ACC-05", "ACC-06", "ACC-07", "ACC-08", "UI-04",
              "UI-06", "USG-15"),
             drive_three_turns, _GOAL_EVERY_POINT),
    Scenario("goal_restart", "a Goal killed mid-work continues by itself; achieved stays achieved", _GOALS,
             (RESTARTED, RESTARTED_NEXT), (), ("GOAL-01", "GOAL-06", "GOAL-10", "RI-02", "USG-11", "USG-12"),
             drive_restart,
             Chaos(none="its kill is the scenario; goal_work_turns's chaos cells kill the same Goal at every "
                        "point")),
    Scenario("goal_unmet", "acceptance finds the objective unmet: back to work, then met", _GOALS, (UNMET,), (),
             ("ACC-06", "ACC-10", "GOAL-04"), drive_until_settled("gu"),
             Chaos(kinds=(_K.TREE_KILL,), points=("acceptance.verifier.after", "acceptance.achieve.before"))),
    Scenario("goal_missing_evidence", "the verifier says met without evidence: back to work, never achieved on it",
             _GOALS, (MISSING_EVIDENCE,), (), ("ACC-10", "GOAL-04"), drive_until_settled("gm"),
             Chaos(kinds=(_K.TREE_KILL,), points=("acceptance.verifier.after", "acceptance.achieve.before"))),
    Scenario("goal_revision_verifying", "the objective is revised while the verifier answers: the old acceptance "
             "must not achieve", _GOALS, (REVISED,), (),
             ("GOAL-02", "GOAL-03", "GOAL-04", "USG-08", "ACC-02", "ACC-11"),
             drive_revision_during_verifying,
             Chaos(none="the revision must land while the verifier's request is held; chaos's cases make no "
                        "revision")),
    Scenario("goal_pause_verifying", "the user pauses while the verifier answers: paused stays paused, Resume "
             "verifies again; ordinary chat meanwhile is not the Goal's", _GOALS, (PAUSED, CHAT_BESIDE), (),
             ("GOAL-04", "GOAL-05", "RI-03", "USG-02", "USG-11"),
             drive_pause_during_verifying,
             Chaos(none="the Pause must land while the verifier's request is held; goal_work_turns's chaos cells "
                        "restart at every acceptance point")),
    Scenario("goal_blocker", "the same blocker twice with no other work blocks; with independent work the Goal "
             "goes on", _GOALS, (BLOCKED, INDEPENDENT), (), ("GOAL-07", "GOAL-09", "UI-04"), drive_blocker,
             Chaos(kinds=(_K.TREE_KILL,), points=("completion.commit.before_projection",))),
    Scenario("goal_budget_unknown_cost", "a hard budget, then a response whose usage is unknown: paid admission "
             "pauses with a reason; beside it a time limit stops admission once verified spent", _GOALS,
             (UNKNOWN_COST, TIMED), (), ("USG-16", "USG-14"), drive_unknown_cost,
             Chaos(none="the pause is reached without a fault (the time limit's holds are the drive's); a restart "
                        "after it is goal_budget_raised's")),
    Scenario("goal_budget_raised", "a budget runs out; Resume alone does not leave budget_exhausted, a raised "
             "budget does", _GOALS, (EXHAUSTED,), (), ("USG-15", "USG-16", "USG-17", "ACC-09"), drive_budget_raised,
             Chaos(none="leaving budget_exhausted needs the kit's budget_set, which chaos's cases do not send")),
    Scenario("goal_reservation_expiry", "under a hard budget a request reserved but not sent is killed and the "
             "runtime starts after its reservation expired: it never dispatches; a request killed before its "
             "receipt is durable keeps its reservation, and the Goal's spent tokens never count that receipt",
             _GOALS, (RESERVED,), (), ("USG-19", "USG-06"),
             drive_reservation_expiry,
             Chaos(none="the kit's own stop between reserve and send and its clock jump are the scenario; chaos's "
                        "cases make no clock jump"), needs_reservations),
    Scenario("goal_live_wait", "a Goal waits on a live external operation: phase waiting and no model turn until "
             "its notification, then acceptance", _GOALS, (LIVE_WAIT,), ("probe_external",), ("GOAL-08",),
             drive_live_wait,
             Chaos(none="the external operation is completed and notified by the drive; chaos's cases make neither "
                        "move (the waits scenarios interrupt waits at every point)"), needs_live_wait),
)
SCENARIOS_BY_ID = {s.id: s for s in SCENARIOS}

# --- approvals (drives in conformance.drives_approvals; judged by conformance.checks_approvals) --------------

from recoverykit.conformance import drives_approvals as _apr  # noqa: E402  (its drives use the helpers above)


def approval_script(script_id: str, *later: dict) -> dict:
    """An unknown write that holds after its effect (the drive kills the runtime there), then ``later``."""
    return script(script_id, tool_step("probe_unknown", {"hold": True}), *later, usage="final")


_NO_APPROVAL_CHAOS = Chaos(none="an approval is asked only in the scope of an unknown effect, which needs a kill "
                                "while a write holds its result, and granted only by the user; chaos's cases make "
                                "neither (they drop the scripts' holds), so the drives make both, killing at "
                                "approval.consume.before themselves (approval_consume_crash)")

SCENARIOS += (
    Scenario("approval_pending_restart", "after an unknown write and a crash the next write asks for a one-time "
             "approval; a crash while it is pending: still pending, nothing run; approved, the write runs once",
             Profile.APPROVALS, (approval_script("apa", tool_step("probe_unknown"), text_step()),), ("probe_unknown",),
             ("APR-02", "APR-06", "APR-07", "FA-15", "INP-01"), _apr.drive_pending_restart, _NO_APPROVAL_CHAOS),
    Scenario("approval_consume_crash", "approve, then a crash before the approval is consumed (and, when the store "
             "can be faulted, a start on a store at a newer schema: nothing runs), then a crash while the approved "
             "write holds its result: consumed once, the write run once", Profile.APPROVALS,
             (approval_script("apc", tool_step("probe_unknown", {"hold": True}), text_step()),), ("probe_unknown",),
             ("APR-02", "APR-04", "APR-06", "FA-15"), _apr.drive_consume_crash, _NO_APPROVAL_CHAOS,
             _apr.needs_consume_point),
    Scenario("approval_deny", "the user pauses the work and denies the write its recovery turn asks for: nothing "
             "goes on until the Resume; the write never runs, the work goes on", Profile.APPROVALS,
             (approval_script("apd", tool_step("probe_unknown"), text_step()),), ("probe_unknown",),
             ("APR-05", "APR-06", "RI-02", "INP-01"), _apr.drive_deny, _NO_APPROVAL_CHAOS),
    Scenario("approval_effect_set", "two writes approved together; the first one's tool dies after its effect (the "
             "unknown-effect set changes): the second needs a fresh approval, and a third write its own",
             Profile.APPROVALS,
             (approval_script("aes", {**tool_step("probe_unknown"), "tool_calls": [
                 {"name": "probe_unknown", "arguments": {"hold": True}}, {"name": "probe_unknown", "arguments": {}}]},
                 tool_step("probe_unknown"), text_step()),), ("probe_unknown",),
             ("APR-02", "APR-03", "APR-06", "FA-15"), _apr.drive_effect_set_changed, _NO_APPROVAL_CHAOS),
    Scenario("approval_two_sessions", "two sessions' recovery turns each ask to approve a write; the user approves "
             "one: the other session's write stays unrun until its own decision (a denial)", Profile.APPROVALS,
             (approval_script("ap1", tool_step("probe_unknown"), text_step()),
              approval_script("ap2", tool_step("probe_unknown"), text_step())), ("probe_unknown",),
             ("APR-01", "APR-02", "APR-06", "FA-15"), _apr.drive_two_sessions, _NO_APPROVAL_CHAOS),
)
SCENARIOS_BY_ID = {s.id: s for s in SCENARIOS}


# --- durable waits (drives in conformance.drives_waits; judged by conformance.checks_waits) ------------------

from recoverykit.conformance import drives_waits as _wt  # noqa: E402  (its drives use the helpers above)


def wait_script(script_id: str) -> dict:
    """The model starts the external operation, then, once its continuation is admitted, answers."""
    return script(script_id, tool_step(_wt.EXTERNAL), text_step("the operation is done"), usage="final")


_NO_WAIT_CHAOS = Chaos(none="the external operation is registered by the drives' own starts (start.probe_tools) and "
                            "completed, notified or paused by the drive; chaos's cases make none of these moves")

SCENARIOS += (
    Scenario("wait_notify_during_restart", "waiting on an external operation, a tree kill; it completes and its "
             "notification arrives while the runtime is down: saved, then admitted once", Profile.WAITS,
             (wait_script("wr"),), (_wt.EXTERNAL,), ("WAIT-01", "WAIT-02", "WAIT-04", "INP-01"),
             _wt.drive_notify_during_restart, _NO_WAIT_CHAOS, _wt.needs_external),
    Scenario("wait_duplicate_notification", "a notification for an older version, then the completion notified "
             "three times (one id twice): one continuation, after the completion", Profile.WAITS,
             (wait_script("wd"),), (_wt.EXTERNAL,), ("WAIT-01", "WAIT-02", "INP-01"),
             _wt.drive_duplicate_notification, _NO_WAIT_CHAOS, _wt.needs_external),
    Scenario("wait_pause_then_notify", "the user pauses a waiting item, then its notification arrives: no turn "
             "while paused, the result kept for the Resume", Profile.WAITS,
             (wait_script("wp"),), (_wt.EXTERNAL,), ("WAIT-05", "RI-02", "INP-01"),
             _wt.drive_pause_then_notify, _NO_WAIT_CHAOS, _wt.needs_external),
    Scenario("wait_self_completing", "the external operation completes by itself, unnotified: found by "
             "reconciliation and continued once; chaos interrupts the wait and its admission", Profile.WAITS,
             (script("ws", tool_step(_wt.EXTERNAL, {"complete_after_s": 1.0}), text_step("the operation is done"),
                     usage="final"),), (_wt.EXTERNAL,), ("WAIT-01", "WAIT-02", "INP-01"),
             _wt.drive_self_completing,
             Chaos(kinds=(_K.TREE_KILL, _K.WORKER_KILL, _K.NORMAL_EXIT, _K.GRACEFUL_WORKER_RESTART),
                   points=("tool.result.commit.after", "wait.notify.before_admit", "wait.notify.after",
                           "provider.request.inflight"), clauses=("WAIT-02", "WAIT-04")),
             _wt.needs_external),
    Scenario("wait_lost_notification", "no notification ever comes and the operation's queries hang for a while: "
             "found by polling with backoff, a timed-out query never taken for a stop", Profile.WAITS,
             (wait_script("wl"),), (_wt.EXTERNAL,), ("WAIT-03", "WAIT-06", "INP-01"),
             _wt.drive_lost_notification, _NO_WAIT_CHAOS, _wt.needs_external),
)
SCENARIOS_BY_ID = {s.id: s for s in SCENARIOS}


# --- background Jobs (drive in conformance.drives_jobs; judged by conformance.checks_jobs) ---------------------

from recoverykit.conformance import drives_jobs as _jb  # noqa: E402  (its drive uses the helpers above)

SCENARIOS += (
    Scenario("job_restart", "a request starts a Job from another session: two subtasks under a quota of one, a tree "
             "kill while the first one's answer is in flight: the quota held, no subtask started again, each result "
             "delivered to the Job once, the caller's provenance kept", Profile.JOBS, _jb.scripts(), ("probe_read",),
             ("JOB-01", "JOB-02", "JOB-03", "JOB-04", "FA-07", "RI-02"), _jb.drive_job_restart,
             Chaos(kinds=(_K.TREE_KILL, _K.WORKER_KILL), points=_jb.CHAOS_POINTS, clauses=("FA-07", "JOB-01"),
                   kick=_jb.chaos_kick, item_hits=True)),
)
SCENARIOS_BY_ID = {s.id: s for s in SCENARIOS}


# --- Paperclip task retry (profile paperclip_retry, seed 001 with #19759): drives in scenarios_paperclip -------

from recoverykit.conformance import scenarios_paperclip as _pc  # noqa: E402

_PC = Profile.PAPERCLIP_RETRY
_UNAVAILABLE = [{"kind": "error", "status": 503, "attempts": [1, 2, 3, 4, 5], "message": "overloaded"}]
SCENARIOS += (
    Scenario("paperclip_19759", "#19759: a Retry restarted during bootstrap re-prepares in its task directory; a "
             "failed re-preparation settles its coordinator and a later Retry creates a run", _PC,
             (_pc.task_script("p19a", _pc.HELD), _pc.task_script("p19b", _pc.HELD)), (),
             ("RTY-12", "RTY-13", "RTY-14", "RTY-10", "RTY-19", "RTY-40", "RTY-02", "RTY-08", "RTY-09", "RTY-34",
              "RTY-37", "RTY-24", "RTY-39", "RTY-15", "RTY-33", "RTY-23"), _pc.drive_19759,
             Chaos(kinds=(_K.TREE_KILL, _K.WORKER_KILL, _K.NORMAL_EXIT), points=_pc.CHAOS_POINTS + _pc.SETTLE_POINTS,
                   clauses=("RTY-02", "RTY-12", "RTY-13", "RTY-14", "RTY-04", "RTY-25"), kick=_pc.chaos_kick_19759,
                   item_hits=True, restart_points=_pc.SETTLE_POINTS, restart_first=_pc.BOOTSTRAP_PAUSE,
                   restart_kick=_pc.chaos_restart_19759)),
    Scenario("paperclip_retry", "Retry admission: a double click with one key, the same key after completion "
             "and after failure, a stale observed run", _PC,
             (_pc.task_script("pra", _pc.HELD2), _pc.task_script("prb", _pc.HELD)), (),
             ("RTY-04", "RTY-05", "RTY-03", "RTY-17", "RTY-23"), _pc.drive_retry_admission,
             Chaos(none="admission without a restart; chaos interrupts the Retry path in paperclip_19759")),
    Scenario("paperclip_schedule", "the maintenance retry schedule under restarts and clock jumps: due times, "
             "persisted jitter, no replenished budget, the 30-minute window, then a deliberate click", _PC,
             (_pc.task_script("psc", _UNAVAILABLE), _pc.task_script("psl", _UNAVAILABLE)), (),
             ("RTY-26", "RTY-27", "RTY-28", "RTY-30", "RTY-01", "RTY-06", "RTY-41", "RTY-35", "RTY-31", "RTY-25",
              "RTY-15", "RTY-33"),
             _pc.drive_schedule,
             Chaos(none="the restarts are the drive's, placed inside the schedule; chaos's points would only "
                        "move them")),
    Scenario("paperclip_cooldown", "a provider cooldown longer than the backoff decides the next retry's due "
             "time, and a click while that retry waits attaches to it", _PC, (_pc.task_script("pcd", _pc.HELD),), (),
             ("RTY-29", "RTY-20"), _pc.drive_cooldown,
             Chaos(none="the restart is the drive's, placed inside the schedule")),
)
SCENARIOS_BY_ID = {s.id: s for s in SCENARIOS}
