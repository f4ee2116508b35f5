"""The history the runtime sends, judged from the provider's record of each request (CTX-08, CTX-09, EFF-02)."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_requests import check_restricted_after_unknown_write, check_results_follow_calls
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.witness import Execution, WitnessLog
from recoverykit.model.catalogue import Verdict


def _m(role, calls=(), answers=None, sha="x"):
    return {"role": role, "calls": list(calls), "answers": answers, "len": 1, "head": "", "sha": sha}


def _req(seq, messages, *, time=1.0, tools=("probe_read", "probe_unknown"), script="t1"):
    return {"event": "request", "seq": seq, "time": time, "request_id": f"r{seq}", "script_id": script,
            "messages": messages, "tools_offered": list(tools)}


def _history(fault_at=None):
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 0.5
    rec.complete(rec.invoke("start", {}), "ok", {})
    if fault_at is not None:
        rec.now = fault_at
        rec.fault("tree_kill", pids=[1])
    return rec.history


def _v(results):
    return {r.clause_id: r.verdict for r in results}


GOOD = [_m("user", sha="u1"), _m("assistant", calls=["c1"]), _m("tool", answers="c1")]


def test_calls_answered_right_after_them_hold_ctx08_and_ctx09():
    ev = Evidence(_history(), [_req(1, [_m("user", sha="u1")]), _req(2, GOOD, time=2.0)])
    assert _v(check_results_follow_calls(ev)) == {"CTX-09": Verdict.VALID, "CTX-08": Verdict.VALID}


def test_a_result_without_its_call_breaks_ctx09():
    ev = Evidence(_history(), [_req(1, [_m("user"), _m("tool", answers="c1")])])
    assert _v(check_results_follow_calls(ev))["CTX-09"] is Verdict.INVALID


def test_a_result_parted_from_its_call_or_rewritten_user_messages_break_ctx08():
    apart = [_m("user", sha="u1"), _m("assistant", calls=["c1"]), _m("user", sha="u2"), _m("tool", answers="c1")]
    assert _v(check_results_follow_calls(Evidence(_history(), [_req(1, apart)])))["CTX-08"] is Verdict.INVALID
    two = [_m("user", sha="u1"), _m("user", sha="u2"), *GOOD[1:]]
    swapped = [_m("user", sha="u2"), _m("user", sha="u1"), *GOOD[1:]]
    ev = Evidence(_history(), [_req(1, two), _req(2, swapped, time=2.0)])
    assert _v(check_results_follow_calls(ev))["CTX-08"] is Verdict.INVALID
    fresh = Evidence(_history(), [_req(1, GOOD), _req(2, [_m("user", sha="u9"), *GOOD[1:]], time=2.0)])
    assert _v(check_results_follow_calls(fresh))["CTX-08"] is Verdict.VALID  # a new item without earlier turns


def _unknown_write(emitted):
    return WitnessLog([], [Execution("t1.0.1.0", "probe_unknown", "unknown", 9, 1.0, 1.0, 1.2, "ok", 0,
                                     emitted=emitted)], None)


def test_after_an_unknown_write_only_safe_tools_may_be_offered():
    ok = Evidence(_history(fault_at=1.5), [_req(1, GOOD, time=2.0, tools=("probe_read",))], _unknown_write(False))
    assert _v(check_restricted_after_unknown_write(ok)) == {"EFF-02": Verdict.VALID}
    bad = Evidence(_history(fault_at=1.5), [_req(1, GOOD, time=2.0)], _unknown_write(False))
    assert _v(check_restricted_after_unknown_write(bad)) == {"EFF-02": Verdict.INVALID}


def test_a_write_whose_result_was_emitted_or_no_restart_is_not_judged():
    emitted = Evidence(_history(fault_at=1.5), [_req(1, GOOD, time=2.0)], _unknown_write(True))
    assert _v(check_restricted_after_unknown_write(emitted)) == {"EFF-02": Verdict.UNKNOWN}
    calm = Evidence(_history(), [_req(1, GOOD, time=2.0)], _unknown_write(False))
    assert _v(check_restricted_after_unknown_write(calm)) == {"EFF-02": Verdict.UNKNOWN}


def _ambiguous(tokens_ran, final_item):
    from recoverykit.conformance.checks_requests import check_duplicate_call_ids
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 0.5
    op = rec.invoke("submit", {"session_id": "s", "text": "[[rk-script:t1]] hi", "client_msg_id": "c"})
    rec.complete(op, "ok", {"work_id": "w1", "input_id": "i"})
    rec.now = 3.0
    rec.observe({"work_items": [{"work_id": "w1", **final_item}]}, quiescent=True)
    ledger = [{"event": "request", "seq": 1, "time": 1.0, "script_id": "t1", "messages": []},
              {"event": "response", "seq": 1, "time": 1.1, "delivered": True, "call_ids": ["call_a", "call_a"],
               "probe_tokens": ["t1.0.1.0", "t1.0.1.1"]}]
    ran = [Execution(t, "probe_unknown", "unknown", 9, 1.2, 1.2, 1.3, "ok", 0) for t in tokens_ran]
    return _v(check_duplicate_call_ids(Evidence(rec.history, ledger, WitnessLog([], ran, None))))


def test_duplicate_call_ids_are_an_explicit_error_never_a_guess():
    assert _ambiguous([], {"status": "waiting", "reason_code": "retry_exhausted"}) == {"CTX-11": Verdict.VALID}
    assert _ambiguous(["t1.0.1.0"], {"status": "waiting", "reason_code": "retry_exhausted"}) \
        == {"CTX-11": Verdict.INVALID}
    assert _ambiguous([], {"status": "finished", "reason_code": "finished"}) == {"CTX-11": Verdict.INVALID}


def test_the_scripted_provider_can_answer_with_duplicate_call_ids():
    from recoverykit.conformance.provider import Planned
    from recoverykit.conformance.provider_handler import tool_calls_of
    from recoverykit.conformance.provider_script import ProviderScript

    script = ProviderScript.model_validate({"scripts": [{"id": "d", "steps": [
        {"tool_calls": [{"name": "probe_read"}, {"name": "probe_read"}], "duplicate_call_ids": True}]}]})
    s = script.scripts[0]
    ids = [c["id"] for c in tool_calls_of(Planned(1, "r", 1, s, 0, s.step(0), "chatcmpl-1"))]
    assert len(ids) == 2 and len(set(ids)) == 1
