"""recoverykit.adapter's run-intent store, retry policy and async failpoint: the glue an adapter for a framework
without its own Pause/End/intent layer used to write itself (issue 28, item 4)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recoverykit.adapter import Refused, RetryPolicy, RunIntentStore, failpoint_async
from recoverykit.adapter.checks import mistakes
from recoverykit.conformance import failpoint_client

OBSERVES = ["work_items", "turns", "usage_receipts"]

CHILD = textwrap.dedent("""
    import sys, time
    from recoverykit.adapter import RunIntentStore
    store = RunIntentStore(sys.argv[1])
    w = store.submit("s1", "c1", "hello", "host-a")["work_id"]
    store.pause(w); store.resume(w); store.pause(w)
    store.attribute(w, "req-x-request-id")
    with store.busy(w):
        print(w, flush=True)
        time.sleep(600)
""")


def test_a_killed_writer_leaves_its_controls_and_its_attribution_intact(tmp_path):
    """A child writes through the store, is SIGKILLed mid-step; the reopened store has every control it made, at
    the same control version, and the receipt it attributed before dispatch."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        work_id = child.stdout.readline().strip()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL and work_id.startswith("w-")
    store = RunIntentStore(tmp_path)
    item = store.item(work_id)
    assert (item["desired"], item["status"], item["reason"], item["cv"]) == ("paused", "paused", "user_paused", 3)
    assert item["busy_pid"] == child.pid  # the step it died in is known; pending() asks whether that pid lives
    assert store.pending(alive=lambda pid: None) == []
    snap = store.observe(OBSERVES)
    assert [r["request_id"] for r in snap["usage_receipts"]] == ["req-x-request-id"]
    assert snap["usage_receipts"][0]["work_id"] == work_id and snap["usage_receipts"][0]["usage"] == "unknown"
    assert store.submit("s1", "c1", "hello")["work_id"] == work_id  # the acknowledged input is the same one


def test_the_store_is_durable_by_configuration(tmp_path):
    store = RunIntentStore(tmp_path)
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


@settings(deadline=None, max_examples=25)
@given(st.lists(st.sampled_from(["pause", "resume", "end", "stop_all"]), max_size=12))
def test_control_version_never_goes_back_and_moves_with_every_control_that_changes_the_intent(controls):
    with tempfile.TemporaryDirectory() as tmp:
        store = RunIntentStore(tmp)
        work_id = store.submit("s", "c", "t")["work_id"]
        for control in controls:
            before = store.item(work_id)
            try:
                answer = store.stop_all() if control == "stop_all" else getattr(store, control)(work_id)
            except Refused as refused:
                assert refused.code == "precondition_failed"
                assert store.item(work_id) == before  # a refused control changes nothing
                continue
            after = store.item(work_id)
            assert after["cv"] in (before["cv"], before["cv"] + 1)
            assert (after["cv"] > before["cv"]) == (after["desired"] != before["desired"])
            assert answer == after["cv"] if control != "stop_all" else answer == (
                [work_id] if before["desired"] == "run" else [])
        store.close()


def test_controls_refuse_what_the_contract_forbids(tmp_path):
    store = RunIntentStore(tmp_path)
    work_id = store.submit("s", "c", "t")["work_id"]
    with pytest.raises(Refused) as refused:
        store.resume(work_id)
    assert refused.value.code == "precondition_failed"
    assert store.end(work_id) == 1 and store.end(work_id) == 1
    with pytest.raises(Refused):
        store.pause(work_id)
    with pytest.raises(Refused) as unknown:
        store.pause("w-none")
    assert unknown.value.code == "unknown_work_item"


def test_observe_is_built_from_the_store_and_passes_the_protocol_schema(tmp_path):
    store = RunIntentStore(tmp_path)
    work_id = store.submit("s", "c", "t", "host-a")["work_id"]
    first = store.open_turn(work_id, 0, "ck-a")
    assert store.open_turn(work_id, 0, "ck-a") == first  # the same key: the same turn, retried
    store.attribute(work_id, "run-1")
    store.settle_receipt("run-1", "chatcmpl-1", 10, 5)
    second = store.open_turn(work_id, 0, "ck-b")
    assert store.finish(work_id, 0)
    snap = store.observe(OBSERVES)
    assert mistakes({"type": "observe_ok", "msg_id": 2, "in_reply_to": 1, "snapshot": snap}, observes=OBSERVES) == []
    assert [(t["turn_id"], t["predecessor"], t["status"]) for t in snap["turns"]] == [
        (first, None, "interrupted"), (second, first, "completed")]
    assert snap["usage_receipts"][0]["request_id"] == "chatcmpl-1" and snap["usage_receipts"][0]["usage"] == "known"
    assert snap["work_items"][0]["status"] == "finished" and snap["tool_calls"] is None


def test_the_retry_policy_backs_off_exponentially_to_its_cap_and_is_bounded():
    policy = RetryPolicy(initial_s=0.5, factor=2.0, cap_s=3.0, max_attempts=6)
    assert policy.delays() == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.delay(6) is None and policy.delay(60) is None
    for bad in ({"initial_s": -1}, {"cap_s": 0.1}, {"factor": 0.5}, {"max_attempts": 0}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)


def test_a_failed_attempt_waits_with_its_reason_then_exhausts(tmp_path):
    store = RunIntentStore(tmp_path)
    policy = RetryPolicy(initial_s=60.0, cap_s=60.0, max_attempts=2)
    work_id = store.submit("s", "c", "t")["work_id"]
    assert store.claim()["work_id"] == work_id
    store.running(work_id, 0)
    assert store.retry_later(work_id, 0, policy) == 60.0
    item = store.item(work_id)
    assert (item["status"], item["reason"], item["attempts"]) == ("waiting", "retry_scheduled", 1)
    assert item["retry_at"] > time.time() + 30  # the due time is durable, not a sleep in the worker
    assert store.claim() is None  # not due yet
    assert store.pending() == [{"work_id": work_id, "status": "waiting"}]  # quiesce still waits for it
    assert [r["work_id"] for r in store.runnable(now=item["retry_at"])] == [work_id]
    assert store.retry_later(work_id, 0, policy) is None
    item = store.item(work_id)
    assert (item["desired"], item["status"], item["reason"]) == ("done", "failed", "retry_exhausted")
    assert store.pending() == []


def test_a_control_wins_over_a_failure_that_raced_it(tmp_path):
    store = RunIntentStore(tmp_path)
    work_id = store.submit("s", "c", "t")["work_id"]
    store.pause(work_id)
    assert store.retry_later(work_id, 0, RetryPolicy()) is None
    assert store.item(work_id)["status"] == "paused"
    store.resume(work_id)
    assert store.progressed(work_id, "cp-1") == {"desired": "run", "cv": 2}


class Broker:
    """A failpoint broker on a Unix socket that holds the first pause until ``release`` is set."""

    def __init__(self, path: str) -> None:
        self.hit, self.release, self.released_in_time = threading.Event(), threading.Event(), None
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(1)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            conn.makefile().readline()
            self.hit.set()
            self.released_in_time = self.release.wait(30)  # a safety bound, never a timed assertion
            conn.sendall((json.dumps({"resume": "continue"}) + "\n").encode())


def test_an_async_failpoint_pause_holds_its_task_and_not_the_event_loop():
    folder = tempfile.mkdtemp(prefix="rk-fp-", dir="/tmp")  # a Unix socket path must be short
    path = os.path.join(folder, "fp.sock")
    broker = Broker(path)
    failpoint_client.reload({failpoint_client.ENV_FAILPOINTS: "step.before=pause",
                             failpoint_client.ENV_FAILPOINT_SOCKET: path})
    ticks = []

    async def other_task() -> None:
        while not broker.hit.is_set():
            await asyncio.sleep(0.01)
        for n in range(3):  # runs while the paused task is held: the loop is free
            ticks.append(n)
            await asyncio.sleep(0)
        broker.release.set()

    async def main() -> str:
        paused = asyncio.create_task(failpoint_async("step.before", "w-1"))
        await other_task()
        await paused
        await failpoint_async("not.armed")  # an unarmed point returns at once
        return "done"

    try:
        assert asyncio.run(main()) == "done"
    finally:
        failpoint_client.reload({})
        broker.server.close()
        os.unlink(path)
        os.rmdir(folder)
    broker.thread.join()
    assert ticks == [0, 1, 2] and broker.released_in_time is True


def test_sessions_take_turns_by_when_the_session_was_last_served(tmp_path):
    """FA-12 through the store alone: a session whose first item was served before a restart must not wait behind
    every never-served item of another session's backlog (ordering by the item's own ``served`` did exactly that:
    fqb, fqb, fqb, fqb, then fqa)."""
    store = RunIntentStore(tmp_path)
    for sid in ("fqa", "fqb"):
        for n in range(4):
            store.submit(sid, f"{sid}-{n}", "t", "host-a")
    store.claim()  # fqa's first, then a restart: it is still open
    order = []
    for _ in range(8):
        item = store.claim()
        order.append(item["session_id"])
        assert store.finish(item["work_id"], item["cv"])
    assert order[:4] == ["fqb", "fqa", "fqb", "fqa"], order


def test_a_pause_between_claim_and_step_keeps_quiesce_waiting_for_that_step(tmp_path):
    """The worker claims an item, the user pauses it before the worker marked itself busy: quiesce must not report
    quiescence, since the worker is about to run the step (and send a provider request) anyway. The old ``claim``
    marked nothing, so ``pending`` was empty in that window (LangGraph lockstep seed 602162317: RI-03, a request
    after the stop and after a quiescent observation)."""
    store = RunIntentStore(tmp_path)
    work_id = store.submit("s", "c", "t")["work_id"]
    item = store.claim()
    RunIntentStore(tmp_path).pause(work_id)  # the adapter's own connection
    assert store.pending(alive=lambda pid: pid == os.getpid()) == [{"work_id": work_id, "status": "running"}]
    assert not store.still(work_id, item["cv"])  # the worker's check before its first dispatch
    with store.busy(work_id):
        pass
    assert store.pending(alive=lambda pid: pid == os.getpid()) == []


def test_an_intent_adapter_keeps_controls_in_the_store_and_names_a_missing_worker(tmp_path):
    """``IntentAdapter``: the protocol side three adapters wrote alike. Its controls land in the store (durable before
    the reply); a subclass that names no worker module is told what to set, at prepare, not at the first start."""
    from types import SimpleNamespace

    from recoverykit.adapter import IntentAdapter

    class Mine(IntentAdapter):
        name, version, protocol_version = "mine", "0.1", "1.2"
        worker_module = "mine.worker"
        observes = ["work_items"]

    adapter = Mine()
    adapter.env = SimpleNamespace(data_dir=str(tmp_path), host_id="host-a")
    adapter.prepare()
    work_id = adapter.op_submit({"session_id": "s", "client_msg_id": "c1", "text": "hi"})["work_id"]
    assert adapter.op_pause({"work_id": work_id})["control_version"] == 1
    assert RunIntentStore(tmp_path).item(work_id)["desired"] == "paused"  # a second reader sees it: it is durable
    assert [w["desired_state"] for w in adapter.op_observe({})["snapshot"]["work_items"]] == ["paused"]

    class Nameless(IntentAdapter):
        name, version, protocol_version = "nameless", "0.1", "1.2"

    nameless = Nameless()
    nameless.env = adapter.env
    with pytest.raises(TypeError, match="worker_module"):
        nameless.prepare()
