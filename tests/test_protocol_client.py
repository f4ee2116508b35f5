"""AdapterClient against the demo adapter (a full round trip) and against adapters that misbehave."""

import json
import sys
import uuid
from pathlib import Path

import psutil
import pytest
from recoverykit.conformance import AdapterClient
from recoverykit.conformance.errors import AdapterExited, AdapterTimeout, OperationFailed, UnexpectedReply
from recoverykit.conformance.protocol_rpcs import Pause, Submit
from recoverykit.model.catalogue import Profile, RestartKind, Verdict
from recoverykit.model.errors import InvalidArgument

ROOT = Path(__file__).resolve().parent.parent
DEMO = [sys.executable, str(ROOT / "examples" / "demo_adapter.py")]
GARBAGE = [sys.executable, str(ROOT / "tests" / "adapters" / "garbage_adapter.py")]


def _handshake(client: AdapterClient, tmp_path: Path):
    return client.handshake(data_dir=tmp_path / "data", provider_base_url="http://127.0.0.1:9/v1",
                            failpoint_socket=tmp_path / "fp.sock")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_demo_round_trip(tmp_path):
    with AdapterClient(DEMO, tmp_path) as client:
        init_ok = _handshake(client, tmp_path)
        assert init_ok.profiles == [Profile.CHAT_CORE]
        assert init_ok.restart_kinds == [RestartKind.FRONTEND_RELOAD]
        ack = client.call("submit", session_id="s1", text="hello", client_msg_id="c1")
        again = client.call("submit", session_id="s1", text="hello", client_msg_id="c1")
        assert (again.work_id, again.input_id) == (ack.work_id, ack.input_id)
        item = client.observe().work_items[0]
        assert (item.work_id, item.desired_state, item.status) == (ack.work_id, "run", "queued")
        assert [i.text for i in item.inputs] == ["hello"]
        assert client.call("pause", work_id=ack.work_id).control_version == 1
        assert client.call("resume", work_id=ack.work_id).control_version == 2
        assert client.call("processes").processes == []
        client.call("start", failpoints="", clock_offset_s=0.0, host_id="h1")
        assert client.call("quiesce", timeout_s=1.0).quiescent
        snapshot = client.observe()
        assert snapshot.work_items[0].status == "finished" and snapshot.turns[0].status == "completed"
        assert snapshot.goals is None  # not declared: absent, never invented
        pid = client.pid
    assert not _alive(pid)
    record = [json.loads(line) for line in (tmp_path / "adapter.messages.jsonl").read_text().splitlines()]
    assert len(record) == len(client.transcript) and record[0]["dir"] == "sent"
    assert record[-1]["dir"] == "received" and '"shutdown_ok"' in record[-1]["line"]


def test_error_replies_carry_their_definiteness(tmp_path):
    with AdapterClient(DEMO, tmp_path) as client:
        _handshake(client, tmp_path)
        with pytest.raises(OperationFailed) as unknown:
            client.call("pause", work_id="nope")
        assert (unknown.value.code, unknown.value.definite) == ("unknown_work_item", True)
        with pytest.raises(OperationFailed, match="'not_supported'"):
            client.call("restart", kind="tree_kill", failpoints=None, clock_offset_s=None, host_id=None)
        reply = client.request(client.make("goal_create", session_id="s", objective="o", budget=None))
        assert reply.type == "error" and reply.code == "not_supported"


def test_requests_may_overlap(tmp_path):
    with AdapterClient(DEMO, tmp_path) as client:
        _handshake(client, tmp_path)
        first = client.send(Submit(msg_id=100, session_id="s", text="a", client_msg_id="a"))
        second = client.send(Submit(msg_id=101, session_id="s", text="b", client_msg_id="b"))
        third = client.send(Pause(msg_id=102, work_id="w1"))
        assert [first.wait().work_id, second.wait().work_id, third.wait().control_version] == ["w1", "w2", 1]


def test_silence_times_out_as_unknown_and_close_kills_the_stubborn(tmp_path):
    tag = f"rk-test-{uuid.uuid4().hex}"
    client = AdapterClient([*GARBAGE, "silent_stubborn", tag], tmp_path, timeout_s=0.5, grace_s=0.5).start()
    try:
        with pytest.raises(AdapterTimeout) as info:
            _handshake(client, tmp_path)
        assert info.value.verdict is Verdict.UNKNOWN and "no reply within 0.5 s" in str(info.value)
        tagged = [p for p in psutil.process_iter(["cmdline"]) if tag in (p.info["cmdline"] or [])]
        assert len(tagged) == 2  # the adapter and the child it left in another session: the check can see them
    finally:
        client.close()
    assert not any(_alive(p.pid) for p in tagged)


def test_a_break_is_fatal_for_every_later_call(tmp_path):
    with AdapterClient([*GARBAGE, "wrong_msg_id"], tmp_path, timeout_s=5) as client:
        with pytest.raises(UnexpectedReply) as first:
            _handshake(client, tmp_path)
        with pytest.raises(UnexpectedReply) as later:
            client.call("observe")
        assert later.value is first.value


def test_an_adapter_that_exits_is_reported_with_its_status(tmp_path):
    client = AdapterClient([*GARBAGE, "exit_mid_handshake"], tmp_path, timeout_s=5)
    with client, pytest.raises(AdapterExited, match="exited with status 3 in the middle of a line"):
        _handshake(client, tmp_path)


def test_a_malformed_request_is_the_callers_mistake(tmp_path):
    with AdapterClient(DEMO, tmp_path) as client:
        with pytest.raises(InvalidArgument, match="'quiesce' request"):
            client.call("quiesce")
        with pytest.raises(InvalidArgument, match="'frobnicate' is not a request"):
            client.call("frobnicate")


def test_listeners_see_every_line(tmp_path):
    seen = []
    with AdapterClient(DEMO, tmp_path) as client:
        client.listeners.append(seen.append)
        _handshake(client, tmp_path)
        client.observe()
    assert [e.direction for e in seen] == ["sent", "received"] * 3  # init, observe, shutdown


def test_demo_adapter_needs_only_the_adapter_sdk():
    """The demo shows the shortest adapter: the SDK (recoverykit.adapter) and nothing else of the kit."""
    import ast

    tree = ast.parse((ROOT / "examples" / "demo_adapter.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"recoverykit.adapter"}
