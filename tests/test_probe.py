"""Probe tools and their witness log: one record per real execution, concurrent-safe, holdable."""

import json
import os
import subprocess
import sys
import time

import pytest
from env_helpers import short_dir, spawner  # noqa: F401  (fixtures)
from hypothesis import given
from hypothesis import strategies as st
from recoverykit.conformance.broker import FailpointBroker
from recoverykit.conformance.killer import ProcRef, kill, kill_worker_only
from recoverykit.conformance.probe import HOLD_POINT, dumps, loads, process_create_time
from recoverykit.conformance.probe_tools import probe_tool, standard_probe_tools
from recoverykit.conformance.witness import read_witness
from recoverykit.model.catalogue import EffectClass
from recoverykit.model.errors import InvalidArgument, MalformedRecord


def _run(tool, arguments: dict, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*tool.argv, json.dumps(arguments)], capture_output=True, text=True, timeout=60, **kwargs)


def test_standard_tools_declare_their_effect_classes(tmp_path):
    tools = standard_probe_tools(tmp_path / "w.jsonl")
    assert [(t.name, t.effect_class) for t in tools] == [
        ("probe_read", EffectClass.READ_ONLY), ("probe_idempotent", EffectClass.IDEMPOTENT),
        ("probe_unknown", EffectClass.UNKNOWN), ("probe_external", EffectClass.IDEMPOTENT)]
    assert [t.name for t in tools if t.external_operation] == ["probe_external"]


def test_one_execution_leaves_a_start_a_finish_and_its_emitted_result(tmp_path):
    tool = probe_tool("probe_unknown", "unknown", tmp_path / "w.jsonl", version="7")
    done = _run(tool, {"probe_token": "s.0.1.0", "output": "hello"})
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert result["probe_token"] == "s.0.1.0" and result["outcome"] == "ok" and result["output"] == "hello"
    log = read_witness(tmp_path / "w.jsonl")
    (execution,) = log.executions
    assert (execution.probe_token, execution.tool, execution.effect_class) == ("s.0.1.0", "probe_unknown", "unknown")
    assert execution.pid == result["pid"] and execution.done and execution.outcome == "ok"
    assert execution.started <= execution.finished and not execution.alive()
    assert [r["phase"] for r in log.records] == ["start", "finish", "emitted"]
    assert log.records[0]["tool_version"] == "7" and execution.emitted is True


def test_exit_code_and_bad_arguments(tmp_path):
    tool = probe_tool("probe_idempotent", "idempotent", tmp_path / "w.jsonl")
    failed = _run(tool, {"probe_token": "f", "exit_code": 3})
    assert failed.returncode == 3 and json.loads(failed.stdout)["outcome"] == "failed"
    assert read_witness(tmp_path / "w.jsonl").executions[0].exit_code == 3
    bad = subprocess.run([*tool.argv, "[not an object"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 64 and json.loads(bad.stdout)["outcome"] == "bad_arguments"
    assert len(read_witness(tmp_path / "w.jsonl").executions) == 1  # a refused call executed nothing


def test_concurrent_probes_never_interleave(tmp_path):
    tool = probe_tool("probe_read", "read_only", tmp_path / "w.jsonl")
    procs = [subprocess.Popen([*tool.argv, json.dumps({"probe_token": f"c.{i}", "output": "x" * 3000})],
                              stdout=subprocess.DEVNULL) for i in range(12)]
    for p in procs:
        assert p.wait(timeout=60) == 0
    log = read_witness(tmp_path / "w.jsonl")
    assert log.torn is None and len(log.records) == 36  # start, finish, emitted each
    assert sorted(e.probe_token for e in log.executions) == sorted(f"c.{i}" for i in range(12))
    assert all(e.done and e.emitted for e in log.executions) and log.duplicates() == {}


def test_a_rerun_shows_as_a_duplicate(tmp_path):
    tool = probe_tool("probe_unknown", "unknown", tmp_path / "w.jsonl")
    _run(tool, {"probe_token": "dup"})
    _run(tool, {"probe_token": "dup"})
    assert read_witness(tmp_path / "w.jsonl").duplicates() == {"dup": 2}


def test_torn_last_line_is_tolerated_but_a_torn_middle_is_not(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({"phase": "start", "probe_token": "a", "pid": 1, "time": 1.0}) + "\n" + '{"phase": "fin')
    log = read_witness(path)
    assert log.torn == '{"phase": "fin' and len(log.executions) == 1 and not log.executions[0].done
    start = json.dumps({"phase": "start", "probe_token": "a", "pid": 1, "time": 1.0})
    path.write_text('{"phase": "fin\n' + start + "\n")
    with pytest.raises(MalformedRecord, match="line 1"):
        read_witness(path)


def test_create_time_matches_psutil(spawner):  # noqa: F811
    proc = spawner.python("import time; time.sleep(30)")
    assert abs(process_create_time(proc.pid) - ProcRef.of(proc.pid).create_time) < 0.05


def test_a_held_probe_reports_to_the_broker_and_finishes_when_released(tmp_path, short_dir):  # noqa: F811
    with FailpointBroker(short_dir) as broker:
        tool = probe_tool("probe_unknown", "unknown", tmp_path / "w.jsonl", broker_socket=broker.path)
        proc = subprocess.Popen([*tool.argv, json.dumps({"probe_token": "h.1", "hold": True})],
                                stdout=subprocess.PIPE, text=True)
        try:
            hit = broker.wait_for_hit(HOLD_POINT, timeout=30)
            assert hit.work_id == "h.1" and hit.pid == proc.pid
            (execution,) = read_witness(tmp_path / "w.jsonl").executions
            assert execution.done and execution.alive()  # effect done, result not yet handed back
            assert proc.poll() is None
            broker.release(hit)
            out, _ = proc.communicate(timeout=30)
            assert json.loads(out)["outcome"] == "ok" and proc.returncode == 0
        finally:
            kill(proc.pid)
            proc.wait()
            proc.stdout.close()


def test_hold_without_a_broker_waits_for_a_release_file(tmp_path):
    witness = tmp_path / "w.jsonl"
    tool = probe_tool("probe_read", "read_only", witness)
    proc = subprocess.Popen([*tool.argv, json.dumps({"probe_token": "rf", "hold": True})], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not (witness.exists() and read_witness(witness).executions[0].done) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None
        release = tmp_path / "w.jsonl.release"
        release.mkdir()
        (release / "rf").touch()
        assert proc.wait(timeout=30) == 0
    finally:
        kill(proc.pid)
        proc.wait()


def test_a_long_running_probe_outlives_its_killed_parent(tmp_path, spawner):  # noqa: F811
    tool = probe_tool("probe_unknown", "unknown", tmp_path / "w.jsonl")
    worker = spawner.python(
        "import json, subprocess, sys, time\n"
        f"subprocess.Popen({tool.argv!r} + [json.dumps({{'probe_token': 'long', 'sleep_s': 60}})])\n"
        "time.sleep(60)\n")
    deadline = time.monotonic() + 30
    while not (tmp_path / "w.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    report, children = kill_worker_only(worker.pid)
    assert report.ok and worker.wait(timeout=10) < 0
    (execution,) = read_witness(tmp_path / "w.jsonl").executions
    assert [c.pid for c in children] == [execution.pid]
    assert execution.alive() and not execution.done  # reconnect, do not re-run: the child still runs
    assert kill(ProcRef(execution.pid, execution.create_time)).ok
    assert not execution.alive()


def test_probe_runs_as_a_module_too(tmp_path):
    done = subprocess.run([sys.executable, "-m", "recoverykit.conformance.probe", "--witness", str(tmp_path / "w"),
                           "--name", "p", "--effect-class", "read_only", json.dumps({"probe_token": "m"})],
                          capture_output=True, text=True, timeout=60, env={**os.environ})
    assert done.returncode == 0 and read_witness(tmp_path / "w").count("m") == 1


def test_every_environment_point_is_reachable_by_the_environment():
    from recoverykit.conformance import env_points

    assert set(env_points.ENVIRONMENT_POINTS) == set(env_points.PROVIDER_POINTS) | set(env_points.PROBE_POINTS)
    assert env_points.provider_fault("provider.request.inflight").at_chunk == 0
    assert env_points.provider_fault("provider.response.midstream", attempts=[1]).at_chunk == 2
    assert env_points.probe_arguments("tool.finished.uncommitted") == {"hold": True}
    assert env_points.probe_arguments("tool.running", sleep_s=5) == {"sleep_s": 5}
    with pytest.raises(InvalidArgument):
        env_points.provider_fault("tool.running")
    with pytest.raises(InvalidArgument):
        env_points.probe_arguments("provider.request.inflight")


def test_a_provider_tool_call_is_attributed_by_its_probe_token(tmp_path):
    import openai
    from recoverykit.conformance.provider import ScriptedProvider
    from recoverykit.conformance.witness import wait_for_execution

    script = {"scripts": [{"id": "attr", "steps": [{"tool_calls": [{"name": "probe_unknown",
                                                                    "arguments": {"sleep_s": 30}}]}]}]}
    tool = probe_tool("probe_unknown", "unknown", tmp_path / "w.jsonl")
    with ScriptedProvider(script, tmp_path / "ledger.jsonl") as provider:
        reply = openai.OpenAI(base_url=provider.base_url, api_key="x", max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "[[rk-script:attr]]"}])
        call = reply.choices[0].message.tool_calls[0]
        proc = subprocess.Popen([*tool.argv, call.function.arguments], stdout=subprocess.DEVNULL)
        try:
            running = wait_for_execution(tmp_path / "w.jsonl", "attr.0.1.0", timeout=30)  # tool.running
            assert running.pid == proc.pid and running.alive() and not running.done
            provider.wait_settled()
            assert provider.records()[-1]["probe_tokens"] == ["attr.0.1.0"]
        finally:
            kill(proc.pid)
            proc.wait()
    with pytest.raises(TimeoutError):
        wait_for_execution(tmp_path / "w.jsonl", "attr.0.1.0", timeout=0.05, finished=True)


def test_a_detached_probe_leads_its_own_session(tmp_path):
    witness = tmp_path / "w.jsonl"
    tool = probe_tool("probe_unknown", "unknown", witness)
    proc = subprocess.Popen([*tool.argv, json.dumps({"probe_token": "d", "detach": True, "sleep_s": 60})],
                            stdout=subprocess.DEVNULL)
    try:
        from recoverykit.conformance.witness import wait_for_execution

        running = wait_for_execution(witness, "d", timeout=30)
        assert os.getsid(running.pid) == running.pid != os.getsid(0)
    finally:
        kill(proc.pid)
        proc.wait()


# --- the probe's own JSON (it avoids importing json: ~10 ms of every tool call) -----------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=12)
flat_records = st.dictionaries(st.text(), st.none() | st.booleans() | st.integers() | st.text()
                               | st.floats(allow_nan=False, allow_infinity=False), max_size=8)


@given(json_values, st.sampled_from(["", " ", "\n\t "]))
def test_probe_loads_reads_what_json_writes(value, blank):
    assert loads(blank + json.dumps(value) + blank) == value


@given(flat_records)
def test_probe_dumps_writes_what_json_writes(record):
    assert dumps(record) == json.dumps(record, sort_keys=True)


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} x', '{"a": }', "NaN x", "[1,]"])
def test_probe_loads_refuses_what_json_refuses(text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        loads(text)


def test_an_external_operation_starts_answers_queries_and_may_complete_by_itself(tmp_path):
    """probe_external (profile waits): its call starts op-<token>; a query leaves a witness line (never an
    execution) and answers the state the kit set, or completed once ``complete_after_s`` has passed."""
    from recoverykit.conformance.probe_tools import external_dir
    from recoverykit.conformance.witness import read_witness

    witness = tmp_path / "w.jsonl"
    tool = probe_tool("probe_external", "idempotent", witness, external_dir=external_dir(witness))
    done = _run(tool, {"probe_token": "s.0.1.0", "complete_after_s": 0.3})
    assert json.loads(done.stdout)["wait"] == {"handle": "op-s.0.1.0", "version": "1"}
    first = json.loads(_run(tool, {"query": "op-s.0.1.0"}).stdout)
    time.sleep(0.4)
    later = json.loads(_run(tool, {"query": "op-s.0.1.0"}).stdout)
    assert (first["state"], later["state"]) == ("running", "completed")
    log = read_witness(witness)
    assert [e.probe_token for e in log.executions] == ["s.0.1.0"]
    assert [r["state"] for r in log.records if r.get("phase") == "query"] == ["running", "completed"]
