"""Cross-checks of self-reported facts against the kit's own evidence: an honest run, and one lie per clause."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_crosscheck import check_inflight_attempts, check_receipt_facts, check_tool_facts
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.witness import Execution, WitnessLog
from recoverykit.model.catalogue import Verdict


def _call(status, pid=50, call_id="c1", work_id="w1", effect="unknown"):
    return {"call_id": call_id, "work_id": work_id, "turn_id": "t1", "tool": "probe_unknown",
            "effect_class": effect, "status": status, "pid": pid, "create_time": 1.0, "repair_key": None}


def _receipt(usage="known", work_id="w1", rid="w1.s0.a1"):
    return {"receipt_id": rid, "work_id": work_id, "request_id": rid, "attempt": 1, "goal_id": None,
            "revision": None, "prompt_tokens": 5 if usage == "known" else None,
            "completion_tokens": 2 if usage == "known" else None, "usage": usage}


def _probe(*, done=True, emitted=True, ppid=50):
    return Execution("t1.0.1.0", "probe_unknown", "unknown", 60, 2.0, 2.0, 3.0 if done else None,
                     "ok" if done else None, 0 if done else None, ppid=ppid, emitted=emitted)


def _run(before: dict, after: dict, *, executions=(), fault=True, ledger_time=1.5) -> Evidence:
    times = iter(range(1, 10_000))
    rec = Recorder(clock=lambda: float(next(times)))
    op = rec.invoke("submit", {"session_id": "s1", "text": "[[rk-script:t1]] hi", "client_msg_id": "c1"})
    rec.complete(op, "ok", {"work_id": "w1", "input_id": "i1"})
    rec.observe(before)
    if fault:
        rec.fault("tree_kill", pids=[1, 2])
    rec.observe(after, quiescent=True)
    ledger = [{"event": "request", "seq": 1, "time": ledger_time, "request_id": "w1.s0.a1",
               "request_id_source": "header", "response_id": "chatcmpl-1", "attempt": 1, "script_id": "t1",
               "step": 0}]
    return Evidence(rec.history, ledger, WitnessLog([], list(executions), None))


def _v(results):
    return {r.clause_id: r.verdict for r in results}


def test_honest_unknown_write_after_a_crash_is_valid():
    ev = _run({"tool_calls": [_call("dispatched")]}, {"tool_calls": [_call("outcome_unknown")]},
              executions=[_probe(emitted=False)])
    got = _v(check_tool_facts(ev))
    assert got == {"FA-05": Verdict.VALID, "FA-06": Verdict.UNKNOWN, "EFF-01": Verdict.VALID}


def test_a_call_that_ran_reported_never_started_breaks_fa05():
    ev = _run({"tool_calls": [_call("dispatched")]}, {"tool_calls": [_call("never_started")]},
              executions=[_probe()])
    got = _v(check_tool_facts(ev))
    assert got["FA-05"] is Verdict.INVALID and got["EFF-01"] is Verdict.INVALID


def test_a_result_the_child_never_wrote_breaks_fa06():
    ev = _run({"tool_calls": [_call("dispatched")]}, {"tool_calls": [_call("result_committed")]},
              executions=[_probe(emitted=False)])
    assert _v(check_tool_facts(ev))["FA-06"] is Verdict.INVALID


def test_a_result_the_child_wrote_is_a_real_one():
    ev = _run({"tool_calls": [_call("dispatched")]}, {"tool_calls": [_call("result_committed")]},
              executions=[_probe(emitted=True)])
    assert _v(check_tool_facts(ev))["FA-06"] is Verdict.VALID


def test_an_old_witness_log_cannot_say_whether_a_result_was_written():
    ev = _run({"tool_calls": [_call("dispatched")]}, {"tool_calls": [_call("result_committed")]},
              executions=[_probe(emitted=None)])
    assert _v(check_tool_facts(ev))["FA-06"] is Verdict.VALID  # finished: the only fact the old log holds


def test_a_committed_result_lost_after_a_fault_breaks_fa06():
    ev = _run({"tool_calls": [_call("result_committed")]}, {"tool_calls": [_call("outcome_unknown")]},
              executions=[_probe()])
    assert _v(check_tool_facts(ev))["FA-06"] is Verdict.INVALID


def test_a_dropped_unknown_call_breaks_eff01():
    ev = _run({"tool_calls": [_call("dispatched")]}, {"tool_calls": []}, executions=[_probe()])
    assert _v(check_tool_facts(ev))["EFF-01"] is Verdict.INVALID


def test_more_committed_calls_than_finished_executions_is_fabricated():
    calls = [_call("result_committed", pid=None, call_id="c1"), _call("result_committed", pid=None, call_id="c2")]
    ev = _run({"tool_calls": []}, {"tool_calls": calls}, executions=[_probe()], fault=False)
    assert _v(check_tool_facts(ev))["FA-06"] is Verdict.INVALID


def test_no_tool_evidence_is_unknown():
    ev = _run({"tool_calls": []}, {"tool_calls": []})
    assert set(_v(check_tool_facts(ev)).values()) == {Verdict.UNKNOWN}


def test_known_receipt_kept_and_attributed_is_valid():
    ev = _run({"usage_receipts": [_receipt()]}, {"usage_receipts": [_receipt()]})
    assert _v(check_receipt_facts(ev)) == {"FA-10": Verdict.VALID, "FA-16": Verdict.VALID}


def test_a_known_receipt_turned_unknown_breaks_fa10():
    ev = _run({"usage_receipts": [_receipt()]}, {"usage_receipts": [_receipt("unknown")]})
    assert _v(check_receipt_facts(ev))["FA-10"] is Verdict.INVALID


def test_a_known_receipt_gone_breaks_fa10():
    ev = _run({"usage_receipts": [_receipt()]}, {"usage_receipts": []})
    assert _v(check_receipt_facts(ev))["FA-10"] is Verdict.INVALID


def test_a_late_receipt_moved_to_another_item_breaks_fa16():
    ev = _run({"usage_receipts": []}, {"usage_receipts": [_receipt(work_id="w2")]})
    assert _v(check_receipt_facts(ev))["FA-16"] is Verdict.INVALID


def test_without_a_fault_receipts_are_not_judged():
    ev = _run({"usage_receipts": [_receipt()]}, {"usage_receipts": []}, fault=False)
    assert set(_v(check_receipt_facts(ev)).values()) == {Verdict.UNKNOWN}


def test_an_attempt_sent_after_the_fault_is_not_late():
    ev = _run({"usage_receipts": []}, {"usage_receipts": [_receipt(work_id="w2")]}, ledger_time=99.0)
    assert _v(check_receipt_facts(ev))["FA-16"] is Verdict.UNKNOWN


def _inflight_run(receipts, *, items=None, answered=False) -> Evidence:
    times = iter(range(1, 10_000))
    rec = Recorder(clock=lambda: float(next(times)))
    op = rec.invoke("submit", {"session_id": "s1", "text": "[[rk-script:t1]] hi", "client_msg_id": "c1"})
    rec.complete(op, "ok", {"work_id": "w1", "input_id": "i1"})
    fault = rec.fault("tree_kill", pids=[1])
    rec.observe({"usage_receipts": receipts, "work_items": items if items is not None else [
        {"work_id": "w1", "desired_state": "done", "status": "finished", "reason_code": None}]}, quiescent=True)
    ledger = [{"event": "request", "seq": 1, "time": fault.time - 0.5, "request_id": "w1.s0.a1",
               "request_id_source": "header", "response_id": "chatcmpl-1", "attempt": 1, "script_id": "t1",
               "step": 0}]
    if answered:
        ledger.append({"event": "response", "seq": 1, "time": fault.time - 0.2, "delivered": True,
                       "response_id_sent": True, "usage_reported": {"prompt_tokens": 5, "completion_tokens": 2}})
    return Evidence(rec.history, ledger, WitnessLog([], [], None))


def test_an_attempt_in_flight_keeps_one_unknown_receipt():
    got = _v(check_inflight_attempts(_inflight_run([_receipt("unknown")])))
    assert got == {"USG-01": Verdict.VALID, "FA-04": Verdict.VALID}


def test_an_attempt_in_flight_without_a_receipt_breaks_usg01():
    got = _v(check_inflight_attempts(_inflight_run([])))
    assert got == {"USG-01": Verdict.INVALID, "FA-04": Verdict.INVALID}


def test_usage_invented_for_a_lost_response_breaks_fa04():
    got = _v(check_inflight_attempts(_inflight_run([_receipt("known")])))
    assert got == {"USG-01": Verdict.VALID, "FA-04": Verdict.INVALID}


def test_an_answered_attempt_is_not_in_flight():
    got = _v(check_inflight_attempts(_inflight_run([], answered=True)))
    assert set(got.values()) == {Verdict.UNKNOWN}


def test_work_left_running_without_a_reason_breaks_fa04():
    items = [{"work_id": "w1", "desired_state": "run", "status": "queued", "reason_code": None}]
    assert _v(check_inflight_attempts(_inflight_run([_receipt("unknown")], items=items)))["FA-04"] is Verdict.INVALID
