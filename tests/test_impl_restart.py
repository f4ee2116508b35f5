"""Restart kinds against the reference runtime: concurrent recoverers, graceful stop, long downtime,
host identity change, lost and cut provider responses, and the restricted recovery turn.
"""

from __future__ import annotations

import sqlite3
import time

import pytest
import test_impl_harness
from test_impl_harness import tool_then_text

harness_factory = test_impl_harness.harness_factory


def _attempts(h) -> list[tuple[int, str | None]]:
    conn = sqlite3.connect(h.data_dir / "runtime.db")
    try:
        return conn.execute("SELECT generation, outcome FROM owner_attempts ORDER BY generation").fetchall()
    finally:
        conn.close()


def _submit(h, script="t1", msg="m1", session="s1"):
    return h.call("submit", session_id=session, text=f"go [[rk-script:{script}]]", client_msg_id=msg)


def test_two_workers_recover_a_dead_peers_work_exactly_once(harness_factory):
    h = harness_factory(tool_then_text(sleep_s=1.0), workers=2)
    h.start(failpoints="tool.dispatch.after=1*pause")
    _submit(h)
    hit = h.broker.wait_for_hit("tool.dispatch.after", held=True, timeout=30)
    h.kill(hit.pid)
    h.start()  # a new worker races the survivor for the dead worker's item
    assert h.quiesce().quiescent
    snap = h.observe()
    (item,) = snap.work_items
    assert item.status == "finished"
    assert [g for g, _ in _attempts(h)] == [1, 2]  # one recoverer won; nobody else claimed
    assert h.executions().count("t1.0.1.0") == 1
    h.check_invariants(snap)


def test_graceful_stop_during_a_tool_is_not_a_pause_and_reattaches(harness_factory):
    h = harness_factory(tool_then_text(sleep_s=1.5))
    h.start(failpoints="tool.dispatch.after=1*pause")
    _submit(h)
    h.broker.wait_for_hit("tool.dispatch.after", held=True, timeout=30)
    stopping = h.client.send(h.client._make("stop", graceful=True))
    h.broker.release_all()
    assert stopping.wait().type == "stop_ok"
    snap = h.observe()
    (item,) = snap.work_items
    assert (item.desired_state, item.status, item.reason_code) == ("run", "queued", "shutting_down")
    assert snap.leases == []
    h.start()
    assert h.quiesce().quiescent
    snap = h.observe()
    assert snap.work_items[0].status == "finished"
    assert h.executions().count("t1.0.1.0") == 1  # the tool ran once, across the stop
    assert [t.status for t in snap.turns] == ["completed"]  # a safe checkpoint: the same turn went on
    h.check_invariants(snap)


@pytest.mark.parametrize("kind", ["graceful_worker_restart", "normal_exit"])
def test_graceful_restart_kinds_keep_working(harness_factory, kind):
    h = harness_factory(tool_then_text(tool="probe_read", sleep_s=0))
    h.start()
    before = {p.pid for p in h.call("processes").processes if p.role == "worker"}
    h.call("restart", kind=kind, failpoints=None, clock_offset_s=None, host_id=None)
    after = {p.pid for p in h.call("processes").processes if p.role == "worker"}
    assert before and after and not before & after
    _submit(h)
    assert h.quiesce().quiescent
    assert h.observe().work_items[0].status == "finished"


def test_long_downtime_has_no_hidden_expiry(harness_factory):
    h = harness_factory(tool_then_text(sleep_s=0))
    h.start(failpoints="tool.dispatch.before=1*pause")
    _submit(h)
    hit = h.broker.wait_for_hit("tool.dispatch.before", held=True, timeout=30)
    h.kill(hit.pid)
    h.start(clock_offset_s=3 * 3600.0)  # the old two-hour window is long gone
    assert h.quiesce().quiescent
    snap = h.observe()
    assert snap.work_items[0].status == "finished"
    h.check_invariants(snap)


def test_changed_host_identity_waits_instead_of_taking_over(harness_factory):
    h = harness_factory(tool_then_text(sleep_s=0))
    h.start(failpoints="tool.dispatch.before=1*pause", host_id="host-a")
    _submit(h)
    hit = h.broker.wait_for_hit("tool.dispatch.before", held=True, timeout=30)
    h.kill(hit.pid)
    h.start(host_id="host-b")
    h.quiesce(timeout_s=1.0)
    snap = h.observe()
    (item,) = snap.work_items
    assert (item.status, item.reason_code, item.desired_state) == ("waiting", "owner_on_other_host", "run")
    assert [lease.owner.host_id for lease in snap.leases] == ["host-a"]
    assert len([r for r in h.ledger() if r["event"] == "request"]) == 1
    h.call("restart", kind="normal_exit", failpoints=None, clock_offset_s=None, host_id="host-a")
    assert h.quiesce().quiescent  # back on the owner's host: recovered there
    snap = h.observe()
    assert snap.work_items[0].status == "finished"
    h.check_invariants(snap)


def test_cut_stream_leaves_a_partial_receipt_and_a_durable_retry(harness_factory):
    script = {"scripts": [{"id": "t1", "cumulative_usage": True, "steps": [
        {"text": "hello there, this is long", "chunks": 5, "usage": {"prompt_tokens": 30, "completion_tokens": 10},
         "faults": [{"kind": "cut", "at_chunk": 3, "attempts": [1]}]}]}]}
    h = harness_factory(script)
    h.start()
    _submit(h)
    assert h.quiesce(timeout_s=30).quiescent
    snap = h.observe()
    assert snap.work_items[0].status == "finished"
    first, second = snap.usage_receipts
    assert (first.attempt, first.usage, second.attempt, second.usage) == (1, "partial", 2, "known")
    assert first.prompt_tokens == 30 and first.completion_tokens < 10  # a lower bound, never summed
    h.check_invariants(snap)
    conn = sqlite3.connect(h.data_dir / "runtime.db")
    try:
        kept = conn.execute("SELECT content FROM messages WHERE origin='interrupted_partial'").fetchall()
    finally:
        conn.close()
    assert len(kept) == 1 and kept[0][0].endswith("[interrupted]") and "hello" in kept[0][0]


def test_after_an_unknown_outcome_only_safe_tools_run_and_a_write_waits_for_its_approval(harness_factory):
    script = {"scripts": [{"id": "t1", "steps": [
        {"tool_calls": [{"name": "probe_unknown", "arguments": {"sleep_s": 5}}]},
        {"tool_calls": [{"name": "probe_unknown", "arguments": {}}, {"name": "probe_read", "arguments": {}}]},
        {"text": "done"}]}]}
    h = harness_factory(script)
    h.start(failpoints="tool.dispatch.after=1*pause")
    _submit(h)
    hit = h.broker.wait_for_hit("tool.dispatch.after", held=True, timeout=30)
    deadline = time.monotonic() + 20
    while not (h.executions() and h.executions().count("t1.0.1.0")) and time.monotonic() < deadline:
        time.sleep(0.02)  # let the probe begin its effect, so its outcome is truly unknown
    h.kill(hit.pid)
    for proc in h.call("processes").processes:  # tree kill: the tool dies too, its outcome unknown
        if proc.role == "tool":
            h.kill(proc.pid)
    h.start()
    assert h.quiesce(timeout_s=30).quiescent
    waiting = h.observe()  # the write asks for a one-time approval (profile approvals); the read ran meanwhile
    assert (waiting.work_items[0].status, waiting.work_items[0].reason_code) == ("waiting", "awaiting_approval")
    [asked] = waiting.approvals
    assert asked.status == "pending" and asked.call_id == waiting.tool_calls[1].call_id
    assert asked.effect_set == [waiting.tool_calls[0].call_id]
    h.call("deny", approval_id=asked.approval_id)  # the user says no: it never runs, the work goes on
    assert h.quiesce(timeout_s=30).quiescent
    snap = h.observe()
    assert snap.work_items[0].status == "finished"
    assert [a.status for a in snap.approvals] == ["denied"]
    first, blocked, read = snap.tool_calls
    assert (first.status, first.repair_key) == ("outcome_unknown", f"repair:{first.call_id}")
    assert (blocked.tool, blocked.status, blocked.pid) == ("probe_unknown", "never_started", None)
    assert (read.tool, read.status) == ("probe_read", "result_committed")
    assert [t.status for t in snap.turns] == ["interrupted", "completed"]
    log = h.executions()
    assert log.count("t1.0.1.0") == 1 and log.count("t1.1.1.0") == 0 and log.count("t1.1.1.1") == 1


def test_an_answer_arriving_after_pause_does_not_continue_and_resume_asks_nothing_again(harness_factory):
    script = {"scripts": [{"id": "t1", "steps": [
        {"text": "done", "faults": [{"kind": "hold", "at_chunk": 0, "attempts": [1]}]}]}]}
    h = harness_factory(script)
    h.start()
    ack = _submit(h)
    held = h.provider.wait_for_held(20)
    h.call("pause", work_id=ack.work_id)
    h.provider.release(held)
    h.quiesce()
    h.call("restart", kind="normal_exit", failpoints=None, clock_offset_s=None, host_id=None)
    assert h.quiesce().quiescent
    (item,) = h.observe().work_items
    assert (item.status, item.desired_state, item.reason_code) == ("paused", "paused", "user_paused")
    h.call("resume", work_id=ack.work_id)
    assert h.quiesce().quiescent
    snap = h.observe()
    assert snap.work_items[0].status == "finished"
    assert [t.status for t in snap.turns] == ["interrupted", "completed"]
    assert len([r for r in h.ledger() if r["event"] == "request"]) == 1  # the committed answer was used
    h.check_invariants(snap)


def test_end_cancels_a_running_tool_explicitly(harness_factory):
    h = harness_factory(tool_then_text(sleep_s=30))
    h.start()
    ack = _submit(h)
    deadline = time.monotonic() + 20
    while not (h.executions() and h.executions().count("t1.0.1.0")) and time.monotonic() < deadline:
        time.sleep(0.02)
    h.call("end", work_id=ack.work_id)
    assert h.quiesce().quiescent
    snap = h.observe()
    assert (snap.work_items[0].status, snap.work_items[0].reason_code) == ("cancelled", "user_cancelled")
    (call,) = snap.tool_calls
    assert call.status == "outcome_unknown"  # cancelled mid-effect: it may have done part of it
    assert not [p for p in h.call("processes").processes if p.role == "tool"]
    assert not h.executions().by_token("t1.0.1.0")[0].done


def test_graceful_stop_abandons_a_held_provider_request_as_lost(harness_factory):
    script = {"scripts": [{"id": "t1", "cumulative_usage": True, "steps": [
        {"text": "done", "usage": {"prompt_tokens": 5, "completion_tokens": 2},
         "faults": [{"kind": "hold", "at_chunk": 0, "attempts": [1]}]}]}]}
    h = harness_factory(script)
    h.start()
    _submit(h)
    h.provider.wait_for_held(20)
    h.call("stop", graceful=True)  # the held answer never comes: the worker does not wait for it
    (item,) = h.observe().work_items
    assert (item.desired_state, item.status, item.reason_code) == ("run", "queued", "shutting_down")
    h.start()
    assert h.quiesce().quiescent
    snap = h.observe()
    assert snap.work_items[0].status == "finished"
    assert [(r.attempt, r.usage) for r in snap.usage_receipts] == [(1, "unknown"), (2, "known")]
    h.check_invariants(snap)


def test_automatic_recovery_disabled_by_the_operator_holds_interrupted_work(harness_factory, monkeypatch):
    monkeypatch.setenv("RK_IMPL_AUTOMATIC_RECOVERY", "0")
    h = harness_factory(tool_then_text(sleep_s=0))
    h.start(failpoints="tool.dispatch.before=1*pause")
    ack = _submit(h)
    hit = h.broker.wait_for_hit("tool.dispatch.before", held=True, timeout=30)
    h.kill(hit.pid)
    h.start()
    assert h.quiesce().quiescent
    (item,) = h.observe().work_items
    assert (item.status, item.reason_code, item.recovery_policy) == ("paused", "automatic_recovery_disabled",
                                                                     "disabled")
    assert len([r for r in h.ledger() if r["event"] == "request"]) == 1
    h.call("resume", work_id=ack.work_id)  # an explicit Resume is the person's decision
    assert h.quiesce().quiescent
    assert h.observe().work_items[0].status == "finished"


def test_a_changed_tool_version_is_an_explicit_wait(harness_factory):
    h = harness_factory(tool_then_text(sleep_s=5))
    h.start(failpoints="tool.dispatch.after=1*pause")
    ack = _submit(h)
    hit = h.broker.wait_for_hit("tool.dispatch.after", held=True, timeout=30)
    h.kill(hit.pid)
    h.close()  # the adapter ends (and takes the tool with it); the data stays
    upgraded = harness_factory(tool_then_text(sleep_s=5), data_dir=h.data_dir, tool_version="2")
    upgraded.start()
    upgraded.quiesce(timeout_s=5)
    (item,) = upgraded.observe().work_items
    assert (item.work_id, item.status, item.reason_code) == (ack.work_id, "waiting", "resource_tool_version_changed")
    assert upgraded.observe().tool_calls[0].status == "outcome_unknown"


def test_missing_credentials_are_an_explicit_wait(harness_factory, monkeypatch):
    monkeypatch.setenv("RK_IMPL_CREDENTIALS_ENV", "RK_TEST_PROVIDER_KEY")
    monkeypatch.delenv("RK_TEST_PROVIDER_KEY", raising=False)
    h = harness_factory(tool_then_text(tool="probe_read", sleep_s=0))
    h.start()
    _submit(h)
    h.quiesce(timeout_s=5)
    (item,) = h.observe().work_items
    assert (item.status, item.reason_code, item.desired_state) == ("waiting", "resource_missing_credentials", "run")
    assert not [r for r in h.ledger() if r["event"] == "request"]  # no model call without credentials
