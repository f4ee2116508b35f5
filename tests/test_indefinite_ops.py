"""An indefinite operation may have happened: the history checks accept either world (Jepsen's indeterminate op).

A reply ``{"type": "error", "code": "internal", "definite": false}`` means "it may have happened, or may still"
(docs/protocol.md, Errors); the kit records it as ``info``. These histories are the runtime doing what the user
asked while the reply was lost: the checks that read intent, reasons, approvals or time must not blame it. The
same histories with the control definitely refused (``fail``) or never sent still break the clauses: the checks
still fail a runtime that ignores the user.
"""

from __future__ import annotations

import pytest
from recoverykit.conformance.checker import Evidence, check, check_settled
from recoverykit.conformance.checks_goal_records import check_active_time
from recoverykit.conformance.checks_intent import check_runnable_queued
from recoverykit.conformance.checks_reasons import check_parked_reasons
from recoverykit.conformance.checks_repair import check_no_replay
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.intent import RUN, STOPPED, Intent, submits
from recoverykit.conformance.witness import Execution, WitnessLog
from recoverykit.model.catalogue import Verdict

INDEFINITE = {"code": "internal", "text": "the reply was lost"}
INPUTS = [{"client_msg_id": "c1", "input_id": "i1", "text": "[[rk-script:t1]] hi"}]


def _recorder() -> Recorder:
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 1.0
    return rec


def _tick(rec: Recorder) -> None:
    rec.now += 1.0


def _paused_after_restart(pause: str | None) -> Recorder:
    """submit (ok), pause (``pause``: ok / info / fail / None = never sent), tree kill, start: the item is shown
    paused by the user, as the runtime that performed the pause shows it."""
    rec = _recorder()
    rec.complete(rec.invoke("start", {}), "ok", {})
    op = rec.invoke("submit", {"session_id": "s1", "text": "[[rk-script:t1]] hi", "client_msg_id": "c1"})
    rec.complete(op, "ok", {"work_id": "w1", "input_id": "i1"})
    rec.observe({"work_items": [{"work_id": "w1", "status": "running", "desired_state": "run", "inputs": INPUTS}]})
    if pause is not None:
        _tick(rec)
        rec.complete(rec.invoke("pause", {"work_id": "w1"}), pause, {} if pause == "ok" else INDEFINITE)
    _tick(rec)
    rec.fault("tree_kill", via="kit")
    rec.complete(rec.invoke("start", {}), "ok", {})
    _tick(rec)
    rec.observe({"work_items": [{"work_id": "w1", "status": "paused", "desired_state": "paused",
                                 "reason_code": "user_paused", "inputs": INPUTS}]}, quiescent=True)
    return rec


def _verdicts(results) -> dict[str, Verdict]:
    return {r.clause_id: r.verdict for r in results}


@pytest.mark.parametrize("pause", ["ok", "info"])
def test_a_pause_that_may_have_happened_explains_a_paused_item(pause):
    ev = Evidence(_paused_after_restart(pause).history)
    for results in (check_parked_reasons(ev), check_runnable_queued(ev), check_settled(ev)):
        assert Verdict.INVALID not in _verdicts(results).values(), results
    assert [r.text for r in check(ev) if r.verdict is Verdict.INVALID] == []  # FA-01 too: it rests on the rest


@pytest.mark.parametrize("pause", ["fail", None])
def test_a_pause_that_did_not_happen_explains_nothing(pause):
    """The mutant-style proof: a runtime that pauses work the user never (or definitely not) paused still breaks
    RI-08, RI-02, REC-03 and FA-01."""
    ev = Evidence(_paused_after_restart(pause).history)
    got = _verdicts(check(ev))
    assert {got["RI-08"], got["RI-02"], got["REC-03"], got["FA-01"]} == {Verdict.INVALID}


def test_intent_forks_on_an_indeterminate_control_and_keeps_both_worlds():
    rec = _paused_after_restart("info")
    intent = Intent(rec.history)
    end = rec.history.events[-1].index + 1
    assert intent.possible("w1", end) == {RUN, STOPPED}
    assert not intent.meant_to_run("w1", end) and intent.maybe_stopped("w1", end)
    # a later acknowledged Resume does not settle it: the lost Pause may still take effect (Jepsen)
    rec.complete(rec.invoke("resume", {"work_id": "w1"}), "ok", {})
    assert Intent(rec.history).possible("w1", end + 2) == {RUN, STOPPED}
    sure = _paused_after_restart("ok")
    assert Intent(sure.history).possible("w1", sure.history.events[-1].index + 1) == {STOPPED}


def test_an_indefinite_stop_all_may_have_stopped_every_item():
    rec = _recorder()
    rec.complete(rec.invoke("submit", {"text": "a", "client_msg_id": "c1"}), "ok", {"work_id": "w1"})
    rec.complete(rec.invoke("stop_all", {}), "info", INDEFINITE)
    rec.complete(rec.invoke("submit", {"text": "b", "client_msg_id": "c2"}), "ok", {"work_id": "w2"})
    intent = Intent(rec.history)
    assert intent.possible("w1", 99) == {RUN, STOPPED}
    assert intent.possible("w2", 99) == {RUN, STOPPED}  # it may still happen, after w2 came
    assert intent.possible("w1", 1) == {RUN}  # before it was sent


def test_an_indefinite_submit_is_the_users_once_an_observation_shows_it():
    rec = _recorder()
    rec.complete(rec.invoke("submit", {"text": "[[rk-script:ap]] go", "client_msg_id": "c1"}), "info", INDEFINITE)
    rec.complete(rec.invoke("submit", {"text": "[[rk-script:zz]] never", "client_msg_id": "c2"}), "info", INDEFINITE)
    rec.observe({"work_items": [{"work_id": "w1", "status": "running", "desired_state": "run",
                                 "inputs": [{"client_msg_id": "c1"}]}]})
    assert [(op.value["client_msg_id"], w) for op, w in submits(rec.history)] == [("c1", "w1")]
    assert Evidence(rec.history).work_of_script() == {"ap": "w1"}


def _approved_write(submit: str) -> Evidence:
    """An unsafe write left unknown by a kill, approved by the user, run again after the restart: the repair granted
    nothing, the approval did (CTX-12 holds). Only the submit's reply differs (``ok`` / ``info``)."""
    rec = _recorder()
    op = rec.invoke("submit", {"session_id": "s1", "text": "[[rk-script:apa]] write", "client_msg_id": "c1"})
    rec.complete(op, submit, {"work_id": "w1", "input_id": "i1"} if submit == "ok" else INDEFINITE)
    rec.observe({"work_items": [{"work_id": "w1", "status": "running", "desired_state": "run",
                                 "inputs": [{"client_msg_id": "c1"}]}], "approvals": []})
    _tick(rec)
    rec.fault("tree_kill", via="kit")
    rec.complete(rec.invoke("start", {}), "ok", {})
    rec.complete(rec.invoke("approve", {"approval_id": "a1"}), "ok", {})
    _tick(rec)
    rec.observe({"work_items": [{"work_id": "w1", "status": "finished", "desired_state": "done",
                                 "inputs": [{"client_msg_id": "c1"}]}],
                 "approvals": [{"approval_id": "a1", "work_id": "w1", "status": "consumed"}]}, quiescent=True)
    def run(pid: int, started: float, finished: float | None) -> Execution:
        return Execution(probe_token="apa.1.1.0", tool="probe_unknown", effect_class="unknown", pid=pid,
                         create_time=started, started=started, finished=finished, outcome=None, exit_code=None,
                         ppid=9, emitted=finished is not None)

    witness = WitnessLog([], [run(10, 1.5, None), run(11, 3.5, 3.6)], None)
    return Evidence(rec.history, witness=witness, observes=frozenset({"work_items", "approvals"}))


@pytest.mark.parametrize("submit", ["ok", "info"])
def test_an_approved_write_is_no_repair_grant_whether_or_not_the_submit_was_answered(submit):
    assert _verdicts(check_no_replay(_approved_write(submit)))["CTX-12"] is not Verdict.INVALID


def test_an_unknown_write_run_again_with_no_approval_still_breaks_ctx12():
    ev = _approved_write("info")
    ev.history.events[-1].snapshot["approvals"] = []  # the same run, nobody approved: the repair granted it
    assert _verdicts(check_no_replay(ev))["CTX-12"] is Verdict.INVALID


def _goal_paused_then_resumed(resume: str) -> Evidence:
    rec = _recorder()
    op = rec.invoke("goal_create", {"objective": "[[rk-script:g1]] do it"})
    rec.complete(op, "ok", {"goal_id": "g1", "work_id": "w1", "revision": 1})
    rec.complete(rec.invoke("pause", {"work_id": "w1"}), "ok", {})
    rec.observe({"goals": [{"goal_id": "g1", "state": "paused", "active_time_s": 0.2}]})
    _tick(rec)
    rec.complete(rec.invoke("resume", {"work_id": "w1"}), resume, {} if resume == "ok" else INDEFINITE)
    _tick(rec)
    rec.observe({"goals": [{"goal_id": "g1", "state": "achieved", "active_time_s": 0.3}]}, quiescent=True)
    return Evidence(rec.history)


@pytest.mark.parametrize("resume", ["ok", "info"])
def test_a_resume_that_may_have_happened_lets_a_goals_active_time_grow(resume):
    assert _verdicts(check_active_time(_goal_paused_then_resumed(resume)))["USG-11"] is Verdict.VALID


def test_a_goals_active_time_growing_while_paused_with_no_resume_still_breaks_usg11():
    assert _verdicts(check_active_time(_goal_paused_then_resumed("fail")))["USG-11"] is Verdict.INVALID
