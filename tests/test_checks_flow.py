"""Flow checks judged from the provider's ledger: an honest run, and one broken flow per clause."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_flow import (
    check_finished_stays_finished,
    check_recovery_from_committed,
    check_stop_beats_admission,
)
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.witness import Execution, WitnessLog
from recoverykit.model.catalogue import Verdict


class Ledger:
    def __init__(self) -> None:
        self.records: list[dict] = []

    def attempt(self, step: int, sent: float, answered: float | None, *, tools: int = 0, steps: int = 2) -> None:
        seq = len(self.records) + 1
        self.records.append({"event": "request", "seq": seq, "time": sent, "request_id": f"w1.s{step}.a{seq}",
                             "request_id_source": "header", "script_id": "t1", "step": step, "script_steps": steps})
        if answered is not None:
            self.records.append({"event": "response", "seq": seq, "time": answered, "delivered": True,
                                 "probe_tokens": [f"t1.{step}.1.{i}" for i in range(tools)]})


def _history(*, stop_at=None, fault=None, fault_at=None, calls_before=(), finished_at=None):
    """Events at the times given (each event takes the next free integer time up to the one asked for)."""
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 1.0
    op = rec.invoke("submit", {"session_id": "s1", "text": "[[rk-script:t1]] hi", "client_msg_id": "c1"})
    rec.complete(op, "ok", {"work_id": "w1", "input_id": "i1"})
    plan = []
    if stop_at is not None:
        plan.append((stop_at, "stop"))
    if fault_at is not None:
        plan.append((fault_at - 0.1, "look"))
        plan.append((fault_at, "fault"))
    if finished_at is not None:
        plan.append((finished_at, "finished"))
    for at, what in sorted(plan):
        rec.now = at
        if what == "stop":
            p = rec.invoke("pause", {"work_id": "w1"})
            rec.complete(p, "ok", {})
        elif what == "look":
            rec.observe({"tool_calls": list(calls_before), "work_items": []})
        elif what == "fault":
            rec.fault(fault, pids=[1])
        else:
            rec.observe({"work_items": [{"work_id": "w1", "status": "finished", "desired_state": "done"}]})
    return rec.history


def _v(results):
    return {r.clause_id: r.verdict for r in results}


def test_a_stop_lets_the_step_in_flight_finish_and_nothing_more():
    led = Ledger()
    led.attempt(0, 1.5, 3.0, tools=1)  # in flight at the pause (2.0), answered after it
    ev = Evidence(_history(stop_at=2.0), led.records, WitnessLog([], [], None))
    assert _v(check_stop_beats_admission(ev)) == {"CTL-07": Verdict.VALID}


def test_a_step_decided_after_the_stop_breaks_ctl07():
    led = Ledger()
    led.attempt(0, 1.5, 3.0, tools=1)
    led.attempt(1, 4.0, 4.5)
    ev = Evidence(_history(stop_at=2.0), led.records, WitnessLog([], [], None))
    assert _v(check_stop_beats_admission(ev)) == {"CTL-07": Verdict.INVALID}


def test_a_tool_started_after_the_stop_breaks_ctl07():
    led = Ledger()
    led.attempt(0, 1.5, 3.0, tools=1)
    probe = Execution("t1.0.1.0", "probe_unknown", "unknown", 9, 3.5, 3.5, 4.0, "ok", 0)
    ev = Evidence(_history(stop_at=2.0), led.records, WitnessLog([], [probe], None))
    assert _v(check_stop_beats_admission(ev)) == {"CTL-07": Verdict.INVALID}


def test_no_stop_is_unknown_for_ctl07():
    ev = Evidence(_history(), Ledger().records, WitnessLog([], [], None))
    assert _v(check_stop_beats_admission(ev)) == {"CTL-07": Verdict.UNKNOWN}


def test_asking_past_the_final_answer_breaks_ri04():
    led = Ledger()
    led.attempt(0, 1.5, 2.0, tools=1)
    led.attempt(1, 2.5, 3.0)
    led.attempt(2, 3.5, None)
    ev = Evidence(_history(), led.records, WitnessLog([], [], None))
    assert _v(check_finished_stays_finished(ev)) == {"RI-04": Verdict.INVALID}


def test_asking_after_finished_was_observed_breaks_ri04():
    led = Ledger()
    led.attempt(0, 1.5, 2.0, tools=1)
    led.attempt(1, 5.0, None)  # a retry of the last step, after the item was observed finished
    ev = Evidence(_history(finished_at=3.0), led.records, WitnessLog([], [], None))
    assert _v(check_finished_stays_finished(ev)) == {"RI-04": Verdict.INVALID}


def test_a_request_that_ends_stays_ended():
    led = Ledger()
    led.attempt(0, 1.5, 2.0, tools=1)
    led.attempt(1, 2.5, 3.0)
    ev = Evidence(_history(finished_at=4.0), led.records, WitnessLog([], [], None))
    assert _v(check_finished_stays_finished(ev)) == {"RI-04": Verdict.VALID}


_CALL = {"call_id": "c1", "work_id": "w1", "tool": "probe_read", "status": "dispatched", "pid": 5}


def test_a_committed_step_asked_again_after_a_kill_breaks_rec09():
    led = Ledger()
    led.attempt(0, 1.5, 2.0, tools=1)
    led.attempt(0, 6.0, 6.5, tools=1)
    ev = Evidence(_history(fault="tree_kill", fault_at=5.0, calls_before=[_CALL]), led.records,
                  WitnessLog([], [], None))
    assert _v(check_recovery_from_committed(ev))["REC-09"] is Verdict.INVALID


def test_recovery_from_the_checkpoint_holds_rec09():
    led = Ledger()
    led.attempt(0, 1.5, 2.0, tools=1)
    led.attempt(1, 6.0, 6.5)
    ev = Evidence(_history(fault="tree_kill", fault_at=5.0, calls_before=[_CALL]), led.records,
                  WitnessLog([], [], None))
    assert _v(check_recovery_from_committed(ev)) == {"REC-09": Verdict.VALID, "CTL-04": Verdict.UNKNOWN}


def test_an_uncommitted_answer_may_be_asked_again_after_a_kill():
    led = Ledger()
    led.attempt(0, 1.5, 2.0, tools=1)  # answered, but no tool call was on record before the kill
    led.attempt(0, 6.0, 6.5, tools=1)
    ev = Evidence(_history(fault="tree_kill", fault_at=5.0), led.records, WitnessLog([], [], None))
    assert _v(check_recovery_from_committed(ev))["REC-09"] is Verdict.UNKNOWN


def test_an_answered_step_asked_again_after_a_graceful_restart_breaks_ctl04():
    led = Ledger()
    led.attempt(0, 1.5, 2.0, tools=1)
    led.attempt(0, 6.0, 6.5, tools=1)
    ev = Evidence(_history(fault="normal_exit", fault_at=5.0), led.records, WitnessLog([], [], None))
    assert _v(check_recovery_from_committed(ev))["CTL-04"] is Verdict.INVALID


def test_a_graceful_restart_that_kept_its_checkpoint_says_what_was_judged():
    led = Ledger()
    led.attempt(0, 1.5, 2.0, tools=1)
    led.attempt(1, 6.0, 6.5)
    ev = Evidence(_history(fault="normal_exit", fault_at=5.0), led.records, WitnessLog([], [], None))
    (ctl04,) = [r for r in check_recovery_from_committed(ev) if r.clause_id == "CTL-04"]
    assert ctl04.verdict is Verdict.VALID and "checkpoints saved" in ctl04.text


def test_an_answer_that_came_after_a_pause_may_be_asked_again_after_a_graceful_restart():
    led = Ledger()
    led.attempt(0, 1.5, 3.0, tools=1)  # answered after the pause at 2.0: stale, may be dropped
    led.attempt(0, 6.0, 6.5, tools=1)
    ev = Evidence(_history(stop_at=2.0, fault="normal_exit", fault_at=5.0), led.records, WitnessLog([], [], None))
    assert _v(check_recovery_from_committed(ev))["CTL-04"] is Verdict.UNKNOWN


def test_an_answer_still_streaming_when_a_graceful_restart_began_may_be_asked_again():
    """Chaos saw an answer finish 0.4 ms after a normal exit began (sessions_together/tool.result.commit.before x
    normal_exit): a runtime that stops reading at shutdown drops it unread; it was no checkpoint it held."""
    led = Ledger()
    led.attempt(0, 1.5, 5.0004, tools=1)  # sent before the restart at 5.0, delivered whole just after it began
    led.attempt(0, 6.0, 6.5, tools=1)
    ev = Evidence(_history(fault="normal_exit", fault_at=5.0), led.records, WitnessLog([], [], None))
    assert _v(check_recovery_from_committed(ev))["CTL-04"] is Verdict.UNKNOWN
