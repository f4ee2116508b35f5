"""Run-intent checks on hand-made evidence: an honest run passes, each broken one fails naming its clause."""

from __future__ import annotations

import hashlib

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_inputs import INPUT_CRASH, check_run_intent_kept, check_unacknowledged_inputs
from recoverykit.conformance.checks_intent import (
    check_input_priority,
    check_legacy_paused,
    check_recovery_disabled,
    check_runnable_queued,
    check_stop_first,
    check_stops_during_recovery,
)
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.witness import Execution, WitnessLog
from recoverykit.model.catalogue import Verdict

FIRST, SECOND = "[[rk-script:t1]] request 1", "[[rk-script:t1]] request 2"


def _msg(role: str, text: str = "") -> dict:
    return {"role": role, "calls": [], "answers": None, "len": len(text), "head": text[:160],
            "sha": hashlib.sha256(text.encode()).hexdigest()[:16]}


class Ledger:
    def __init__(self) -> None:
        self.records: list[dict] = []

    def attempt(self, step: int, sent: float, answered: float | None, messages: list[dict], *, tools: int = 0,
                delivered: bool = True, steps: int = 3) -> None:
        seq = len(self.records) + 1
        self.records.append({"event": "request", "seq": seq, "time": sent, "request_id": f"r{seq}",
                             "request_id_source": "header", "script_id": "t1", "step": step, "script_steps": steps,
                             "messages": messages})
        if answered is not None:
            self.records.append({"event": "response", "seq": seq, "time": answered, "delivered": delivered,
                                 "probe_tokens": [f"t1.{step}.1.{i}" for i in range(tools)]})


def _recorder() -> Recorder:
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 1.0
    return rec


def _submit(rec: Recorder, at: float, text: str, cid: str, work_id: str = "w1", ok: bool = True) -> None:
    rec.now = at
    op = rec.invoke("submit", {"session_id": "s1", "text": text, "client_msg_id": cid})
    if ok:
        rec.complete(op, "ok", {"work_id": work_id, "input_id": f"in-{cid}"})
    else:
        rec.complete(op, "info", {"code": "crashed"})


def _fault(rec: Recorder, at: float, kind: str = "tree_kill", **detail) -> None:
    rec.now = at
    rec.fault(kind, **detail)


def _v(results) -> dict:
    out: dict = {}
    for r in results:
        out.setdefault(r.clause_id, []).append(r.verdict)
    return {k: v[0] if len(v) == 1 else v for k, v in out.items()}


# --- CTL-05 / FA-14: new input --------------------------------------------------------------------------------

def _input_run(kill_at: float | None = 1.8) -> Recorder:
    rec = _recorder()
    _submit(rec, 1.0, FIRST, "c1")
    if kill_at is not None:
        _fault(rec, kill_at)
    _submit(rec, 3.0, SECOND, "c2", work_id="w2")
    return rec


def test_input_steered_into_the_recovered_turn_holds():
    led = Ledger()
    led.attempt(0, 1.5, 1.8, [_msg("user", FIRST)], delivered=False)  # cut by the kill
    led.attempt(0, 3.5, 4.0, [_msg("user", FIRST), _msg("user", SECOND)])
    ev = Evidence(_input_run().history, led.records)
    assert _v(check_input_priority(ev)) == {"CTL-05": Verdict.VALID, "FA-14": Verdict.VALID}


def test_the_turn_in_flight_may_finish_before_the_queued_input():
    led = Ledger()
    led.attempt(0, 1.5, 1.8, [_msg("user", FIRST)], delivered=False)
    led.attempt(0, 2.5, 3.2, [_msg("user", FIRST)], tools=1)  # recovery's request, in flight at the input
    led.attempt(1, 3.5, 4.0, [_msg("user", FIRST), _msg("assistant"), _msg("tool", "ok")])  # the same turn
    led.attempt(2, 4.5, 5.0, [_msg("user", FIRST), _msg("assistant"), _msg("tool", "ok"), _msg("assistant", "done"),
                              _msg("user", SECOND)])
    ev = Evidence(_input_run().history, led.records)
    assert _v(check_input_priority(ev)) == {"CTL-05": Verdict.VALID, "FA-14": Verdict.VALID}


def test_the_old_continuation_going_ahead_of_the_input_breaks_ctl05_and_fa14():
    led = Ledger()
    led.attempt(0, 1.5, 1.8, [_msg("user", FIRST)], delivered=False)
    led.attempt(0, 3.5, 4.0, [_msg("user", FIRST)], tools=1)  # decided after the input: without it
    led.attempt(1, 4.5, 5.0, [_msg("user", FIRST), _msg("assistant"), _msg("tool", "ok"), _msg("user", SECOND)])
    ev = Evidence(_input_run().history, led.records)
    assert _v(check_input_priority(ev)) == {"CTL-05": Verdict.INVALID, "FA-14": Verdict.INVALID}


def test_input_without_a_restart_counts_for_ctl05_only():
    led = Ledger()
    led.attempt(0, 1.5, 3.2, [_msg("user", FIRST)], tools=1)
    led.attempt(1, 3.5, 4.0, [_msg("user", FIRST), _msg("assistant"), _msg("tool", "ok"), _msg("user", SECOND)])
    ev = Evidence(_input_run(kill_at=None).history, led.records)
    assert _v(check_input_priority(ev)) == {"CTL-05": Verdict.VALID, "FA-14": Verdict.UNKNOWN}


# --- FA-14: Pause during recovery -----------------------------------------------------------------------------

def _paused_during_recovery(kill_at: float | None = 1.8) -> Recorder:
    rec = _recorder()
    _submit(rec, 1.0, FIRST, "c1")
    if kill_at is not None:
        _fault(rec, kill_at)
    rec.now = 3.0
    rec.complete(rec.invoke("pause", {"work_id": "w1"}), "ok", {})
    return rec


def test_a_pause_during_recovery_that_wins_holds_fa14():
    led = Ledger()
    led.attempt(0, 1.5, 1.8, [_msg("user", FIRST)], delivered=False)
    led.attempt(0, 2.5, 3.5, [_msg("user", FIRST)], tools=1)  # in flight at the pause: may finish
    ev = Evidence(_paused_during_recovery().history, led.records, WitnessLog([], [], None))
    assert _v(check_stops_during_recovery(ev)) == {"FA-14": Verdict.VALID}


def test_a_tool_started_after_a_pause_during_recovery_breaks_fa14():
    led = Ledger()
    led.attempt(0, 1.5, 1.8, [_msg("user", FIRST)], delivered=False)
    led.attempt(0, 2.5, 3.5, [_msg("user", FIRST)], tools=1)
    probe = Execution("t1.0.1.0", "probe_unknown", "unknown", 9, 3.6, 3.6, 4.0, "ok", 0)
    ev = Evidence(_paused_during_recovery().history, led.records, WitnessLog([], [probe], None))
    assert _v(check_stops_during_recovery(ev)) == {"FA-14": Verdict.INVALID}


def test_a_pause_with_no_restart_before_it_is_not_during_recovery():
    led = Ledger()
    led.attempt(0, 2.5, 3.5, [_msg("user", FIRST)], tools=1)
    ev = Evidence(_paused_during_recovery(kill_at=None).history, led.records, WitnessLog([], [], None))
    assert _v(check_stops_during_recovery(ev)) == {"FA-14": Verdict.UNKNOWN}


# --- INP-02 / FA-03: crashes at input acceptance --------------------------------------------------------------

DRAFT = "[[rk-script:t1]] a draft"


def _acceptance_run(copies_saved: int = 1) -> Recorder:
    rec = _recorder()
    _submit(rec, 1.0, DRAFT, "c-draft", ok=False)
    _fault(rec, 1.1, INPUT_CRASH, point="input.accept.before", client_msg_id="c-draft", text=DRAFT)
    _fault(rec, 1.2)
    _submit(rec, 2.0, FIRST, "c1", ok=False)
    _fault(rec, 2.1, INPUT_CRASH, point="input.accept.after", client_msg_id="c1", text=FIRST)
    _fault(rec, 2.2)
    _submit(rec, 3.0, FIRST, "c1")
    rec.now = 5.0
    inputs = [{"input_id": f"in-c1-{i}", "client_msg_id": "c1", "text": FIRST} for i in range(copies_saved)]
    rec.observe({"work_items": [{"work_id": "w1", "inputs": inputs}]}, quiescent=True)
    return rec


def test_a_draft_never_shown_and_an_input_saved_once_hold():
    led = Ledger()
    led.attempt(0, 3.5, 4.0, [_msg("user", FIRST)], steps=1)
    ev = Evidence(_acceptance_run().history, led.records)
    assert _v(check_unacknowledged_inputs(ev)) == {"INP-02": Verdict.VALID, "FA-03": Verdict.VALID}


def test_a_draft_sent_to_the_model_breaks_inp02():
    led = Ledger()
    led.attempt(0, 3.5, 4.0, [_msg("user", DRAFT), _msg("user", FIRST)], steps=1)
    ev = Evidence(_acceptance_run().history, led.records)
    assert _v(check_unacknowledged_inputs(ev)) == {"INP-02": Verdict.INVALID, "FA-03": Verdict.INVALID}


def test_an_input_re_appended_after_the_crash_breaks_fa03():
    led = Ledger()
    led.attempt(0, 3.5, 4.0, [_msg("user", FIRST), _msg("user", FIRST)], steps=1)
    ev = Evidence(_acceptance_run().history, led.records)
    assert _v(check_unacknowledged_inputs(ev)) == {"INP-02": Verdict.VALID, "FA-03": Verdict.INVALID}
    twice = Evidence(_acceptance_run(copies_saved=2).history, Ledger().records)
    assert _v(check_unacknowledged_inputs(twice))["FA-03"] is Verdict.INVALID


def test_no_crash_at_acceptance_judges_nothing():
    rec = _recorder()
    _submit(rec, 1.0, FIRST, "c1")
    assert set(_v(check_unacknowledged_inputs(Evidence(rec.history, []))).values()) == {Verdict.UNKNOWN}


# --- RI-01: the run intent across restarts --------------------------------------------------------------------

def _item(cv: int = 2, text: str = FIRST, policy: str = "automatic") -> dict:
    return {"work_id": "w1", "session_id": "s1", "kind": "chat_request", "desired_state": "paused",
            "control_version": cv, "recovery_policy": policy, "host_id": "host-a", "parent_id": None,
            "inputs": [{"input_id": "in-c1", "client_msg_id": "c1", "text": text}]}


def _intent_run(after: dict, restart: bool = True) -> Recorder:
    rec = _recorder()
    _submit(rec, 1.0, FIRST, "c1")
    rec.now = 2.0
    rec.observe({"work_items": [_item()]})
    if restart:
        _fault(rec, 3.0)
    rec.now = 4.0
    rec.observe({"work_items": [after]}, quiescent=True)
    return rec


def test_a_run_intent_kept_across_the_restart_holds_ri01():
    assert _v(check_run_intent_kept(Evidence(_intent_run(_item()).history))) == {"RI-01": Verdict.VALID}


def test_a_control_version_that_went_back_breaks_ri01():
    assert _v(check_run_intent_kept(Evidence(_intent_run(_item(cv=1)).history))) == {"RI-01": Verdict.INVALID}


def test_a_changed_policy_or_input_text_breaks_ri01():
    for after in (_item(policy="disabled"), _item(text=FIRST + " (edited)")):
        assert _v(check_run_intent_kept(Evidence(_intent_run(after).history))) == {"RI-01": Verdict.INVALID}


def test_no_restart_judges_no_run_intent():
    assert _v(check_run_intent_kept(Evidence(_intent_run(_item(), restart=False).history))) == {
        "RI-01": Verdict.UNKNOWN}


# --- RI-06: automatic recovery disabled -----------------------------------------------------------------------

def _disabled_run(resume_at: float = 4.0) -> Recorder:
    rec = _recorder()
    _submit(rec, 1.0, FIRST, "c1")
    _fault(rec, 1.8)
    rec.now = 2.0
    rec.complete(rec.invoke("start", {"failpoints": "", "automatic_recovery": False}), "ok", {})
    rec.now = resume_at
    rec.complete(rec.invoke("resume", {"work_id": "w1"}), "ok", {})
    return rec


def test_interrupted_work_waits_for_resume_when_recovery_is_disabled():
    led = Ledger()
    led.attempt(0, 1.5, 1.8, [_msg("user", FIRST)], delivered=False)
    led.attempt(0, 4.5, 5.0, [_msg("user", FIRST)], steps=1)  # after the user's Resume
    assert _v(check_recovery_disabled(Evidence(_disabled_run().history, led.records))) == {"RI-06": Verdict.VALID}


def test_interrupted_work_recovered_though_disabled_breaks_ri06():
    led = Ledger()
    led.attempt(0, 1.5, 1.8, [_msg("user", FIRST)], delivered=False)
    led.attempt(0, 2.5, 3.0, [_msg("user", FIRST)], steps=1)  # before any Resume
    assert _v(check_recovery_disabled(Evidence(_disabled_run().history, led.records))) == {"RI-06": Verdict.INVALID}


def test_no_disabling_start_judges_nothing():
    rec = _recorder()
    _submit(rec, 1.0, FIRST, "c1")
    assert _v(check_recovery_disabled(Evidence(rec.history, []))) == {"RI-06": Verdict.UNKNOWN}


# --- RI-07: an old paused record -----------------------------------------------------------------------------

LEGACY = "[[rk-script:t1]] an old request"


def _legacy_run(status: str = "paused", desired: str = "paused", reason: str | None = "paused_unknown_reason"):
    rec = _recorder()
    rec.now = 2.0
    op = rec.invoke("plant_paused_record", {"session_id": "s1", "text": LEGACY, "client_msg_id": "c0",
                                            "reason": "paused_recoverable_v0"})
    rec.complete(op, "ok", {"work_id": "w0", "input_id": "in-c0"})
    rec.now = 5.0
    rec.observe({"work_items": [{"work_id": "w0", "status": status, "desired_state": desired,
                                 "reason_code": reason}]}, quiescent=True)
    return rec


def test_an_old_paused_record_kept_paused_holds_ri07():
    assert _v(check_legacy_paused(Evidence(_legacy_run().history, []))) == {"RI-07": Verdict.VALID}


def test_an_old_paused_record_resumed_breaks_ri07():
    led = Ledger()
    led.attempt(0, 3.0, 3.5, [_msg("user", LEGACY)], steps=1)
    assert _v(check_legacy_paused(Evidence(_legacy_run().history, led.records))) == {"RI-07": Verdict.INVALID}
    for broken in (_legacy_run(status="queued", desired="run", reason="queued"), _legacy_run(reason=None)):
        assert _v(check_legacy_paused(Evidence(broken.history, []))) == {"RI-07": Verdict.INVALID}


def test_no_planted_record_judges_nothing():
    assert _v(check_legacy_paused(Evidence(_recorder().history, []))) == {"RI-07": Verdict.UNKNOWN}


# --- REC-02: the user's stop before a resource's reason -------------------------------------------------------

def _stopped_then_missing(reason: str, desired: str = "paused", resume_before: bool = False) -> Recorder:
    rec = _recorder()
    _submit(rec, 1.0, FIRST, "c1")
    rec.now = 2.0
    rec.complete(rec.invoke("pause", {"work_id": "w1"}), "ok", {})
    if resume_before:
        rec.now = 2.5
        rec.complete(rec.invoke("resume", {"work_id": "w1"}), "ok", {})
    _fault(rec, 3.0)
    _fault(rec, 3.5, "resource_missing", resource="working_dir", script_id="t1", work_id="w1")
    rec.now = 4.0
    rec.observe({"work_items": [{"work_id": "w1", "status": "paused" if desired == "paused" else "waiting",
                                 "desired_state": desired, "reason_code": reason}]}, quiescent=True)
    return rec


def test_the_users_stop_shown_before_the_resource_holds_rec02():
    assert _v(check_stop_first(Evidence(_stopped_then_missing("user_paused").history))) == {"REC-02": Verdict.VALID}


def test_a_resource_reason_over_the_users_stop_breaks_rec02():
    ev = Evidence(_stopped_then_missing("resource_missing_directory").history)
    assert _v(check_stop_first(ev)) == {"REC-02": Verdict.INVALID}


def test_a_stop_resumed_before_the_resource_went_missing_is_not_judged():
    ev = Evidence(_stopped_then_missing("resource_missing_directory", "run", resume_before=True).history)
    assert _v(check_stop_first(ev)) == {"REC-02": Verdict.UNKNOWN}


# --- REC-03: runnable work queued after a restart -------------------------------------------------------------

def _after_restart(status: str, reason: str | None, *, paused_by_user: bool = False) -> Recorder:
    rec = _recorder()
    _submit(rec, 1.0, FIRST, "c1")
    if paused_by_user:
        rec.now = 1.5
        rec.complete(rec.invoke("pause", {"work_id": "w1"}), "ok", {})
    _fault(rec, 2.0)
    rec.now = 3.0
    rec.observe({"work_items": [{"work_id": "w1", "status": status, "desired_state": "run", "reason_code": reason}]})
    return rec


def test_recovered_work_queued_or_running_holds_rec03():
    for status in ("queued", "running"):
        ev = Evidence(_after_restart(status, None).history, [])
        assert _v(check_runnable_queued(ev)) == {"REC-03": Verdict.VALID}


def test_recovered_work_parked_on_a_fault_that_never_happened_breaks_rec03():
    ev = Evidence(_after_restart("waiting", "retry_scheduled").history, [])
    assert _v(check_runnable_queued(ev)) == {"REC-03": Verdict.INVALID}


def test_a_fault_reason_with_a_failed_attempt_in_the_ledger_holds_rec03():
    led = Ledger()
    led.attempt(0, 2.5, 2.6, [_msg("user", FIRST)], delivered=False)
    led.records[-1]["status"] = 503
    ev = Evidence(_after_restart("waiting", "retry_scheduled").history, led.records)
    assert _v(check_runnable_queued(ev)) == {"REC-03": Verdict.VALID}


def test_work_the_user_paused_is_not_runnable():
    ev = Evidence(_after_restart("paused", "user_paused", paused_by_user=True).history, [])
    assert _v(check_runnable_queued(ev)) == {"REC-03": Verdict.UNKNOWN}
