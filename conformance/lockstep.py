"""The lockstep machine: the model predicts, the adapter reports, every step is compared.

A Hypothesis ``RuleBasedStateMachine``, generic over the adapter command (``make_machine``). Its
rules are client operations (submit, pause, resume, end, stop all, reload), environment moves
(release a held provider request or tool, settle) and faults (kill the worker alone or the whole
tree through psutil by the pids ``processes`` names, long downtime, a changed host identity, a
graceful restart through the adapter, a crash at a failpoint the adapter declared: armed by a
restart, judged by the broker's hit or the process's exit, then the runtime is started again, i.e. a
crash during recovery for the recovery.* points). Each rule drives the model
(``recoverykit.model.transitions``) with the same event it sends the adapter.

After every rule the adapter's observation must REFINE the model: per work item its desired_state,
whether it finished and how many inputs it holds must equal what one of the model's candidate
states predicts, once the model has been advanced by runtime progress alone (a run item may have
finished; nothing else may change by itself). Indefinite operations (an ``info`` completion) keep
both outcomes as candidates (under an armed crash, the model's ``successors(InFlight(...))``), as
etcd's robustness model forks on unknown results; the next observations prune them. The history
checker runs on the history so far after every rule, so a safety clause broken anywhere fails the
step that revealed it. Every failure names its clause ("broke RI-03: ...") and Hypothesis shrinks
it to the printed program of rules plus ``@reproduce_failure``.

A clause already found in this search, or accepted by the user (``LockstepConfig.known``), no longer
ends a program: a history check of it is noted and the program goes on judging every other clause; a
refinement failure of it leaves the model behind the runtime, so the program is discarded (a Hypothesis
rejection, ``Diverged``) rather than reported again. ``lockstep_run`` searches again with what it found
added, so one broken clause cannot hide another.

Assumptions (stated as etcd states its model's): every submit goes to a new session (so each
acknowledged input is its own chat request); the runtime needs no person to finish chat work
(no approvals, budgets or permissions are in play here); failpoint crashes need a broker (the
failpoint protocol reports hits to it): every run has one (the environment's own, also from the Python
API and the pytest plugin) unless ``broker_factory=None`` turns it off, and then that rule is never chosen.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import UnsatisfiedAssumption
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from recoverykit.conformance.broker import FailpointBroker
from recoverykit.conformance.checker import ClauseResult, check
from recoverykit.conformance.environment import BrokerFactory, Run, make_run_dir
from recoverykit.conformance.pacing import FINAL_SETTLE, STEP_SETTLE, Pacing
from recoverykit.conformance.provider_script import script_tag
from recoverykit.model.catalogue import OLD_HIDDEN_EXPIRY_S, DesiredState, RestartKind, Verdict
from recoverykit.model.contract import clause
from recoverykit.model.errors import ModelError
from recoverykit.model.events import (
    Admit,
    Crash,
    End,
    FrontendReload,
    InFlight,
    Pause,
    Restart,
    Resume,
    Start,
    StopAll,
    Submit,
)
from recoverykit.model.state import ModelState
from recoverykit.model.transitions import apply, successors

SCRIPTS = ("lk-text", "lk-read", "lk-unknown", "lk-hold")
ARMABLE = ("input.accept.before", "input.accept.after",  # a submit in flight at the crash: indefinite
           "provider.request.after", "usage.persist.before", "usage.persist.after", "tool.dispatch.after",
                 "tool.result.commit.before", "tool.result.commit.after", "completion.commit.before_projection",
                 # a crash here is a crash during recovery: the start after it must finish the job
                 "recovery.claim.after", "recovery.repair.after", "recovery.decide.after")
GRACEFUL = (RestartKind.NORMAL_EXIT, RestartKind.GRACEFUL_WORKER_RESTART)
KILLS = (RestartKind.WORKER_KILL, RestartKind.TREE_KILL, RestartKind.LONG_DOWNTIME, RestartKind.HOST_IDENTITY_CHANGE)
STEP_SETTLE_S = STEP_SETTLE.seconds
MAX_CANDIDATES = 64
FINAL_SETTLE_S = FINAL_SETTLE.seconds


MAX_SUBMITS = 40  # scripts per kind: every submit gets its own script id, so attempts are per work item


def lockstep_script() -> dict:
    usage = {"prompt_tokens": 25, "completion_tokens": 9}
    text = {"text": "done", "usage": usage}
    steps = {
        "lk-text": [text],
        "lk-read": [{"tool_calls": [{"name": "probe_read", "arguments": {}}], "usage": usage}, text],
        "lk-unknown": [{"tool_calls": [{"name": "probe_unknown", "arguments": {"hold": True}}], "usage": usage}, text],
        "lk-hold": [{**text, "faults": [{"kind": "hold", "at_chunk": 0, "attempts": [1]}]}],
    }
    return {"hold_timeout_s": 120.0, "scripts": [
        {"id": f"{kind}-{n}", "cumulative_usage": True, "when_exhausted": "repeat_last", "steps": body}
        for kind, body in steps.items() for n in range(1, MAX_SUBMITS + 1)]}


class Broke(AssertionError):
    """A clause the adapter broke; the message is the clause's definition plus what was seen."""

    def __init__(self, clause_id: str, detail: str, text: str | None = None) -> None:
        self.clause_id = clause_id
        super().__init__(text or clause(clause_id).broke(detail))


class Diverged(UnsatisfiedAssumption):
    """A known clause (found earlier in the search, or accepted) broke where the model cannot follow the
    runtime any further: the program is discarded (Hypothesis counts it invalid), never reported again."""

    def __init__(self, clause_id: str, text: str) -> None:
        self.clause_id, self.text = clause_id, text
        super().__init__(f"{clause_id} (known): {text}")

    def __str__(self) -> str:
        return f"{self.clause_id} (known): {self.text}"


class NotSettled(UnsatisfiedAssumption):
    """Work meant to run was still queued or running when ``settle`` stopped waiting (quiesce said not quiescent):
    the program proves nothing about RI-02, so it is discarded (a Hypothesis rejection) and the search goes on;
    ``LockstepConfig.unsettled`` keeps the reason, and a search that found nothing else is unknown, never valid."""


@dataclass
class LockstepConfig:
    """What a machine class needs; the certifier reads ``runs`` and ``results`` afterwards."""

    command: str
    out: Path | None = None
    broker_factory: BrokerFactory | None = FailpointBroker
    runs: list[Path] = field(default_factory=list)
    results: list[ClauseResult] = field(default_factory=list)
    compared: int = 0  # observations actually compared with the model (none: the verdict is unknown)
    shrink_budget_s: float = 30.0  # after a failure, shrink for at most this long, then report the best found
    known: set[str] = field(default_factory=set)  # clauses found earlier in this search or accepted: not raised
    repeats: dict[str, int] = field(default_factory=dict)  # per known clause: programs that broke it again
    first_text: dict[str, str] = field(default_factory=dict)  # per known clause: the first text seen again
    unsettled: list[str] = field(default_factory=list)  # programs whose work had not settled (NotSettled)
    pacing: Pacing | None = None  # the windows of every run (None: the current pacing, ``pacing.current``)


def make_machine(config: LockstepConfig) -> type[LockstepMachine]:
    """A machine class bound to one adapter command (Hypothesis instantiates it once per example)."""
    return type("Lockstep", (LockstepMachine,), {"config": config})


class LockstepMachine(RuleBasedStateMachine):
    config: LockstepConfig

    def __init__(self) -> None:
        super().__init__()
        cfg = self.config
        run_dir = make_run_dir(cfg.out, f"lockstep-{len(cfg.runs) + 1:03d}")
        cfg.runs.append(run_dir)
        self.run = Run(cfg.command, run_dir, lockstep_script(), broker_factory=cfg.broker_factory,
                       pacing=cfg.pacing).open()
        try:
            self.kinds = {str(k) for k in self.run.init_ok.restart_kinds}
            self.points = [p for p in ARMABLE if p in {str(f) for f in self.run.init_ok.failpoints}]
            self.candidates: list[ModelState] = [ModelState()]
            self.work: list[str] = []
            self.indefinite: dict[str, int] = {}  # client_msg_id -> submit number, outcome unknown
            self.submits = 0
            self.turns = 0
            self.armed = False
            self.workers: set[int] = set()
            self.last = "start"
            self.noted: set[str] = set()  # known clauses this program broke again
            self._start()
        except BaseException:  # no machine, so no teardown: the run (and its adapter) must end here
            cfg.results.extend(check(self.run.evidence()))
            self.run.close()
            raise

    # --- plumbing ----------------------------------------------------------------------------------

    def _runtime_pids(self) -> set[int]:
        """Control and worker processes now alive (tool children come and go by themselves)."""
        return {p["pid"] for p in self.run.processes() if p["role"] in ("control", "worker")}

    def _start(self, **env: Any) -> None:
        self.run.start(**env)
        self.workers = self._runtime_pids()

    def _each(self, event: Any) -> None:
        """Apply a definite event to every candidate.

        Where the model does not enable it (resuming running work, pausing finished work) the adapter's
        acceptance is taken as a no-op: the next observation judges whether anything really changed.
        """
        out = []
        for state in self.candidates:
            try:
                out.append(apply(state, event))
            except ModelError:
                out.append(state)
        self.candidates = out

    def _add(self, states: list[ModelState]) -> None:
        """Keep every distinct candidate (forks on unknown outcomes; the next observation prunes them)."""
        for state in states:
            if state is not None and not any(state == known for known in self.candidates):
                self.candidates.append(state)
        del self.candidates[MAX_CANDIDATES:]

    def _either(self, event: Any) -> None:
        """An indefinite operation: it may or may not have happened.

        With a crash armed, the model's own ``successors(InFlight(op, point))`` gives the outcomes (the
        runtime went down at the point, with or without the operation); otherwise both outcomes branch.
        """
        if self.armed:  # also keep the branches without a crash: if none happened, observation prunes these
            outcomes = []
            for state in self.candidates:
                with contextlib.suppress(ModelError):
                    outcomes += successors(state, InFlight(op=event, point=self.point))
            self._add(outcomes)
        more = []
        for state in self.candidates:
            with contextlib.suppress(ModelError):
                more.append(apply(state, event))
        self._add(more)

    def _control(self, name: str, event_type: type, work_id: str) -> None:
        before = list(self.candidates)
        out = self.run.op(name, work_id=work_id)
        self.last = name
        if out.type == "ok":
            self._each(event_type(work_id=work_id))
        elif out.type == "info":
            self._either(event_type(work_id=work_id))
        if out.type != "fail" and event_type in (Pause, End):
            # The work may have finished just before the control arrived (the kit last looked earlier):
            # keep that branch too; if the runtime shows the stop, the next observation drops it.
            self._add([self._finish(s, [work_id]) for s in before
                       if work_id in s.work and s.work[work_id].desired_state is DesiredState.RUN])

    # --- client operations -------------------------------------------------------------------------

    @rule(script=st.sampled_from(SCRIPTS))
    def submit(self, script: str) -> None:
        self.submits += 1
        n = self.submits
        cid, script = f"lk-{n}", f"{script}-{(n - 1) % MAX_SUBMITS + 1}"
        out = self.run.op("submit", session_id=f"ls-{n}", text=f"{script_tag(script)} request {n}", client_msg_id=cid)
        self.last = "submit"
        if out.type == "ok":
            self.work.append(out.reply.work_id)
            self._each(Submit(work_id=out.reply.work_id, text=cid))
        elif out.type == "info":
            self.indefinite[cid] = n
        if out.type == "ok" and script.startswith("lk-unknown"):  # reach "tool running" before the next rule
            self.run.wait_witness(lambda e: e.probe_token.startswith(script + "."), timeout_s=5.0)
        elif out.type == "ok" and script.startswith("lk-hold"):
            with contextlib.suppress(Exception):
                self.run.wait_held(5.0, script_id=script)

    @precondition(lambda self: self.work)
    @rule(i=st.integers(0, 7))
    def pause(self, i: int) -> None:
        self._control("pause", Pause, self.work[i % len(self.work)])

    @precondition(lambda self: self.work)
    @rule(i=st.integers(0, 7))
    def resume(self, i: int) -> None:
        self._control("resume", Resume, self.work[i % len(self.work)])

    @precondition(lambda self: self.work)
    @rule(i=st.integers(0, 7))
    def end(self, i: int) -> None:
        self._control("end", End, self.work[i % len(self.work)])

    @rule()
    def stop_all(self) -> None:
        out = self.run.op("stop_all")
        self.last = "stop_all"
        if out.type == "ok":
            stopped = set(out.reply.stopped)
            # An item the model still runs but the runtime did not stop must have finished just before.
            self.candidates = [self._finish(s, [w for w, it in s.work.items()
                                                if it.desired_state is DesiredState.RUN and w not in stopped])
                               for s in self.candidates]
            self.candidates = [s for s in self.candidates if s is not None] or self.candidates
            self._each(StopAll())
        elif out.type == "info":
            self._either(StopAll())

    @rule()
    def reload(self) -> None:
        out = self.run.op("reload")
        self.last = "reload"
        if out.type == "ok":
            self._each(FrontendReload())

    # --- environment moves -------------------------------------------------------------------------

    @rule()
    def release_environment(self) -> None:
        """The provider answers every held request; every held tool finishes."""
        self.run.provider.release()
        self.run.release_probes()
        self.last = "release"

    @rule()
    def settle(self) -> None:
        """Release everything and let the runtime quiesce: work meant to run must now be finished."""
        self.release_environment()
        quiescent, snap = self.run.settle(FINAL_SETTLE_S)
        if self.armed:  # the armed crash may fire while settling: the kit restarts, as after any other rule,
            self._crashed()  # and work meant to run must then finish by itself
            if not self.armed:
                self.release_environment()
                quiescent, snap = self.run.settle(FINAL_SETTLE_S)
        self.last = "settle"
        self._refine(snap)
        for state in self.candidates:
            stuck = [w for w, it in state.work.items() if it.desired_state is DesiredState.RUN]
            if not stuck:
                return
        items = {w["work_id"]: w for w in snap.get("work_items") or []}
        for work_id in stuck:
            seen = items.get(work_id, {})
            if seen.get("status") in ("waiting", "failed") and seen.get("reason_code"):
                continue
            if not quiescent and seen.get("status") in ("queued", "running"):
                # still at work when the window closed: slow, not stuck. Unknown, never a recovery failure
                given = self.run.window(FINAL_SETTLE_S)
                text = (f"{work_id} is meant to run and was still {seen.get('status')} when the kit stopped waiting: "
                        f"quiesce({given:g}) answered quiescent: false (the kit gave the runtime {given:g} s after "
                        f"every hold was released, after {self.last}: {self.run.pacing.says(FINAL_SETTLE, given)}); "
                        "RI-02 not judged")
                self.config.unsettled.append(text)
                raise NotSettled(text)
            self._broke("RI-02", f"{work_id} is meant to run but is {seen.get('status')} after every hold was "
                                 f"released and the runtime {'reported quiescence' if quiescent else 'settled'}")

    # --- faults ------------------------------------------------------------------------------------

    @rule(kind=st.sampled_from(KILLS))
    def kill(self, kind: RestartKind) -> None:
        # a worker kill may find no worker (a single-process runtime): no restart, recorded, the program goes on
        self.run.kill(kind.value, required=kind is not RestartKind.WORKER_KILL)
        env: dict[str, Any] = {}
        if kind is RestartKind.LONG_DOWNTIME:
            self.run.clock_jump(OLD_HIDDEN_EXPIRY_S + 60)
            env["clock_offset_s"] = self.run.clock_offset_s
        if kind is RestartKind.HOST_IDENTITY_CHANGE:
            env["host_id"] = self.run.host_id + "-b"
        self._start(**env)
        self.last = kind.value
        self._each(Restart(kind=kind))

    @precondition(lambda self: any(k.value in self.kinds for k in GRACEFUL))
    @rule(which=st.integers(0, 1))
    def graceful_restart(self, which: int) -> None:
        kinds = [k for k in GRACEFUL if k.value in self.kinds]
        kind = kinds[which % len(kinds)]
        out = self.run.restart(kind.value)
        self.workers = self._runtime_pids()
        self.last = kind.value
        if out.type == "ok":
            self._each(Restart(kind=kind))

    @precondition(lambda self: self.points and not self.armed and self.run.broker is not None)
    @rule(i=st.integers(0, 11))
    def arm_crash(self, i: int) -> None:
        """Restart with a failpoint armed to crash: the runtime kills itself there; the kit sees the exit."""
        point = self.points[i % len(self.points)]
        self.hits_seen = len(self.run.broker.hits())  # only hits after arming count (recovery hits come in start)
        self.run.kill("tree_kill")
        self._start(failpoints=f"{point}=1*crash")
        self.armed, self.point = True, point
        self.last = f"arm {point}"
        self._each(Restart(kind=RestartKind.TREE_KILL))

    def _crashed(self) -> None:
        """Judged by the processes' exit (psutil via ``processes``), never by the adapter's word."""
        listed = self.run.processes()
        alive = {p["pid"] for p in listed if p["role"] in ("control", "worker")}
        hits = [h.as_dict() for h in self.run.broker.hits()[self.hits_seen:] if h.point == self.point]
        if hits or self.workers - alive or not any(p["role"] == "worker" for p in listed):
            self.run.recorder.fault("crash", point=self.point, pids=sorted(self.workers - alive),
                                    hit=hits[-1] if hits else None)  # the broker's record, when there is one
            self.armed = False
            self._start(failpoints="")
            for event in (Crash(point=self.point, worker_only=True), Start()):
                self._each(event)

    # --- refinement --------------------------------------------------------------------------------

    def _finish(self, state: ModelState, work_ids: list[str]) -> ModelState | None:
        """``state`` advanced by runtime progress alone: each of ``work_ids`` ran to completion."""
        from recoverykit.model.events import TurnComplete
        for work_id in work_ids:
            try:
                if state.open_turn(work_id) is None:
                    self.turns += 1
                    state = apply(state, Admit(work_id=work_id, turn_id=f"lt{self.turns}"))
                state = apply(state, TurnComplete(work_id=work_id))
            except ModelError:
                return None
        return state

    def _refine(self, snap: dict[str, Any]) -> None:
        items = {w["work_id"]: w for w in snap.get("work_items") or []}
        for w in items.values():  # an indefinite submit resolved by what the runtime shows
            for inp in w.get("inputs", []):
                if inp["client_msg_id"] in self.indefinite:
                    self.indefinite.pop(inp["client_msg_id"])
                    self.work.append(w["work_id"])
                    self._each(Submit(work_id=w["work_id"], text=inp["client_msg_id"]))
        problems: list[tuple[str, str]] = []
        kept = []
        for state in self.candidates:
            done = [w for w, it in state.work.items()
                    if it.desired_state is DesiredState.RUN and items.get(w, {}).get("desired_state") == "done"]
            advanced = self._finish(state, done)
            found = self._compare(advanced or state, items)
            if advanced is not None and not found:
                kept.append(advanced)
            elif found and not problems:
                problems = found
        if not kept:
            clause_id, detail = (problems or [("RI-01", "no state the model allows matches the snapshot")])[0]
            self._broke(clause_id, f"{detail} (after {self.last})")
        self.candidates = kept

    def _compare(self, state: ModelState, items: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
        out = []
        for work_id, intent in state.work.items():
            seen = items.get(work_id)
            if seen is None:
                out.append(("RI-01", f"acknowledged work item {work_id} is missing from the snapshot"))
                continue
            want, got = intent.desired_state.value, seen["desired_state"]
            inputs = 1 + len(intent.unconsumed_messages)
            if len(seen.get("inputs", [])) != inputs:
                out.append(("INP-01", f"{work_id} holds {len(seen.get('inputs', []))} inputs, {inputs} acknowledged"))
            if want == got:
                continue
            if want in ("paused", "cancelled"):
                stop_all = intent.reason_code.value == "user_stopped_all"
                out.append(("CTL-02" if stop_all else "RI-03", f"{work_id} desired_state is {got}; the user's "
                            f"{'stop all' if stop_all else want} was acknowledged and never undone"))
            elif want == "run":
                restarted = self.last in {k.value for k in RestartKind} or self.last.startswith("arm")
                cid = "CTL-01" if self.last == "reload" else "CTL-03" if restarted else "RI-08"
                out.append((cid, f"{work_id} desired_state is {got}, but the user never stopped it"))
            else:
                out.append(("RI-04", f"{work_id} finished, yet its desired_state is now {got}"))
        known = set(state.work) | set(self.work)
        for work_id, seen in items.items():
            pending = any(i["client_msg_id"] in self.indefinite for i in seen.get("inputs", []))
            if work_id not in known and not pending:
                out.append(("INP-02", f"{work_id} appeared though no submit for it was acknowledged"))
        return out

    @invariant()
    def refines_the_model_and_keeps_history_clauses(self) -> None:
        if self.armed:
            self._crashed()
        snap = self._snapshot()
        if snap.get("work_items") is not None:  # an adapter that does not observe work items cannot be judged
            self.config.compared += 1
            self._refine(snap)
        for result in check(self.run.evidence()):
            if result.verdict is Verdict.INVALID:
                if result.clause_id in self.config.known:  # noted; every other clause is still judged
                    self._note(result.clause_id, result.text)
                    continue
                raise Broke(result.clause_id, "", text=result.text)

    def _note(self, clause_id: str, text: str) -> None:
        if clause_id not in self.noted:
            self.noted.add(clause_id)
            self.config.first_text.setdefault(clause_id, text)

    def _broke(self, clause_id: str, detail: str) -> None:
        """A refinement failure: reported (``Broke``), or for a known clause the program is discarded."""
        text = clause(clause_id).broke(detail)
        if clause_id in self.config.known:
            self._note(clause_id, text)
            raise Diverged(clause_id, text)
        raise Broke(clause_id, detail)

    def _snapshot(self) -> dict[str, Any]:
        """A short settle, then observe; a definite refusal (storage busy mid-recovery) is asked again."""
        from recoverykit.conformance.errors import OperationFailed
        for attempt in range(10):
            try:
                return self.run.settle(STEP_SETTLE_S)[1]
            except OperationFailed as exc:
                if not exc.definite or attempt == 9:
                    raise
                time.sleep(0.2)
        raise AssertionError("unreachable")

    def teardown(self) -> None:
        cfg = self.config
        try:
            cfg.results.extend(check(self.run.evidence()))
        finally:
            self.run.close()
            for clause_id in self.noted:
                cfg.repeats[clause_id] = cfg.repeats.get(clause_id, 0) + 1
