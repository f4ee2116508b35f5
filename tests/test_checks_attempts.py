"""Receipts per attempt (USG-04, USG-18) and retry backoff (RES-03), judged from the provider's ledger: an
honest run, and one broken run per rule."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_attempts import (
    check_partial_lower_bound,
    check_receipts_rebuilt,
    check_retry_receipts,
)
from recoverykit.conformance.checks_backoff import check_backoff
from recoverykit.conformance.history import Recorder
from recoverykit.model.catalogue import Verdict

BILLED = {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}
RUNNING = {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34}


def _ledger(times=((1.0, 1.1), (2.1, 2.2), (4.2, 4.3)), steps=(0, 0, 0)) -> list[dict]:
    """Attempt 1 cut after running totals, attempt 2 a 503, attempt 3 answered whole."""
    shapes = [
        {"status": 200, "delivered": False, "cut": "scripted cut at chunk 2", "usage_billed": BILLED,
         "usage_reported": RUNNING, "usage_chunks": 2},
        {"status": 503, "delivered": True, "cut": None, "usage_billed": None, "usage_reported": None,
         "usage_chunks": 0},
        {"status": 200, "delivered": True, "cut": None, "usage_billed": BILLED, "usage_reported": BILLED,
         "usage_chunks": 6},
    ]
    out = []
    for n, ((sent, answered), step, shape) in enumerate(zip(times, steps, shapes, strict=True), start=1):
        out.append({"event": "request", "seq": n, "time": sent, "request_id": f"w1.s{step}.a{n}",
                    "request_id_source": "header", "response_id": f"chatcmpl-{n}", "script_id": "pf", "step": step,
                    "attempt": n, "script_steps": 1})
        out.append({"event": "response", "seq": n, "time": answered, "response_id_sent": shape["status"] == 200,
                    **shape})
    return out


def _receipt(n: int, usage: str, tokens: tuple[int, int] | None) -> dict:
    return {"receipt_id": f"w1.s0.a{n}", "request_id": f"w1.s0.a{n}", "work_id": "w1", "attempt": n,
            "usage": usage, "prompt_tokens": tokens[0] if tokens else None,
            "completion_tokens": tokens[1] if tokens else None}


HONEST = [_receipt(1, "partial", (30, 4)), _receipt(2, "unknown", None), _receipt(3, "known", (30, 12))]


def _evidence(receipts=HONEST, ledger=None, *, kill_at=None, scheduled=True, noticed_at=None) -> Evidence:
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 0.5
    op = rec.invoke("submit", {"session_id": "s1", "text": "[[rk-script:pf]] hi", "client_msg_id": "c1"})
    rec.complete(op, "ok", {"work_id": "w1", "input_id": "i1"})
    if noticed_at is not None:  # the runtime's own word that it had seen the cut and scheduled its retry
        rec.now = noticed_at
        rec.observe({"work_items": [{"work_id": "w1", "status": "waiting", "reason_code": "retry_scheduled"}]})
    if kill_at is not None:
        rec.now = kill_at - 0.05
        reason = "retry_scheduled" if scheduled else "running"
        rec.observe({"work_items": [{"work_id": "w1", "status": "waiting", "reason_code": reason}]})
        rec.now = kill_at
        rec.fault("tree_kill", pids=[1])
    rec.now = 10.0
    rec.observe({"usage_receipts": list(receipts), "work_items": []}, True)
    return Evidence(history=rec.history, ledger=ledger if ledger is not None else _ledger())


def _v(results):
    return {r.clause_id: r.verdict for r in results}


def test_an_honest_run_holds():
    ev = _evidence(kill_at=2.3)
    assert _v(check_retry_receipts(ev)) == {"USG-04": Verdict.VALID}
    assert _v(check_partial_lower_bound(ev)) == {"USG-18": Verdict.VALID}
    assert _v(check_backoff(ev)) == {"RES-03": Verdict.VALID}


def test_a_retry_settled_on_the_first_receipt_is_not_counted():
    merged = [_receipt(1, "known", (60, 16)), _receipt(2, "unknown", None), _receipt(3, "unknown", None)]
    result = check_retry_receipts(_evidence(merged))[0]
    assert result.verdict is Verdict.INVALID
    assert "counted" in result.text


def test_one_receipt_for_two_attempts_sharing_a_request_id():
    ledger = _ledger()
    for r in ledger:
        if r["event"] == "request":
            r["request_id"] = "w1.s0"
        r["response_id_sent"] = False
    result = check_retry_receipts(_evidence([{**_receipt(1, "partial", (30, 4)), "request_id": "w1.s0"}],
                                            ledger))[0]
    assert result.verdict is Verdict.INVALID
    assert "no receipt of its own" in result.text


def test_a_known_receipt_for_an_error_answer_counts_consumption_that_never_was():
    receipts = [HONEST[0], _receipt(2, "known", (30, 12)), HONEST[2]]
    assert check_retry_receipts(_evidence(receipts))[0].verdict is Verdict.INVALID


def test_an_unknown_receipt_after_a_restart_is_not_blamed():
    receipts = [HONEST[0], HONEST[1], _receipt(3, "unknown", None)]
    assert check_retry_receipts(_evidence(receipts, kill_at=4.5))[0].verdict is Verdict.VALID


def test_without_a_retry_with_consumption_nothing_is_judged():
    ledger = [r for r in _ledger() if r["seq"] == 3]
    assert check_retry_receipts(_evidence([HONEST[2]], ledger))[0].verdict is Verdict.UNKNOWN


def test_a_running_total_taken_as_known_breaks_the_lower_bound():
    receipts = [_receipt(1, "known", (30, 4)), *HONEST[1:]]
    result = check_partial_lower_bound(_evidence(receipts))[0]
    assert result.verdict is Verdict.INVALID
    assert "not a lower bound" in result.text


def test_a_retry_time_lost_in_a_restart_is_a_burst():
    ledger = _ledger(times=((1.0, 1.1), (2.1, 2.2), (2.4, 2.5)))
    result = check_backoff(_evidence(ledger=ledger, kill_at=2.3, noticed_at=1.15))[0]
    assert result.verdict is Verdict.INVALID
    assert "did not survive" in result.text


def test_a_restart_before_the_retry_was_scheduled_is_recovery_not_backoff():
    ledger = _ledger(times=((1.0, 1.1), (2.1, 2.2), (2.4, 2.5)))
    assert check_backoff(_evidence(ledger=ledger, kill_at=2.3, scheduled=False))[0].verdict is Verdict.UNKNOWN


def test_a_shrinking_wait_without_a_restart_is_no_backoff():
    ledger = _ledger(times=((1.0, 1.1), (2.1, 2.2), (2.3, 2.4)))  # the runtime had seen the cut by 1.15
    assert check_backoff(_evidence(ledger=ledger, noticed_at=1.15))[0].verdict is Verdict.INVALID


def test_a_client_noticing_a_cut_late_is_not_a_shrinking_backoff():
    """The gap after a cut includes the client's time to notice it: 1.0 s then 0.2 s proves nothing when the
    runtime may have waited 0.1 s, then 0.2 s. Unknown, saying why (the old check: invalid)."""
    ledger = _ledger(times=((1.0, 1.1), (2.1, 2.2), (2.3, 2.4)))
    result = check_backoff(_evidence(ledger=ledger))[0]
    assert result.verdict is Verdict.UNKNOWN
    assert "notice the cut" in result.text


def test_a_late_word_of_the_runtime_bounds_what_it_waited_after_a_cut():
    ledger = _ledger(times=((1.0, 1.1), (2.1, 2.2), (2.3, 2.4)))
    assert check_backoff(_evidence(ledger=ledger, noticed_at=2.0))[0].verdict is Verdict.UNKNOWN  # >= 0.1 s its own
    two_errors = _ledger(times=((1.0, 1.1), (2.1, 2.2), (2.3, 2.4)))
    two_errors[1].update(status=503, delivered=True, cut=None)  # an error answer: the gap is the runtime's
    assert check_backoff(_evidence(ledger=two_errors))[0].verdict is Verdict.INVALID


def test_jitter_within_a_quarter_is_allowed():
    ledger = _ledger(times=((1.0, 1.1), (2.1, 2.2), (3.0, 3.1)))  # 1.0 s, then 0.8 s
    assert check_backoff(_evidence(ledger=ledger))[0].verdict is Verdict.VALID


def test_another_model_call_while_waiting_is_an_idle_call():
    ledger = _ledger(steps=(0, 0, 1))  # after the 503 of step 0, step 1 is asked for: no retry of it
    result = check_backoff(_evidence(ledger=ledger))[0]
    assert result.verdict is Verdict.INVALID
    assert "idle model call" in result.text


def test_continuing_a_cut_answer_is_not_an_idle_call():
    ledger = _ledger(steps=(0, 1, 1))  # the cut step 0 continued from its partial text as step 1
    assert check_backoff(_evidence(ledger=ledger))[0].verdict is not Verdict.INVALID


def test_no_consecutive_faults_nothing_judged():
    ledger = [r for r in _ledger() if r["seq"] != 2]
    assert check_backoff(_evidence(ledger=ledger))[0].verdict is Verdict.UNKNOWN


def _around_restart(before: list[dict], after: list[dict], ledger: list[dict] | None = None) -> Evidence:
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 0.5
    op = rec.invoke("submit", {"session_id": "s1", "text": "[[rk-script:pf]] hi", "client_msg_id": "c1"})
    rec.complete(op, "ok", {"work_id": "w1", "input_id": "i1"})
    rec.now = 2.25
    rec.observe({"usage_receipts": before, "work_items": []})
    rec.now = 2.3
    rec.fault("tree_kill", pids=[1])
    rec.now = 10.0
    rec.observe({"usage_receipts": after, "work_items": []}, True)
    return Evidence(history=rec.history, ledger=ledger if ledger is not None else _ledger())


def test_receipts_kept_under_their_keys_hold():
    before = [HONEST[0], {**HONEST[1], "usage": "unknown"}]
    assert check_receipts_rebuilt(_around_restart(before, HONEST))[0].verdict is Verdict.VALID


EXTRA = {**_receipt(2, "unknown", None), "receipt_id": "w1.s0.a2.p99", "request_id": "w1.s0.a2.p99"}


def test_a_pending_receipt_settled_under_a_new_key_beside_it_counts_twice():
    on_the_wire = _ledger(times=((1.0, 1.1), (2.1, 2.5), (4.2, 4.3)))  # attempt 2 answered after the kill at 2.3
    result = check_receipts_rebuilt(_around_restart(HONEST[:2], [*HONEST, EXTRA], on_the_wire))[0]
    assert result.verdict is Verdict.INVALID
    assert "new key" in result.text


def test_a_later_attempt_whose_request_never_arrived_is_no_second_key():
    """After the restart the runtime opened a receipt for a new attempt (another attempt number) whose request the
    provider never received, then retried it (chaos saw it under load at provider.request.after x worker_kill)."""
    on_the_wire = _ledger(times=((1.0, 1.1), (2.1, 2.5), (4.2, 4.3)))
    lost_send = {**_receipt(4, "unknown", None), "receipt_id": "w1.s0.a4", "request_id": "w1.s0.a4"}
    result = check_receipts_rebuilt(_around_restart(HONEST[:2], [*HONEST, lost_send], on_the_wire))[0]
    assert result.verdict is Verdict.VALID


def test_a_receipt_opened_and_never_sent_before_a_crash_is_no_second_key():
    # nothing of w1 was on the wire at the kill: the receipt it opened for a request it never sent is its own
    assert check_receipts_rebuilt(_around_restart(HONEST[:2], [*HONEST, EXTRA]))[0].verdict is Verdict.VALID


def test_a_receipt_renamed_or_lost_or_changed_after_a_restart():
    renamed = [{**HONEST[0], "receipt_id": "r-new"}, *HONEST[1:]]
    assert check_receipts_rebuilt(_around_restart(HONEST[:2], renamed))[0].verdict is Verdict.INVALID
    assert check_receipts_rebuilt(_around_restart(HONEST[:2], HONEST[1:]))[0].verdict is Verdict.INVALID
    doubled = [_receipt(3, "known", (30, 12))]
    changed = [HONEST[0], HONEST[1], _receipt(3, "known", (60, 24))]
    assert check_receipts_rebuilt(_around_restart(doubled, changed))[0].verdict is Verdict.INVALID


def test_no_restart_nothing_judged():
    assert check_receipts_rebuilt(_evidence())[0].verdict is Verdict.UNKNOWN


def test_a_whole_answer_that_ended_after_a_restart_began_may_stay_unknown():
    """The restart began while attempt 3's answer was still on its way (chaos saw it 0.4 ms before the answer's
    end): the runtime may have dropped the stream unread, so its receipt may honestly say unknown."""
    unknown_last = [_receipt(1, "partial", (30, 4)), _receipt(2, "unknown", None), _receipt(3, "unknown", None)]
    assert _v(check_retry_receipts(_evidence(unknown_last, kill_at=4.25))) != {"USG-04": Verdict.INVALID}
    assert _v(check_retry_receipts(_evidence(unknown_last))) == {"USG-04": Verdict.INVALID}  # no restart: counted
