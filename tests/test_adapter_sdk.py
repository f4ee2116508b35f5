"""recoverykit.adapter, the Python adapter SDK: replies checked before they are sent, overlapping requests,
runtime processes with the kit's environment, a quiesce that answers in time, observe builders."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest
from recoverykit.adapter import Adapter, Refused, RuntimeEnv, Supervisor, observe, quiesce
from recoverykit.adapter.checks import SCHEMA_FILE, mistakes
from recoverykit.conformance.protocol import sdk_schema_text

ROOT = Path(__file__).resolve().parent.parent
INIT = {"type": "init", "msg_id": 1, "protocol_version": "1.2", "data_dir": "", "provider_base_url": "http://x/v1",
        "probe_tools": [], "failpoint_socket": "/nonexistent.sock", "run_marker": "rk-test"}


def test_the_shipped_schema_is_the_protocol_s_own():
    assert SCHEMA_FILE.read_text(encoding="utf-8") == sdk_schema_text(), (
        "kit/adapter/protocol_schema.json is stale: python -c \"from recoverykit.conformance.protocol import "
        "write_sdk_schema; write_sdk_schema()\"")


class Toy(Adapter):
    name = "toy"
    observes = ["work_items"]

    def op_submit(self, req):
        if req["text"] == "refuse":
            raise Refused("precondition_failed", "no")
        if req["text"] == "custom":
            raise Refused("my_own_code", "custom codes are indefinite")
        if req["text"] == "boom":
            raise ValueError("kaboom")
        return {"work_id": "w1"}  # missing input_id: a protocol break the SDK must catch

    def op_observe(self, req):
        return {"snapshot": {"work_items": [], "turns": []}}  # turns filled but not declared


def _serve(adapter: Adapter, requests: list[dict], tmp_path) -> list[dict]:
    lines = "".join(json.dumps({**INIT, "data_dir": str(tmp_path)} if r["type"] == "init" else r) + "\n"
                    for r in requests)
    out = io.BytesIO()
    adapter.overlapping = False
    adapter.serve(io.BytesIO(lines.encode()), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_replies_are_checked_before_they_are_sent(tmp_path, capsys):
    replies = _serve(Toy(), [INIT, {"type": "submit", "msg_id": 2, "session_id": "s", "text": "t",
                                    "client_msg_id": "c"}, {"type": "observe", "msg_id": 3},
                             {"type": "shutdown", "msg_id": 4}], tmp_path)
    assert [r["type"] for r in replies] == ["init_ok", "error", "error", "shutdown_ok"]
    assert [r["in_reply_to"] for r in replies] == [1, 2, 3, 4]
    for reply in replies[1:3]:  # withheld, replaced by an error that claims nothing
        assert reply["code"] == "internal" and reply["definite"] is False
    err = capsys.readouterr().err
    assert "'input_id' is a required property (docs/protocol.md#submit)" in err
    assert "section `turns` is filled but not declared in init_ok.observes (docs/protocol.md#observe-snapshot)" in err


def test_refusals_take_their_definiteness_from_the_registry(tmp_path, capsys):
    submit = {"type": "submit", "session_id": "s", "client_msg_id": "c"}
    replies = _serve(Toy(), [INIT, {**submit, "msg_id": 2, "text": "refuse"}, {**submit, "msg_id": 3, "text": "custom"},
                             {**submit, "msg_id": 4, "text": "boom"}, {"type": "goal_create", "msg_id": 5},
                             {"type": "shutdown", "msg_id": 6}], tmp_path)
    assert [(r.get("code"), r.get("definite")) for r in replies[1:5]] == [
        ("precondition_failed", True), ("my_own_code", False), ("internal", False), ("not_supported", True)]
    assert "ValueError: kaboom" in capsys.readouterr().err  # the traceback is the author's, on stderr


def test_mistakes_cover_what_a_schema_cannot_say():
    assert mistakes({"type": "error", "msg_id": 1, "in_reply_to": 1, "code": "crashed", "text": "",
                     "definite": True})[0].startswith("error code `crashed` is indefinite by the registry")
    ok = {"type": "observe_ok", "msg_id": 1, "in_reply_to": 1, "snapshot": {"work_items": None}}
    assert "declared in init_ok.observes but sent as null" in mistakes(ok, observes=["work_items"])[0]
    assert mistakes({**ok, "snapshot": {"work_items": []}}, observes=["work_items"]) == []


def test_requests_overlap_a_held_request_does_not_block_observe(tmp_path):
    release = threading.Event()

    class Held(Adapter):
        observes = ["work_items"]

        def op_submit(self, req):
            release.wait(10)
            time.sleep(0.2)  # still answering when shutdown arrives: its reply must not be cut off
            return {"work_id": "w1", "input_id": "i1"}

        def op_observe(self, req):
            return {"snapshot": observe.snapshot(self.observes)}

    rfd, wfd = os.pipe()
    reader, writer = os.fdopen(rfd, "rb"), os.fdopen(wfd, "wb")
    out = io.BytesIO()
    adapter = Held()
    serving = threading.Thread(target=adapter.serve, args=(reader, out), daemon=True)
    serving.start()
    for req in ({**INIT, "data_dir": str(tmp_path)},
                {"type": "submit", "msg_id": 2, "session_id": "s", "text": "t", "client_msg_id": "c"},
                {"type": "observe", "msg_id": 3}):
        writer.write(json.dumps(req).encode() + b"\n")
        writer.flush()
    deadline = time.monotonic() + 10
    while out.getvalue().count(b"\n") < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    answered = [json.loads(line)["type"] for line in out.getvalue().splitlines()]
    assert answered == ["init_ok", "observe_ok"]  # observe answered while submit is held
    assert adapter.in_flight == 1  # and quiesce would say "not quiescent" meanwhile
    release.set()
    writer.write(b'{"type":"shutdown","msg_id":4}\n')
    writer.close()
    serving.join(10)
    assert [json.loads(line)["type"] for line in out.getvalue().splitlines()][-2:] == ["submit_ok", "shutdown_ok"]


def test_quiesce_answers_in_time_even_when_reads_fail():
    def torn():
        raise OSError("database is locked")

    started = time.monotonic()
    assert quiesce(0.7, torn) == {"quiescent": False, "pending": []}
    assert time.monotonic() - started < 0.7
    assert quiesce(5, lambda: []) == {"quiescent": True, "pending": []}
    assert quiesce(0.6, lambda: [], busy=lambda: True)["quiescent"] is False


def test_observe_builders_fill_nulls_and_refuse_unknown_fields():
    call = observe.tool_call(call_id="c", work_id="w", turn_id="t", tool="probe", effect_class="unknown",
                             status="dispatched")
    assert call["pid"] is None and call["repair_key"] is None
    with pytest.raises(TypeError, match="no field"):
        observe.turn(turn_id="t", colour="red")
    assert observe.continuation_key("w", 1, "cp") == observe.continuation_key("w", 1, "cp")
    assert observe.continuation_key("w", 2, "cp") != observe.continuation_key("w", 1, "cp")


WORKER = textwrap.dedent("""
    import os, subprocess, sys, time
    from recoverykit.adapter import from_environment, signal_ready
    env = from_environment()
    assert os.environ["RECOVERYKIT_RUN_MARKER"] == "rk-sdk-test" and env.host_id == "host-b"
    assert abs(env.now() - time.time() - 7200) < 5
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    open(os.path.join(os.environ["RECOVERYKIT_DATA_DIR"], "tool.pid"), "w").write(str(child.pid))
    signal_ready()
    time.sleep(60)
""")


def test_supervisor_starts_lists_and_stops_runtime_processes(tmp_path):
    env = RuntimeEnv(data_dir=tmp_path, provider_base_url="http://127.0.0.1:9/v1", probe_tools=[],
                     failpoint_socket=str(tmp_path / "fp.sock"), run_marker="rk-sdk-test")
    env.update({"host_id": "host-b", "clock_offset_s": 7200.0, "failpoints": None})
    sup = Supervisor(subreaper=False)  # never in the test process itself: it would adopt every orphan
    try:
        worker = sup.spawn([sys.executable, "-c", WORKER], env.environ())
        tool_pid = int((tmp_path / "tool.pid").read_text())
        listed = {p["pid"]: p for p in sup.processes()}
        assert listed[worker.pid]["role"] == "worker" and listed[tool_pid]["role"] == "tool"
        assert listed[worker.pid]["create_time"] == psutil.Process(worker.pid).create_time()
        sup.stop(tools=True, grace_s=2)
        assert sup.processes() == []
        assert not psutil.pid_exists(worker.pid) or psutil.Process(worker.pid).status() == psutil.STATUS_ZOMBIE
    finally:
        sup.stop(tools=True, grace_s=0.5)


def test_a_worker_that_dies_while_starting_is_a_clear_error(tmp_path):
    env = RuntimeEnv(data_dir=tmp_path, provider_base_url="http://x/v1", probe_tools=[], failpoint_socket="",
                     run_marker="rk-sdk-test")
    with pytest.raises(Exception, match="exited with status 3 while starting"):
        Supervisor(subreaper=False).spawn([sys.executable, "-c", "raise SystemExit(3)"], env.environ())


ORPHANS = textwrap.dedent("""
    import json, os, signal, subprocess, sys, time
    from recoverykit.adapter import Supervisor, RuntimeEnv
    from pathlib import Path
    d = Path(sys.argv[1])
    env = RuntimeEnv(data_dir=d, provider_base_url="http://x/v1", probe_tools=[], failpoint_socket="",
                     run_marker="rk-sdk-orphans")
    sup = Supervisor()
    code = ("import subprocess, sys, time, os; from recoverykit.adapter import signal_ready; "
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], start_new_session=True); "
            "open(sys.argv[1], 'w').write(str(c.pid)); signal_ready(); time.sleep(30)")
    worker = sup.spawn([sys.executable, "-c", code, str(d / "tool.pid")], env.environ())
    os.kill(worker.pid, signal.SIGKILL)  # as the kit's worker_kill does
    time.sleep(0.5)
    roles = sorted(p["role"] for p in sup.processes())
    sup.stop(tools=True, grace_s=1)
    print(json.dumps({"subreaper": sup.subreaper, "roles": roles, "after": sup.processes()}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers are a Linux feature")
def test_a_tool_orphaned_by_a_killed_worker_is_still_listed(tmp_path):
    result = subprocess.run([sys.executable, "-c", ORPHANS, str(tmp_path)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    try:
        assert found == {"subreaper": True, "roles": ["tool"], "after": []}
    finally:
        tool = int((tmp_path / "tool.pid").read_text())
        if psutil.pid_exists(tool):
            os.kill(tool, signal.SIGKILL)


class Exiting(Adapter):
    """Handlers that end their thread the hard way, and ones that try to write the envelope themselves."""

    name = "exiting"

    def op_submit(self, req):
        if req["text"] == "exit":
            sys.exit(3)
        if req["text"] == "interrupt":
            raise KeyboardInterrupt
        if req["text"] == "retype":
            return {"type": "pause_ok", "input_id": "i", "work_id": "w"}
        return {"input_id": "i", "work_id": "w", "in_reply_to": 99, "msg_id": 7}


@pytest.mark.parametrize("overlapping", [True, False])
def test_sys_exit_and_keyboard_interrupt_in_a_handler_get_an_internal_reply(tmp_path, capsys, overlapping):
    submit = {"type": "submit", "session_id": "s", "client_msg_id": "c"}
    lines = "".join(json.dumps(r) + "\n" for r in [
        {**INIT, "data_dir": str(tmp_path)}, {**submit, "msg_id": 2, "text": "exit"},
        {**submit, "msg_id": 3, "text": "interrupt"}, {"type": "shutdown", "msg_id": 4}])
    out, adapter = io.BytesIO(), Exiting()
    adapter.overlapping = overlapping
    adapter.serve(io.BytesIO(lines.encode()), out)  # on the old SDK: inline, SystemExit escapes serve
    replies = {r["in_reply_to"]: r for r in map(json.loads, out.getvalue().splitlines())}
    assert sorted(replies) == [1, 2, 3, 4]  # on the old SDK, threaded: the two submits never got a reply
    for msg_id, name in ((2, "SystemExit"), (3, "KeyboardInterrupt")):
        assert (replies[msg_id]["type"], replies[msg_id]["code"], replies[msg_id]["definite"]) == (
            "error", "internal", False)
        assert replies[msg_id]["text"].startswith(name)
    assert "SystemExit" in capsys.readouterr().err


def test_a_handler_cannot_set_the_envelope_keys(tmp_path, capsys):
    submit = {"type": "submit", "session_id": "s", "client_msg_id": "c"}
    replies = _serve(Exiting(), [INIT, {**submit, "msg_id": 2, "text": "retype"},
                                 {**submit, "msg_id": 3, "text": "redirect"}, {"type": "shutdown", "msg_id": 4}],
                     tmp_path)
    assert [(r["type"], r["in_reply_to"]) for r in replies] == [
        ("init_ok", 1), ("error", 2), ("error", 3), ("shutdown_ok", 4)]
    assert [r["msg_id"] for r in replies] == [1, 2, 3, 4]  # the SDK's own ids, never the handler's 7
    assert "'type'" in replies[1]["text"] and replies[1]["code"] == "internal"
    assert "'msg_id', 'in_reply_to'" in replies[2]["text"] and replies[2]["definite"] is False
