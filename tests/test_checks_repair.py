"""Context repair judged from the provider's record of each request and the witness log (checks_repair)."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_repair import (
    check_input_once,
    check_interrupted_response,
    check_no_replay,
    check_repaired_slots,
    slots,
)
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.witness import Execution, WitnessLog
from recoverykit.model.catalogue import Verdict

TAG = "[[rk-script:t1]] request 1"


def _m(role, calls=(), answers=None, sha="x", tokens=(), head="", length=1):
    return {"role": role, "calls": list(calls), "answers": answers, "len": length, "head": head, "sha": sha,
            "probe_tokens": list(tokens)}


def _user():
    return _m("user", sha="u1", head=TAG)


def _req(seq, time, step, messages):
    return {"event": "request", "seq": seq, "time": time, "request_id": f"r{seq}", "script_id": "t1", "step": step,
            "messages": messages}


def _resp(seq, time, tokens=(), ids=(), delivered=True, text_sent=""):
    return {"event": "response", "seq": seq, "time": time, "delivered": delivered, "status": 200, "script_id": "t1",
            "probe_tokens": list(tokens), "call_ids": list(ids), "text_sent": text_sent}


def _history(*faults, submits=1):
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 0.1
    rec.complete(rec.invoke("start", {}), "ok", {})
    for n in range(submits):
        rec.complete(rec.invoke("submit", {"text": TAG, "client_msg_id": f"c{n}"}), "ok", {"work_id": "w1"})
    for t in faults:
        rec.now = t
        rec.fault("tree_kill", pids=[1])
    return rec.history


def _v(results):
    return {r.clause_id: r.verdict for r in results}


def _run(ex):
    return Execution(ex[0], ex[1], {"probe_unknown": "unknown", "probe_read": "read_only"}[ex[1]], 9, 1.0, ex[2],
                     ex[3], "ok", 0, emitted=ex[4])


def _witness(*executions):
    return WitnessLog([], [_run(e) for e in executions], None)


# A write whose probe never wrote its result, a crash at 1.5; the recovery turn's model makes a read, named
# call_0 again (ids reused across responses); the write's placeholder is P, the read's real result R.
WRITE, READ = "t1.0.1.0", "t1.1.1.0"
LEDGER_START = [_req(1, 1.0, 0, [_user()]), _resp(1, 1.1, [WRITE], ["call_0"])]
AFTER_CRASH = _req(2, 2.0, 1, [_user(), _m("assistant", ["call_0"]), _m("tool", answers="call_0", sha="P")])
READ_DONE = _resp(2, 2.1, [READ], ["call_0"])


def _third(first_answer, second_answer):
    return _req(3, 3.0, 2, [_user(), _m("assistant", ["call_0"]), first_answer, _m("assistant", ["call_0"]),
                            second_answer])


REAL_READ = _m("tool", answers="call_0", sha="R", tokens=[READ])


def test_each_result_at_its_nearest_call_with_a_stable_placeholder_holds():
    ledger = [*LEDGER_START, AFTER_CRASH, READ_DONE, _third(_m("tool", answers="call_0", sha="P"), REAL_READ),
              _req(4, 4.0, 2, _third(_m("tool", answers="call_0", sha="P"), REAL_READ)["messages"])]
    got = _v(check_repaired_slots(Evidence(_history(1.5), ledger)))
    assert got == {"CTX-04": Verdict.VALID, "CTX-06": Verdict.VALID, "CTX-07": Verdict.VALID}


def test_a_later_calls_answer_displacing_a_placeholder_breaks_ctx06_and_ctx07():
    ledger = [*LEDGER_START, AFTER_CRASH, READ_DONE,
              _third(_m("tool", answers="call_0", sha="R", tokens=[READ]), REAL_READ)]
    got = _v(check_repaired_slots(Evidence(_history(1.5), ledger)))
    assert got["CTX-06"] is Verdict.INVALID  # another call's real result sent as the write's


def test_a_placeholder_changing_from_request_to_request_breaks_ctx07():
    ledger = [*LEDGER_START, AFTER_CRASH, READ_DONE, _third(_m("tool", answers="call_0", sha="P2"), REAL_READ)]
    assert _v(check_repaired_slots(Evidence(_history(1.5), ledger)))["CTX-07"] is Verdict.INVALID


def test_a_real_result_replaced_by_a_placeholder_breaks_ctx04():
    ledger = [*LEDGER_START, AFTER_CRASH, READ_DONE, _third(_m("tool", answers="call_0", sha="P"), REAL_READ),
              _third(_m("tool", answers="call_0", sha="P"), _m("tool", answers="call_0", sha="Q")) | {"seq": 4,
                                                                                                   "time": 4.0}]
    assert _v(check_repaired_slots(Evidence(_history(1.5), ledger)))["CTX-04"] is Verdict.INVALID


def test_no_restart_or_single_requests_are_not_judged():
    got = _v(check_repaired_slots(Evidence(_history(), [*LEDGER_START])))
    assert set(got.values()) == {Verdict.UNKNOWN}


def test_the_input_re_appended_after_a_restart_breaks_ctx01():
    once = Evidence(_history(1.5), [*LEDGER_START, AFTER_CRASH])
    assert _v(check_input_once(once)) == {"CTX-01": Verdict.VALID}
    twice = _req(2, 2.0, 1, [_user(), _m("assistant", ["call_0"]), _m("tool", answers="call_0"), _user()])
    assert _v(check_input_once(Evidence(_history(1.5), [*LEDGER_START, twice]))) == {"CTX-01": Verdict.INVALID}
    assert _v(check_input_once(Evidence(_history(1.5, submits=2), [*LEDGER_START, twice]))) == {
        "CTX-01": Verdict.VALID}  # the user really sent it twice
    assert _v(check_input_once(Evidence(_history(), [*LEDGER_START, twice]))) == {"CTX-01": Verdict.UNKNOWN}


def test_a_committed_call_run_again_after_a_restart_breaks_ctx02():
    ledger = [*LEDGER_START, AFTER_CRASH, READ_DONE, _third(_m("tool", answers="call_0", sha="P"), REAL_READ)]
    ok = _witness((WRITE, "probe_unknown", 1.05, 1.2, False), (READ, "probe_read", 2.2, 2.3, True))
    assert _v(check_no_replay(Evidence(_history(1.5, 3.5), ledger, ok))) == {
        "CTX-02": Verdict.VALID, "CTX-12": Verdict.VALID}
    replayed = _witness((WRITE, "probe_unknown", 1.05, 1.2, False), (READ, "probe_read", 2.2, 2.3, True),
                        (READ, "probe_read", 3.6, 3.7, True))
    assert _v(check_no_replay(Evidence(_history(1.5, 3.5), ledger, replayed)))["CTX-02"] is Verdict.INVALID
    unknown_again = _witness((WRITE, "probe_unknown", 1.05, 1.2, False), (WRITE, "probe_unknown", 1.8, 1.9, True))
    assert _v(check_no_replay(Evidence(_history(1.5), ledger, unknown_again)))["CTX-02"] is Verdict.INVALID


def test_an_unsafe_tool_run_after_a_write_was_left_unknown_breaks_ctx12():
    granted = _witness((WRITE, "probe_unknown", 1.05, 1.2, False), ("t1.1.1.0", "probe_unknown", 2.2, 2.3, True))
    got = _v(check_no_replay(Evidence(_history(1.5), [*LEDGER_START], granted)))
    assert got["CTX-12"] is Verdict.INVALID
    assert _v(check_no_replay(Evidence(_history(1.5), [*LEDGER_START], None))) == {
        "CTX-02": Verdict.UNKNOWN, "CTX-12": Verdict.UNKNOWN}


PARTIAL = "The answer comes in "


def _cut_then(messages, *faults):
    ledger = [_req(1, 1.0, 0, [_user()]), _resp(1, 1.1, delivered=False, text_sent=PARTIAL),
              _req(2, 2.0, 0, messages)]
    return Evidence(_history(*faults), ledger)


def test_a_cut_response_kept_with_a_marker_holds_ctx10():
    kept = [_user(), _m("assistant", head=PARTIAL + "[interrupted]", length=len(PARTIAL) + 13)]
    assert _v(check_interrupted_response(_cut_then(kept))) == {"CTX-10": Verdict.VALID}


def test_a_cut_response_dropped_or_unmarked_breaks_ctx10():
    assert _v(check_interrupted_response(_cut_then([_user()]))) == {"CTX-10": Verdict.INVALID}
    bare = [_user(), _m("assistant", head=PARTIAL, length=len(PARTIAL))]
    assert _v(check_interrupted_response(_cut_then(bare))) == {"CTX-10": Verdict.INVALID}


def test_a_fragment_the_runtime_died_holding_is_not_judged():
    assert _v(check_interrupted_response(_cut_then([_user()], 1.5))) == {"CTX-10": Verdict.UNKNOWN}
    # killed while the stream was held: the provider writes the cut's record after the kill
    assert _v(check_interrupted_response(_cut_then([_user()], 1.05))) == {"CTX-10": Verdict.UNKNOWN}


def test_a_result_of_an_earlier_attempt_of_the_same_call_is_its_own():
    """A step asked twice gets two tokens for one call: either attempt's real result answers that call."""
    again = _resp(3, 2.2, ["t1.1.2.0"], ["call_0"])
    ledger = [*LEDGER_START, AFTER_CRASH, READ_DONE, again, _third(_m("tool", answers="call_0", sha="P"), REAL_READ)]
    assert _v(check_repaired_slots(Evidence(_history(1.5), ledger)))["CTX-06"] is not Verdict.INVALID


def test_a_kept_partial_is_no_step_when_calls_are_named():
    """An interrupted answer kept before a later call does not shift which step that call belongs to."""
    ledger = [_req(1, 1.0, 0, [_user()]), _resp(1, 1.1, delivered=False, text_sent=PARTIAL),
              _req(2, 2.0, 0, [_user(), _m("assistant", head=PARTIAL + "[x]", length=40)]),
              _resp(2, 2.1, [WRITE], ["call_0"]),
              _req(3, 3.0, 1, [_user(), _m("assistant", head=PARTIAL + "[x]", length=40), _m("assistant", ["call_0"]),
                               _m("tool", answers="call_0", sha="R", tokens=[WRITE])])]
    (slot,) = slots(Evidence(_history(), ledger))
    assert (slot.step, slot.real, slot.foreign) == (0, True, [])


def _receipts(*receipts):
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 0.1
    rec.complete(rec.invoke("start", {}), "ok", {})
    rec.now = 5.0
    rec.observe({"work_items": [], "usage_receipts": list(receipts)}, quiescent=True)
    return rec.history


def test_known_usage_never_reported_breaks_ctx04():
    ledger = [*LEDGER_START, AFTER_CRASH, READ_DONE, _third(_m("tool", answers="call_0", sha="P"), REAL_READ),
              _req(4, 4.0, 2, _third(_m("tool", answers="call_0", sha="P"), REAL_READ)["messages"])]
    made_up = {"request_id": "repair:t1", "usage": "known", "prompt_tokens": 42, "completion_tokens": 0}
    assert _v(check_repaired_slots(Evidence(_receipts(made_up), ledger)))["CTX-04"] is Verdict.INVALID
    zero = {"request_id": "r1", "usage": "known", "prompt_tokens": 0, "completion_tokens": 0}
    assert _v(check_repaired_slots(Evidence(_receipts(zero), ledger)))["CTX-04"] is Verdict.VALID


def test_a_result_the_runtime_had_answered_by_a_placeholder_breaks_ctx04():
    """The read ran and wrote its result while the runtime stayed up: the next request must carry it."""
    wrote = _witness((READ, "probe_read", 2.2, 2.3, True))
    ledger = [*LEDGER_START, AFTER_CRASH, READ_DONE]
    lost = _third(_m("tool", answers="call_0", sha="P"), _m("tool", answers="call_0", sha="U"))
    assert _v(check_repaired_slots(Evidence(_history(1.5), [*ledger, lost], wrote)))["CTX-04"] is Verdict.INVALID
    kept = _third(_m("tool", answers="call_0", sha="P"), REAL_READ)
    assert _v(check_repaired_slots(Evidence(_history(1.5), [*ledger, kept], wrote)))["CTX-04"] is Verdict.VALID
    # a process went down while the read ran: the result may be lost for good, not judged
    assert _v(check_repaired_slots(Evidence(_history(1.5, 2.25), [*ledger, lost], wrote)))["CTX-04"] is \
        Verdict.UNKNOWN
