"""The lockstep machine: refinement judgments (no processes) and real programs against the mini runtime."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import recoverykit.conformance.lockstep as lockstep
import recoverykit.conformance.lockstep_run as lockstep_run
from recoverykit.conformance.lockstep import LockstepConfig, LockstepMachine, make_machine
from recoverykit.conformance.lockstep_run import SEED_PROGRAMS, run_lockstep, run_program
from recoverykit.model.catalogue import Verdict
from recoverykit.model.events import FrontendReload, Pause, Restart, StopAll, Submit
from recoverykit.model.state import ModelState
from recoverykit.model.transitions import apply

ROOT = Path(__file__).resolve().parent.parent
MINI = f"{sys.executable} {ROOT / 'tests' / 'adapters' / 'mini_runtime.py'}"


def machine(*events, last="submit") -> LockstepMachine:
    """A machine without processes: only the model side, for judging observations."""
    m = object.__new__(make_machine(LockstepConfig("unused")))
    state = ModelState()
    for event in events:
        state = apply(state, event)
    m.candidates, m.work, m.indefinite, m.turns, m.last = [state], ["w1"], {}, 0, last
    return m


def seen(desired="run", status="queued", inputs=("c1",), work_id="w1"):
    return {"work_items": [{"work_id": work_id, "desired_state": desired, "status": status, "reason_code": None,
                            "inputs": [{"client_msg_id": c} for c in inputs]}]}


def broke(m, snapshot) -> str:
    with pytest.raises(lockstep.Broke) as info:
        m._refine(snapshot)
    return info.value.clause_id


def test_finishing_run_work_refines_the_model():
    m = machine(Submit(work_id="w1"))
    m._refine(seen("done", "finished"))
    assert m.candidates[0].work["w1"].desired_state.value == "done"


def test_paused_work_that_continued_breaks_ri_03():
    m = machine(Submit(work_id="w1"), Pause(work_id="w1"))
    assert broke(m, seen("done", "finished")) == "RI-03"


def test_stopped_all_work_that_continued_breaks_ctl_02():
    m = machine(Submit(work_id="w1"), StopAll())
    assert broke(m, seen("run")) == "CTL-02"


def test_a_reload_or_a_restart_is_never_a_pause():
    assert broke(machine(Submit(work_id="w1"), FrontendReload(), last="reload"), seen("paused", "paused")) == "CTL-01"
    m = machine(Submit(work_id="w1"), Restart(kind="tree_kill"), last="tree_kill")
    assert broke(m, seen("paused", "paused")) == "CTL-03"


def test_inputs_lost_or_invented_break_inp():
    assert broke(machine(Submit(work_id="w1")), seen(inputs=("c1", "c1"))) == "INP-01"
    assert broke(machine(Submit(work_id="w1")), seen(work_id="w9")) == "RI-01"
    m = machine(Submit(work_id="w1"))
    snap = seen()
    snap["work_items"].append(seen(work_id="w2")["work_items"][0])
    assert broke(m, snap) == "INP-02"


def test_an_indefinite_submit_may_or_may_not_have_happened():
    m = machine()
    m.candidates, m.work, m.indefinite = [ModelState()], [], {"c1": 1}
    m._refine({"work_items": []})  # it did not happen: fine
    m._refine(seen())  # it did happen, later seen: adopted
    assert "w1" in m.work and m.candidates[0].work["w1"]


def test_failures_name_the_clause_and_its_definition():
    error = lockstep.Broke("RI-03", "w1 continued")
    assert str(error).startswith("broke RI-03: ") and "w1 continued" in str(error)


@pytest.mark.slow
def test_seed_programs_pass_on_the_honest_mini_runtime(tmp_path):
    config = LockstepConfig(MINI, out=tmp_path)
    for program in SEED_PROGRAMS:
        outcome = run_program(config, program)
        assert outcome.verdict is Verdict.VALID, (outcome.message, outcome.report)


@pytest.mark.slow
def test_hypothesis_finds_shrinks_and_prints_a_reproduction(tmp_path, monkeypatch):
    monkeypatch.setattr(lockstep_run, "SEED_PROGRAMS", ())  # random exploration only
    config = LockstepConfig(f"{MINI} --bug sum_usage", out=tmp_path, shrink_budget_s=3.0)
    outcome = run_lockstep(config, seed=5, max_examples=3, database=tmp_path / "db")
    assert outcome.verdict is Verdict.INVALID and outcome.clause_id == "USG-05"
    assert outcome.message.startswith("broke USG-05: ")
    assert any("state.submit(" in line for line in outcome.program)
    assert any("@reproduce_failure(" in line for line in outcome.program)
    stored = (tmp_path / "db" / "failures.txt").read_text()  # stored, and tried first next time:
    assert "@reproduce_failure(" in stored
    assert outcome.searches == 2 and [f.clause_id for f in outcome.findings] == ["USG-05"]  # searched again
    again = run_lockstep(LockstepConfig(f"{MINI} --bug sum_usage", out=tmp_path / "again"), seed=6,
                         max_examples=1, database=tmp_path / "db")
    assert again.clause_id == "USG-05" and again.findings[0].source == "stored failure"  # replayed first
    assert again.findings[0].run == again.runs[0]  # the very first run: no search before it


def test_a_known_clause_discards_the_program_instead_of_failing_it():
    m = machine(Submit(work_id="w1"), Pause(work_id="w1"))
    m.config = LockstepConfig("unused", known={"RI-03"})
    m.noted = set()
    with pytest.raises(lockstep.Diverged) as info:  # a Hypothesis rejection: neither a pass nor a new finding
        m._refine(seen("done", "finished"))
    assert info.value.clause_id == "RI-03" and m.noted == {"RI-03"}


@pytest.mark.slow
def test_one_broken_clause_does_not_hide_another(tmp_path, monkeypatch):
    monkeypatch.setattr(lockstep_run, "SEED_PROGRAMS", SEED_PROGRAMS[:2])  # a finished turn; pause, then kill
    two = f"{MINI} --bug sum_usage,resume_paused"  # breaks USG-05 (any finished turn) and RI-03 (pause, kill)
    outcome = run_lockstep(LockstepConfig(two, out=tmp_path / "a", shrink_budget_s=3.0), seed=3, max_examples=1)
    assert outcome.verdict is Verdict.INVALID
    assert {f.clause_id for f in outcome.findings} >= {"USG-05", "RI-03"}, [f.message for f in outcome.findings]
    ri03 = next(f for f in outcome.findings if f.clause_id == "RI-03")
    assert 1 <= ri03.steps <= 5 and "state.pause(i=0)" in ri03.program
    # USG-05 accepted: never a finding, noted when broken again, and the search still finds RI-03
    known = run_lockstep(LockstepConfig(two, out=tmp_path / "b", shrink_budget_s=3.0), seed=3, max_examples=1,
                         accepted={"USG-05"})
    assert [f.clause_id for f in known.findings] == ["RI-03"] and known.repeats.get("USG-05", 0) >= 1


class _CrashingWhileSettling:
    """A runtime whose armed crash fires during the settle: the first settle finds its worker dead and the work
    stuck; after the kit's restart the work finishes."""

    def __init__(self):
        self.settles, self.starts = 0, []
        self.provider = type("P", (), {"release": lambda _self: None})()
        self.recorder = type("R", (), {"fault": lambda _self, *a, **k: None})()
        hit = type("H", (), {"point": "provider.request.before", "as_dict": lambda _self: {"hit": 1}})()
        self.broker = type("B", (), {"hits": lambda _self: [hit] * self.settles})()

    def release_probes(self):
        pass

    def settle(self, _timeout):
        self.settles += 1
        return (True, seen("run", "queued") if self.settles == 1 else seen("done", "finished"))

    def processes(self):
        return [] if self.settles == 1 and not self.starts else [{"pid": 2, "role": "worker"}]

    def start(self, **env):
        self.starts.append(env)


def test_a_crash_firing_during_settle_is_a_restart_not_stuck_work():
    """The LangGraph adapter's finding: settle judged RI-02 on a worker the armed crash had just killed."""
    m = machine(Submit(work_id="w1"), Restart(kind="tree_kill"), last="arm provider.request.before")
    m.run, m.armed, m.point, m.hits_seen, m.workers = _CrashingWhileSettling(), True, "provider.request.before", 0, {1}
    m.settle()
    assert m.run.settles == 2 and m.run.starts == [{"failpoints": ""}] and not m.armed
    assert m.candidates[0].work["w1"].desired_state.value == "done"
