"""kill -9 at every internal failpoint of the reference runtime, then restart (issue 4, Done when).

Each case ends with: the acknowledged input present once, the unknown-effect probe executed at most
once (witness log), no usage receipt counted twice against the provider's ledger, and the request
answered; or, when the user paused or stopped it, not resumed.
"""

from __future__ import annotations

import pytest
import test_impl_harness
from recoverykit.conformance.errors import OperationFailed
from test_impl_harness import tool_then_text

harness_factory = test_impl_harness.harness_factory  # the fixture, shared with the harness's own tests

WORK_POINTS = [
    "provider.request.before", "provider.request.after", "usage.persist.before", "usage.persist.after",
    "tool.dispatch.before", "tool.dispatch.after", "tool.result.commit.before", "tool.result.commit.after",
    "completion.commit.before_projection",
]
RECOVERY_POINTS = ["recovery.claim.after", "recovery.repair.after", "recovery.decide.after"]


def _crash_at(h, point: str):
    hit = h.broker.wait_for_hit(point, held=True, timeout=30)
    h.kill(hit.pid)
    return hit


def _runs(h, token: str) -> int:
    log = h.executions()
    return 0 if log is None else log.count(token)


def _finish_and_check(h, work_id: str):
    h.start()
    assert h.quiesce().quiescent
    snap = h.observe()
    item = next(w for w in snap.work_items if w.work_id == work_id)
    assert item.status == "finished", item
    assert len(item.inputs) == 1
    h.check_invariants(snap)
    return snap


@pytest.mark.parametrize("point", WORK_POINTS)
def test_worker_killed_at_point_then_restarted_finishes_once(harness_factory, point):
    h = harness_factory(tool_then_text())
    h.start(failpoints=f"{point}=1*pause")
    ack = h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")
    hit = _crash_at(h, point)
    assert hit.work_id == ack.work_id
    snap = _finish_and_check(h, ack.work_id)
    assert _runs(h, "t1.0.1.0") <= 1
    if point in ("provider.request.before", "provider.request.after", "usage.persist.before"):
        assert snap.usage_receipts[0].usage == "unknown"  # the response was lost with the worker
    if point == "tool.dispatch.before":
        assert _runs(h, "t1.0.1.0") == 0
        assert snap.tool_calls[0].status == "never_started" and snap.tool_calls[0].repair_key
        assert [t.status for t in snap.turns] == ["interrupted", "completed"]


@pytest.mark.parametrize("point", ["input.accept.before", "input.accept.after"])
def test_control_killed_while_accepting_input(harness_factory, point):
    h = harness_factory(tool_then_text())
    h.start(failpoints=f"{point}=1*pause")
    pending = h.client.send(h.client._make("submit", session_id="s1", text="go [[rk-script:t1]]",
                                           client_msg_id="m1"))
    _crash_at(h, point)
    reply = pending.wait()
    assert reply.type == "error" and reply.code == "crashed" and not reply.definite
    h.start()
    if point == "input.accept.before":
        assert h.observe().work_items == []  # never saved, so never acknowledged
    ack = h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")  # the client retries
    _finish_and_check(h, ack.work_id)
    assert len(h.observe().work_items) == 1


@pytest.mark.parametrize("point", RECOVERY_POINTS)
def test_crash_during_recovery_then_recover_again(harness_factory, point):
    h = harness_factory(tool_then_text(sleep_s=0.2))
    h.start(failpoints="tool.dispatch.before=1*pause")
    ack = h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")
    _crash_at(h, "tool.dispatch.before")
    h.start(failpoints=f"{point}=1*pause")
    _crash_at(h, point)
    snap = _finish_and_check(h, ack.work_id)
    assert _runs(h, "t1.0.1.0") == 0
    keys = [t.continuation_key for t in snap.turns]
    assert len(keys) == len(set(keys)) == 2, keys  # a repeated recovery admitted its turn once
    assert snap.tool_calls[0].repair_key == f"repair:{snap.tool_calls[0].call_id}"


@pytest.mark.parametrize("control", ["pause", "stop_all"])
def test_user_stop_survives_a_worker_kill(harness_factory, control):
    h = harness_factory(tool_then_text(sleep_s=0.2))
    h.start(failpoints="tool.dispatch.after=1*pause")
    ack = h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")
    hit = h.broker.wait_for_hit("tool.dispatch.after", held=True, timeout=30)
    if control == "pause":
        h.call("pause", work_id=ack.work_id)
    else:
        assert h.call("stop_all").stopped == [ack.work_id]
    h.kill(hit.pid)
    h.start()
    assert h.quiesce().quiescent
    snap = h.observe()
    (item,) = snap.work_items
    assert (item.status, item.desired_state) == ("paused", "paused")
    assert item.reason_code == ("user_paused" if control == "pause" else "user_stopped_all")
    assert len([r for r in h.ledger() if r["event"] == "request"]) == 1  # no model call after the stop
    h.check_invariants(snap)


def test_live_tool_child_is_reattached_not_rerun(harness_factory):
    h = harness_factory(tool_then_text(sleep_s=2.0))
    h.start(failpoints="tool.dispatch.after=1*pause")
    ack = h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")
    _crash_at(h, "tool.dispatch.after")
    before = {p.role for p in h.call("processes").processes}
    assert "tool" in before  # the child outlived its worker
    snap = _finish_and_check(h, ack.work_id)
    (call,) = snap.tool_calls
    assert call.status == "result_committed"
    (run,) = h.executions().by_token("t1.0.1.0")
    assert run.ppid == call.pid  # the shim recorded before the kill is the one whose result was committed


def test_end_while_held_is_not_resumed(harness_factory):
    h = harness_factory(tool_then_text(sleep_s=0))
    h.start(failpoints="provider.request.before=1*pause")
    ack = h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")
    hit = h.broker.wait_for_hit("provider.request.before", held=True, timeout=30)
    h.call("end", work_id=ack.work_id)
    h.kill(hit.pid)
    h.start()
    h.quiesce()
    (item,) = h.observe().work_items
    assert (item.status, item.reason_code) == ("cancelled", "user_cancelled")
    with pytest.raises(OperationFailed) as err:
        h.call("resume", work_id=ack.work_id)
    assert err.value.code == "precondition_failed"


def test_quiesce_counts_a_submit_still_in_flight(harness_factory):
    h = harness_factory(tool_then_text(tool="probe_read", sleep_s=0))
    h.start(failpoints="input.accept.before=1*pause")
    pending = h.client.send(h.client._make("submit", session_id="s1", text="go [[rk-script:t1]]",
                                           client_msg_id="m1"))
    h.broker.wait_for_hit("input.accept.before", held=True, timeout=30)
    assert not h.quiesce(timeout_s=0.5).quiescent  # nothing is queued yet, but the submit may queue work
    h.broker.release_all()
    assert pending.wait().type == "submit_ok"
    assert h.quiesce().quiescent
    assert h.observe().work_items[0].status == "finished"
