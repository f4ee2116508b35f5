"""The user's action during a fault (chaos scenarios with ``during``): a Pause or End the fault left without a
reply may have happened or not, and a refusal proves nothing wrong only for work that was already over. No
process is started here: tests/test_langgraph_adapter.py runs a case whose Pause answers only after the kill."""

from __future__ import annotations

import threading

import pytest
from recoverykit.chaos import runner
from recoverykit.chaos.cases import Case
from recoverykit.chaos.prediction import check_prediction
from recoverykit.conformance.errors import AdapterTimeout, OperationFailed
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.pacing import Pacing
from recoverykit.model.catalogue import Verdict

CASE = Case("pause_restart", "durable.write.before", 2, "tree_kill")
BEFORE = {"work_items": [{"work_id": "w1", "status": "running", "desired_state": "run", "control_version": 0,
                          "inputs": [{"text": "hi"}]}]}


def _verdict(pause: str | None, final_desired: str) -> Verdict:
    """FA-14 for one Pause completed ``pause`` (ok, info, fail, or None: never) and the final state."""
    rec = Recorder()
    op = rec.invoke("pause", {"work_id": "w1"})
    if pause is not None:
        rec.complete(op, pause, {"work_id": "w1", "control_version": 1} if pause == "ok" else {"text": "cut"})
    rec.observe({"work_items": [{**BEFORE["work_items"][0], "desired_state": final_desired}]}, True)
    [result] = check_prediction(BEFORE, rec.history, CASE, "pause")
    assert result.clause_id == "FA-14"
    return result.verdict


@pytest.mark.parametrize(("pause", "final", "verdict"), [
    ("ok", "paused", Verdict.VALID),
    ("ok", "run", Verdict.INVALID),  # an acknowledged Pause lost to the restart
    ("ok", "done", Verdict.INVALID),
    ("info", "paused", Verdict.VALID),  # the fault cut the reply: it may have happened...
    ("info", "run", Verdict.VALID),  # ...or not
    ("info", "done", Verdict.VALID),
    ("info", "cancelled", Verdict.INVALID),  # but a Pause never ends the work
    (None, "paused", Verdict.VALID),
    ("fail", "paused", Verdict.INVALID),  # a definite refusal did not happen: nothing may pause the work
])
def test_a_pause_the_fault_cut_accepts_either_state(pause, final, verdict):
    assert _verdict(pause, final) is verdict


def _call(result: dict) -> threading.Thread:
    call = threading.Thread(target=lambda: None)
    call.result = result  # type: ignore[attr-defined]
    return call


def test_a_refusal_is_accepted_only_for_work_already_over():
    refused = OperationFailed("pause", "precondition_failed", "w1 is already finished", True)
    over = {"work_items": [{**BEFORE["work_items"][0], "status": "finished", "desired_state": "done"}]}
    runner._during_outcome([("w1", _call({"error": refused}))], over)  # the point lay after the last step
    with pytest.raises(OperationFailed):  # the same refusal of running work: the case is unknown
        runner._during_outcome([("w1", _call({"error": refused}))], BEFORE)
    maybe = OperationFailed("pause", "precondition_failed", "busy", False)
    with pytest.raises(OperationFailed):
        runner._during_outcome([("w1", _call({"error": maybe}))], over)
    with pytest.raises(AdapterTimeout):  # no reply even after the restart
        runner._during_outcome([("w1", _call({}))], BEFORE)
    runner._during_outcome([("w1", _call({"reply": object()})), ("", _call({}))], BEFORE)  # input: the checker's


def test_an_action_the_hold_blocks_is_left_in_flight_after_the_grace(monkeypatch):
    """A Pause that cannot answer while the runtime is held (the held commit's lock) does not stall the case."""
    monkeypatch.setattr(runner, "DURING_GRACE_S", 0.2)
    released = threading.Event()

    class Env:
        pacing = Pacing()  # the windows at x1, as a case's environment has them

        def request_async(self, f, **fields):
            call = threading.Thread(target=released.wait, daemon=True)
            call.result = {}  # type: ignore[attr-defined]
            call.start()
            return call

    sent = runner._during(Env(), "pause", ["w1", "w2"], "pause_restart")
    assert [w for w, call in sent if call.is_alive()] == ["w1", "w2"]
    released.set()


def test_an_end_acknowledged_for_finished_work_changes_nothing():
    """end_during_recovery held at a durable write after the work's last step: the runtime acknowledges the End
    of finished work (control_version unchanged); the model's End of done work is a no-op, so done is right."""
    rec = Recorder()
    done = {**BEFORE["work_items"][0], "status": "finished", "desired_state": "done"}
    rec.complete(rec.invoke("end", {"work_id": "w1"}), "ok", {"work_id": "w1", "control_version": 0})
    rec.observe({"work_items": [done]}, True)
    [result] = check_prediction({"work_items": [done]}, rec.history, CASE, "end")
    assert result.verdict is Verdict.VALID, result.text
    rec.observe({"work_items": [{**done, "desired_state": "cancelled"}]}, True)  # finished work never un-finishes
    [result] = check_prediction({"work_items": [done]}, rec.history, CASE, "end")
    assert result.verdict is Verdict.INVALID
