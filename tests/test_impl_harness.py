"""Driving the reference runtime through the kit's own environment, as certify would.

``Harness`` wires the scripted provider, the failpoint broker, the probe tools and the adapter client
to ``python -m recoverykit.impl`` in a private temp dir. The other tests/test_impl_*.py files import
it from here; the tests in this file check the harness's happy path itself.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest
from recoverykit.conformance.broker import FailpointBroker
from recoverykit.conformance.client import AdapterClient
from recoverykit.conformance.probe_tools import probe_tool, standard_probe_tools
from recoverykit.conformance.provider import ScriptedProvider
from recoverykit.conformance.witness import read_witness

ADAPTER = [sys.executable, "-m", "recoverykit.impl"]


def tool_then_text(script_id: str = "t1", tool: str = "probe_unknown", sleep_s: float = 0.3) -> dict:
    return {"scripts": [{"id": script_id, "cumulative_usage": True, "steps": [
        {"tool_calls": [{"name": tool, "arguments": {"sleep_s": sleep_s}}],
         "usage": {"prompt_tokens": 20, "completion_tokens": 8}},
        {"text": "done", "usage": {"prompt_tokens": 40, "completion_tokens": 3}}]}]}


class Harness:
    def __init__(self, tmp: Path, script: dict, workers: int = 1, data_dir: Path | None = None,
                 tool_version: str = "1"):
        self.tmp = tmp
        self.data_dir = data_dir or tmp / "data"
        self.provider = ScriptedProvider(script, tmp / "ledger.jsonl")
        self.broker = FailpointBroker(tmp)
        self.witness = tmp / "witness.jsonl"
        env = {**os.environ, "RK_IMPL_WORKERS": str(workers)}
        self.client = AdapterClient(ADAPTER, tmp / "run", timeout_s=20, slow_timeout_s=60, env=env)
        self.client.start()
        self.init_ok = self.client.handshake(
            data_dir=self.data_dir, provider_base_url=self.provider.base_url, failpoint_socket=self.broker.address,
            probe_tools=[probe_tool(t.name, t.effect_class, self.witness, broker_socket=self.broker.address,
                                    version=tool_version)
                         for t in standard_probe_tools(self.witness)])

    def call(self, name: str, **fields):
        return self.client.call(name, **fields)

    def start(self, failpoints: str = "", host_id: str = "host-a", clock_offset_s: float = 0.0):
        return self.call("start", failpoints=failpoints, clock_offset_s=clock_offset_s, host_id=host_id)

    def quiesce(self, timeout_s: float = 20.0):
        return self.client.request(self.client._make("quiesce", timeout_s=timeout_s))

    def observe(self):
        return self.client.observe()

    def kill(self, pid: int) -> None:
        proc = psutil.Process(pid)
        os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def executions(self):
        return read_witness(self.witness) if self.witness.exists() else None

    def ledger(self) -> list[dict]:
        return self.provider.records()

    def close(self) -> None:
        self.broker.release_all()
        self.client.close()
        self.provider.close()
        self.broker.close()

    # --- the checks every recovery scenario ends with ----------------------------------------------

    def check_invariants(self, snap) -> None:
        inputs = [(i.client_msg_id, i.input_id) for w in snap.work_items for i in w.inputs]
        assert len(inputs) == len(set(inputs)), f"an input was stored twice: {inputs}"
        log = self.executions()
        if log is not None:
            assert not log.duplicates(), f"a probe ran more than once: {log.duplicates()}"
        receipts = [r.request_id for r in snap.usage_receipts]
        assert len(receipts) == len(set(receipts)), f"a receipt was recorded twice: {receipts}"
        billed = {r["request_id"]: r for r in self.ledger() if r.get("event") == "response"}
        for r in snap.usage_receipts:
            if r.usage == "known":
                got = billed.get(r.request_id)
                assert got is not None, f"known usage for {r.request_id}, which the provider never answered"
                assert (r.prompt_tokens, r.completion_tokens) == (
                    got["usage_billed"]["prompt_tokens"], got["usage_billed"]["completion_tokens"]), (r, got)


@pytest.fixture
def harness_factory(tmp_path):
    made: list[Harness] = []

    def make(script: dict, workers: int = 1, data_dir: Path | None = None, tool_version: str = "1") -> Harness:
        h = Harness(tmp_path / f"h{len(made)}", script, workers, data_dir, tool_version)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()
    markers = {h.client.run_marker for h in made}
    leftovers = [p for p in psutil.process_iter(["pid"]) if _in_dir(p, tmp_path) or _marked(p, markers)]
    for p in leftovers:
        p.kill()
    assert not leftovers, f"processes outlived the test: {leftovers}"


def _marked(proc: psutil.Process, markers: set[str]) -> bool:
    # a process forked from the runtime's zygote shows the adapter's environment, not its own
    try:
        return proc.environ().get("RECOVERYKIT_RUN_MARKER") in markers and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _in_dir(proc: psutil.Process, tmp: Path) -> bool:
    try:
        return str(tmp) in (proc.environ().get("RK_IMPL_DATA_DIR") or "")
    except psutil.Error:
        return False


def test_chat_request_with_unknown_effect_tool_completes(harness_factory):
    h = harness_factory(tool_then_text())
    assert "tool.dispatch.after" in h.init_ok.failpoints
    h.start()
    ack = h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")
    assert h.quiesce().quiescent
    snap = h.observe()
    (item,) = snap.work_items
    assert (item.work_id, item.status, item.desired_state) == (ack.work_id, "finished", "done")
    (call,) = snap.tool_calls
    assert (call.tool, call.effect_class, call.status) == ("probe_unknown", "unknown", "result_committed")
    assert call.pid and call.create_time
    assert [r.usage for r in snap.usage_receipts] == ["known", "known"]
    assert h.executions().count("t1.0.1.0") == 1
    h.check_invariants(snap)


def test_repeated_submit_is_one_input(harness_factory):
    h = harness_factory(tool_then_text(tool="probe_read", sleep_s=0))
    h.start()
    first = h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="same")
    again = h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="same")
    assert (first.work_id, first.input_id) == (again.work_id, again.input_id)
    h.quiesce()
    snap = h.observe()
    assert len(snap.work_items) == 1 and len(snap.work_items[0].inputs) == 1


def test_processes_lists_control_and_workers_with_identity(harness_factory):
    h = harness_factory(tool_then_text(), workers=2)
    h.start()
    procs = h.call("processes").processes
    assert sorted(p.role for p in procs) == ["control", "worker", "worker"]
    for p in procs:
        assert psutil.Process(p.pid).create_time() == pytest.approx(p.create_time, abs=0.01)
        assert psutil.Process(p.pid).environ().get("RECOVERYKIT_RUN_MARKER") == h.client.run_marker
    h.call("stop", graceful=True)
    assert h.call("processes").processes == []


def test_a_data_dir_too_deep_for_unix_sockets_still_works(harness_factory, tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "data"
    h = harness_factory(tool_then_text(tool="probe_read", sleep_s=0), data_dir=deep)
    h.start()
    h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")
    assert h.quiesce().quiescent
    assert h.observe().work_items[0].status == "finished"


def test_a_doubled_start_is_idempotent(harness_factory):
    h = harness_factory(tool_then_text(tool="probe_read", sleep_s=0))
    calls = [h.client.send(h.client._make("start", failpoints="", clock_offset_s=0.0, host_id="host-a"))
             for _ in range(3)]
    assert [c.wait().type for c in calls] == ["start_ok"] * 3
    assert sorted(p.role for p in h.call("processes").processes) == ["control", "worker"]


def dump(snap) -> str:
    return json.dumps(snap.model_dump(mode="json"), indent=1)
