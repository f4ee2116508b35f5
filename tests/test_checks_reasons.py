"""Waiting reasons and reported outcomes judged against what the kit caused and saw (RI-08, RI-02, REC-10)."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence, check_not_a_pause
from recoverykit.conformance.checks_outcomes import check_no_fabricated_success
from recoverykit.conformance.checks_reasons import check_parked_reasons
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.witness import Execution, WitnessLog
from recoverykit.model.catalogue import Verdict


def _run(final_item: dict, *, fault: str | None = "tree_kill", pause: bool = False, hosts=("host-a", "host-a"),
         fault_detail: dict | None = None, extra_observations=(), calls=()):
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 1.0
    rec.complete(rec.invoke("start", {"host_id": hosts[0]}), "ok", {})
    op = rec.invoke("submit", {"session_id": "s1", "text": "[[rk-script:t1]] hi", "client_msg_id": "c1"})
    rec.complete(op, "ok", {"work_id": "w1", "input_id": "i1"})
    rec.observe({"work_items": [{"work_id": "w1", "status": "running", "desired_state": "run"}]})
    if pause:
        rec.complete(rec.invoke("pause", {"work_id": "w1"}), "ok", {})
    if fault:
        rec.fault(fault, **(fault_detail or {}))
        rec.complete(rec.invoke("start", {"host_id": hosts[1]}), "ok", {})
    for snapshot in extra_observations:
        rec.observe(snapshot)
    rec.observe({"work_items": [{"work_id": "w1", "desired_state": "run", **final_item}], "tool_calls": list(calls)},
                quiescent=True)
    return rec.history


def _v(results):
    return {r.clause_id: r.verdict for r in results}


def test_work_that_finished_after_a_restart_holds_ri08():
    ev = Evidence(_run({"status": "finished", "desired_state": "done"}))
    assert _v(check_parked_reasons(ev)) == {"RI-08": Verdict.VALID}


def test_work_parked_with_a_reason_the_kit_never_caused_breaks_ri08_and_ri02():
    ev = Evidence(_run({"status": "waiting", "reason_code": "permission_revoked"}))
    assert _v(check_parked_reasons(ev)) == {"RI-08": Verdict.INVALID, "RI-02": Verdict.INVALID}


def test_a_reason_the_kit_caused_stands():
    ev = Evidence(_run({"status": "waiting", "reason_code": "resource_missing_directory"},
                       fault_detail={"reason_code": "resource_missing_directory"}))
    assert _v(check_parked_reasons(ev)) == {"RI-08": Verdict.VALID}


def test_owner_on_other_host_needs_a_real_host_identity_change():
    parked = {"status": "waiting", "reason_code": "owner_on_other_host"}
    assert _v(check_parked_reasons(Evidence(_run(parked))))["RI-08"] is Verdict.INVALID
    assert _v(check_parked_reasons(Evidence(_run(parked, hosts=("host-a", "host-b"))))) == {"RI-08": Verdict.VALID}


def test_an_unknown_effect_wait_needs_an_unsafe_execution_linked_to_the_item():
    parked = {"status": "waiting", "reason_code": "unknown_effect_reconcile"}
    call = {"call_id": "c1", "work_id": "w1", "status": "outcome_unknown", "pid": 9}
    write = Execution("t1.0.1.0", "probe_unknown", "unknown", 9, 1.5, 1.5, None, None, None)
    read = Execution("t1.0.1.0", "probe_read", "read_only", 9, 1.5, 1.5, 2.0, "ok", 0)
    assert _v(check_parked_reasons(Evidence(_run(parked, calls=[call]), witness=WitnessLog([], [write], None)))) \
        == {"RI-08": Verdict.VALID}
    assert _v(check_parked_reasons(Evidence(_run(parked, calls=[call]), witness=WitnessLog([], [read], None))))[
        "RI-08"] is Verdict.INVALID


def test_a_user_pause_is_not_judged_and_a_run_without_restart_is_unknown():
    assert _v(check_parked_reasons(Evidence(_run({"status": "paused", "desired_state": "paused",
                                                  "reason_code": "user_paused"}, pause=True)))) \
        == {"RI-08": Verdict.VALID}
    assert _v(check_parked_reasons(Evidence(_run({"status": "finished"}, fault=None)))) == {"RI-08": Verdict.UNKNOWN}


def test_ctl03_sees_a_pause_taken_a_moment_after_the_restart():
    """The first observation after the restart still says run; the later one paused: still a Pause taken."""
    ev = Evidence(_run({"status": "paused", "desired_state": "paused", "reason_code": "user_paused"},
                       extra_observations=[{"work_items": [{"work_id": "w1", "status": "queued",
                                                            "desired_state": "run"}]}]))
    assert _v(check_not_a_pause(ev))["CTL-03"] is Verdict.INVALID


def _ledger(final_delivered: bool, tokens=()):
    records = [{"event": "request", "seq": 1, "time": 1.2, "script_id": "t1", "step": 0, "script_steps": 2},
               {"event": "response", "seq": 1, "time": 1.3, "delivered": True, "probe_tokens": list(tokens)}]
    if final_delivered:
        records += [{"event": "request", "seq": 2, "time": 2.2, "script_id": "t1", "step": 1, "script_steps": 2},
                    {"event": "response", "seq": 2, "time": 2.3, "delivered": True, "probe_tokens": []}]
    return records


def test_finished_with_its_final_answer_delivered_holds_rec10():
    ev = Evidence(_run({"status": "finished", "desired_state": "done"}), _ledger(True), WitnessLog([], [], None))
    assert _v(check_no_fabricated_success(ev)) == {"REC-10": Verdict.VALID}


def test_finished_without_its_final_model_call_breaks_rec10():
    # step 0 handed the item a tool call; the answer after it was never asked for
    ev = Evidence(_run({"status": "finished", "desired_state": "done"}), _ledger(False, tokens=["t1.0.1.0"]),
                  WitnessLog([], [], None))
    assert _v(check_no_fabricated_success(ev)) == {"REC-10": Verdict.INVALID}


def test_an_answer_after_the_last_acknowledged_input_is_the_items_final_answer():
    """A script with one step per input: the second input was cut by a kill before it landed (or answered together
    with the first), so step 1 is never asked for; the answer to the only input is the item's final answer."""
    ev = Evidence(_run({"status": "finished", "desired_state": "done"}), _ledger(False), WitnessLog([], [], None))
    assert _v(check_no_fabricated_success(ev)) == {"REC-10": Verdict.VALID}
    late = [{**r, "time": 0.5} for r in _ledger(False)]  # sent before the input it would answer was acknowledged
    ev = Evidence(_run({"status": "finished", "desired_state": "done"}), late, WitnessLog([], [], None))
    assert _v(check_no_fabricated_success(ev)) == {"REC-10": Verdict.INVALID}


def test_finished_with_a_committed_call_whose_tool_never_ran_breaks_rec10():
    call = {"call_id": "c1", "work_id": "w1", "status": "result_committed", "pid": None}
    ev = Evidence(_run({"status": "finished", "desired_state": "done"}, calls=[call]),
                  _ledger(True, tokens=["t1.0.1.0"]), WitnessLog([], [], None))
    assert _v(check_no_fabricated_success(ev)) == {"REC-10": Verdict.INVALID}
    ran = Execution("t1.0.1.0", "probe_read", "read_only", 9, 1.5, 1.5, 2.0, "ok", 0)
    ev = Evidence(_run({"status": "finished", "desired_state": "done"}, calls=[call]),
                  _ledger(True, tokens=["t1.0.1.0"]), WitnessLog([], [ran], None))
    assert _v(check_no_fabricated_success(ev)) == {"REC-10": Verdict.VALID}


def test_a_stop_all_exit_is_the_user_s_stop_of_what_was_submitted_before_it():
    ev = Evidence(_run({"status": "paused", "reason_code": "user_stopped_all"}, fault="stop_all_exit"))
    assert _v(check_parked_reasons(ev)) == {"RI-08": Verdict.VALID}
