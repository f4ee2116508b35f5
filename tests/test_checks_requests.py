"""The history the runtime sends, judged from the provider's record of each request (CTX-08, CTX-09, CTX-11, EFF-02)."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_requests import check_calls_fate_told, check_results_follow_calls
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


# EFF-02: a response asking for a write (t1.0.1.0, which starts and never writes its result) and a read
# (t1.0.1.1, which never starts); a kill at 1.5; the first request after it carries both calls, answered.
UNKNOWN_TEXT = "[recovery] The outcome of the call to {tool} ({id}) is unknown: it may or may not have happened."
NEVER_TEXT = "[recovery] The call to {tool} ({id}) never started; it had no effect."


def _answer(call_id, template, tool, token, *, tokens=()):
    text = template.format(tool=tool, id=call_id)
    masked = template.format(tool="\x00", id="\x00")
    return {"role": "tool", "calls": [], "answers": call_id, "len": len(text), "head": text[:160],
            "sha": str(hash(text)), "masked_sha": str(hash(masked)), "probe_tokens": list(tokens)}


def _fate_ledger(answers, *, carry=True, step_asked=1):
    first = {**_req(1, [_m("user", sha="u1")], time=1.0), "step": 0}
    response = {"event": "response", "seq": 1, "time": 1.1, "delivered": True, "call_ids": ["c0", "c1"],
                "probe_tokens": ["t1.0.1.0", "t1.0.1.1"], "tool_names": ["probe_unknown", "probe_read"]}
    history = [_m("user", sha="u1"), _m("assistant", calls=["c0", "c1"]), *answers] if carry else [_m("user", sha="u1")]
    return [first, response, {**_req(2, history, time=2.0), "step": step_asked}]


def _written(emitted=False, token="t1.0.1.0"):
    return WitnessLog([], [Execution(token, "probe_unknown", "unknown", 9, 1.0, 1.2, 1.3, "ok", 0, emitted=emitted)],
                      None)


TOLD = [_answer("c0", UNKNOWN_TEXT, "probe_unknown", "t1.0.1.0"), _answer("c1", NEVER_TEXT, "probe_read", "t1.0.1.1")]


def _eff02(ledger, witness=None, fault_at=1.5):
    return _v(check_calls_fate_told(Evidence(_history(fault_at=fault_at), ledger,
                                             _written() if witness is None else witness)))["EFF-02"]


def test_a_call_that_never_started_told_apart_from_one_whose_outcome_is_unknown_holds_eff02():
    assert _eff02(_fate_ledger(TOLD)) is Verdict.VALID


def test_the_same_words_for_both_fates_break_eff02_whatever_the_ids_and_names():
    same = [_answer("c0", UNKNOWN_TEXT, "probe_unknown", "t1.0.1.0"),
            _answer("c1", UNKNOWN_TEXT, "probe_read", "t1.0.1.1")]
    assert _eff02(_fate_ledger(same)) is Verdict.INVALID
    # an older record without masked digests: the heads, with ids, names and tokens masked, say the same
    bare = [{k: v for k, v in m.items() if k != "masked_sha"} for m in same]
    assert _eff02(_fate_ledger(bare)) is Verdict.INVALID
    told_bare = [{k: v for k, v in m.items() if k != "masked_sha"} for m in TOLD]
    assert _eff02(_fate_ledger(told_bare)) is Verdict.VALID


def test_an_unanswered_call_a_fabricated_result_or_a_dropped_step_break_eff02():
    assert _eff02(_fate_ledger(TOLD[:1])) is Verdict.INVALID  # the call that never started is left unanswered
    fabricated = [TOLD[0], _answer("c1", NEVER_TEXT, "probe_read", "t1.0.1.1", tokens=["t0.9.1.0"])]
    other = Execution("t0.9.1.0", "probe_read", "read_only", 8, 0.1, 0.2, 0.3, "ok", 0, emitted=True)
    witness = WitnessLog([], [*_written().executions, other], None)
    assert _eff02(_fate_ledger(fabricated), witness=witness) is Verdict.INVALID  # another call's real output
    echoed = [TOLD[0], _answer("c1", NEVER_TEXT, "probe_read", "t1.0.1.1", tokens=["t1.0.1.1"])]
    assert _eff02(_fate_ledger(echoed), witness=witness) is Verdict.VALID  # its own arguments, no output
    assert _eff02(_fate_ledger([], carry=False)) is Verdict.INVALID  # the new turn is not told of the calls at all
    # asking for the interrupted step again: the runtime never saved that response, so it had nothing to tell
    assert _eff02(_fate_ledger([], carry=False, step_asked=0)) is Verdict.UNKNOWN


def test_no_restart_no_witness_or_every_result_written_says_nothing_of_eff02():
    assert _eff02(_fate_ledger(TOLD), fault_at=None) is Verdict.UNKNOWN
    both = WitnessLog([], [*_written(True).executions, *_written(True, "t1.0.1.1").executions], None)
    assert _eff02(_fate_ledger(TOLD), witness=both) is Verdict.UNKNOWN
    ev = Evidence(_history(fault_at=1.5), _fate_ledger(TOLD), None)
    assert _v(check_calls_fate_told(ev)) == {"EFF-02": Verdict.UNKNOWN}


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
