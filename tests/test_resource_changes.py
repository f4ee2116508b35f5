"""Resource checks (RES-01, RES-02, RES-04, RES-06) on built evidence: an honest run passes, each broken one fails.

The honest run: two sessions; during downtime the kit takes the model of ``rm`` and the working directory of
``rd``; both wait with their precise reasons through a Retry, come back, are resumed and finish.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_resources import (
    check_continues,
    check_precise_no_switch,
    check_recheck,
    check_record_kept,
)
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.scenarios import SCENARIOS_BY_ID, required_clauses
from recoverykit.conformance.witness import Execution, WitnessLog
from recoverykit.model.catalogue import Verdict

WORKDIR = "/tmp/rk-test-workdir-rd"
PRECISE = {"w1": "resource_model_unavailable", "w2": "resource_missing_directory"}


@dataclass
class World:
    """What an honest run leaves; a test breaks one thing and checks the clause it breaks."""

    model: str = "rk-model-1"
    key: str = "k1"
    parked: dict = field(default_factory=lambda: dict(PRECISE))  # work_id -> reason shown while missing
    parked_status: str = "waiting"
    after_retry: dict = field(default_factory=dict)  # work_id -> (status, reason, desired) after the Retry
    final: dict = field(default_factory=lambda: {"w1": "finished", "w2": "finished"})
    gone_after_retry: tuple = ()
    retry_refused: bool = False
    resume_after_restore: bool = True
    requests: list = field(default_factory=list)  # extra (time, script, step, model, key, delivered, tools)
    executions: list = field(default_factory=list)  # extra (token, started, cwd)
    changes: bool = True
    late_answers: bool = True  # the final answers come after the restoration
    declared: tuple = ("credentials", "model", "working_dir")  # init_ok.resources


def _items(states: dict) -> list[dict]:
    return [{"work_id": w, "status": s, "reason_code": r, "desired_state": d} for w, (s, r, d) in states.items()]


def build(world: World) -> Evidence:
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 1.0

    def op(f, value, reply=None, kind="ok"):
        done = rec.complete(rec.invoke(f, value), kind, reply or {})
        rec.now += 0.01
        return done

    op("init", {"data_dir": "/d", "model": "rk-model-1", "api_key_sha256": "k1"},
       {"name": "x", "version": "1", "resources": list(world.declared)})
    rec.now = 2.0
    op("submit", {"session_id": "s-rm", "text": "[[rk-script:rm]] request 1", "client_msg_id": "c1"},
       {"work_id": "w1", "input_id": "i1"})
    op("submit", {"session_id": "s-rd", "text": "[[rk-script:rd]] request 1", "client_msg_id": "c2",
                  "working_dir": WORKDIR}, {"work_id": "w2", "input_id": "i2"})
    rec.now = 3.0
    rec.fault("long_downtime", pids=[1])
    rec.now = 4.0
    if world.changes:
        rec.fault("resource_missing", resource="model", script_id="rm", work_id="w1", model="rk-model-1")
        rec.fault("resource_missing", resource="working_dir", script_id="rd", work_id="w2", path=WORKDIR)
    rec.now = 5.0
    op("start", {})
    rec.now = 6.0
    rec.observe({"work_items": _items({w: (world.parked_status, r, "run") for w, r in world.parked.items()})}, True)
    rec.now = 7.0
    op("resume", {"work_id": "w1"}, {"code": "precondition_failed", "text": "no"} if world.retry_refused else {},
       "fail" if world.retry_refused else "ok")
    op("resume", {"work_id": "w2"})
    rec.now = 8.0
    states = {w: (world.parked_status, r, "run") for w, r in world.parked.items() if w not in world.gone_after_retry}
    states.update(world.after_retry)
    rec.observe({"work_items": _items(states)}, True)
    rec.now = 9.0
    if world.changes:
        rec.fault("resource_restored", resource="model", script_id="rm", work_id="w1", by="kit")
        rec.fault("resource_restored", resource="working_dir", script_id="rd", work_id="w2", by="kit")
    rec.now = 10.0
    if world.resume_after_restore:
        op("resume", {"work_id": "w1"})
        op("resume", {"work_id": "w2"})
    rec.now = 12.0
    rec.observe({"work_items": _items({w: (s, s if s == "finished" else PRECISE[w], "done" if s == "finished"
                                           else "run") for w, s in world.final.items()})}, True)

    attempts = [(5.5, "rm", 0, world.model, world.key, False, 0)]
    if world.late_answers:
        attempts += [(10.5, "rm", 0, world.model, world.key, True, 1), (11.0, "rm", 1, world.model, world.key, True, 0),
                     (10.5, "rd", 0, world.model, world.key, True, 1), (11.0, "rd", 1, world.model, world.key, True, 0)]
    attempts += world.requests
    ledger = []
    for seq, (t, script, step, model, key, delivered, tools) in enumerate(attempts, start=1):
        ledger.append({"event": "request", "seq": seq, "time": t, "request_id": f"{script}.s{step}.a{seq}",
                       "request_id_source": "header", "script_id": script, "step": step, "script_steps": 2,
                       "model": model, "api_key_sha256": key})
        ledger.append({"event": "response", "seq": seq, "time": t + 0.1, "delivered": True,
                       "status": 200 if delivered else 404, "refused": None if delivered else "model_not_found",
                       "probe_tokens": [f"{script}.{step}.{seq}.{i}" for i in range(tools)]})
    runs = [("rm.0.2.0", 10.7, "/work/somewhere"), ("rd.0.4.0", 10.7, WORKDIR)] if world.late_answers else []
    executions = [Execution(token, "probe_read", "read_only", 100 + i, 1.0, started, started + 0.1, "ok", 0,
                            emitted=True, cwd=cwd, tool_version="1")
                  for i, (token, started, cwd) in enumerate([*runs, *world.executions])]
    return Evidence(rec.history, ledger, WitnessLog([], executions, None), frozenset({"work_items"}))


def verdicts(world: World) -> dict[str, Verdict]:
    ev = build(world)
    return {r.clause_id: r.verdict for fn in (check_recheck, check_precise_no_switch, check_record_kept,
                                              check_continues) for r in fn(ev)}


def test_an_honest_run_holds_every_resource_clause():
    assert verdicts(World()) == {c: Verdict.VALID for c in ("RES-01", "RES-02", "RES-04", "RES-06")}


def test_without_a_resource_change_nothing_is_judged():
    world = World(changes=False)
    assert set(verdicts(world).values()) == {Verdict.UNKNOWN}


@pytest.mark.parametrize("world", [
    World(executions=[("rd.0.1.0", 6.5, WORKDIR)]),  # the tool of the session whose directory is gone started
    World(requests=[(6.2, "rm", 1, "rk-model-1", "k1", True, 0)]),  # its final answer was delivered meanwhile
], ids=["tool_started_while_missing", "final_answer_while_missing"])
def test_going_on_while_a_resource_is_missing_breaks_res_01(world):
    assert verdicts(world)["RES-01"] is Verdict.INVALID


@pytest.mark.parametrize("world", [
    World(parked={"w1": "retry_exhausted", "w2": PRECISE["w2"]}),  # a generic reason
    World(parked={"w1": "resource_missing_credentials", "w2": PRECISE["w2"]}),  # another resource's reason
    World(parked={"w1": "resource_gone", "w2": PRECISE["w2"]}),  # a made-up reason
    World(parked_status="paused"),  # parked as a Pause, not waiting
    World(parked={"w2": PRECISE["w2"]}, after_retry={"w1": ("queued", "queued", "run")}),  # never shown waiting
    World(requests=[(7.5, "rm", 0, "gpt-4o-mini", "k1", True, 1)]),  # another model
    World(requests=[(7.5, "rm", 0, "rk-model-1", "k-other", False, 0)]),  # another credential
    World(executions=[("rd.0.9.0", 11.5, "/tmp")]),  # a tool of the session outside its working directory
], ids=["generic", "other_resource", "made_up", "paused", "never_waiting", "model_switch", "key_switch",
        "directory_switch"])
def test_an_imprecise_reason_or_a_switch_breaks_res_02(world):
    assert verdicts(world)["RES-02"] is Verdict.INVALID


@pytest.mark.parametrize("world", [
    World(gone_after_retry=("w1",)),  # deleted on a persistent fault
    World(after_retry={"w1": ("failed", "resource_model_unavailable", "run")}),  # failed
    World(after_retry={"w1": ("cancelled", "user_cancelled", "cancelled")}),  # ended by the runtime
    World(retry_refused=True),  # the offered Retry refused
], ids=["deleted", "failed", "ended", "retry_refused"])
def test_giving_up_the_pending_recovery_record_breaks_res_04(world):
    assert verdicts(world)["RES-04"] is Verdict.INVALID


@pytest.mark.parametrize("world", [
    World(final={"w1": "waiting", "w2": "finished"}),  # resumed after restoration, never continued
    World(late_answers=False, final={"w1": "finished", "w2": "finished"}),  # says finished, no final answer sent
], ids=["still_waiting", "finished_without_answer"])
def test_held_work_that_does_not_continue_breaks_res_06(world):
    assert verdicts(world)["RES-06"] is Verdict.INVALID


def test_a_key_is_binding_only_for_an_adapter_declaring_credentials():
    own_key = [(7.5, "rm", 0, "rk-model-1", "its-own-key", False, 0)]
    assert verdicts(World(requests=own_key, declared=("model", "working_dir")))["RES-02"] is Verdict.VALID
    assert verdicts(World(requests=own_key))["RES-02"] is Verdict.INVALID


def test_a_users_pause_while_missing_is_not_an_imprecise_reason():
    world = World(after_retry={"w1": ("paused", "user_paused", "paused")})
    ev = build(world)
    pause = next(op for op in ev.history.ops if op.f == "resume" and op.type == "invoke")
    ev.history.events[pause.index] = type(pause)(pause.index, "invoke", "pause", {"work_id": "w1"}, pause.time)
    ev.history.events[pause.index + 1] = type(pause)(pause.index + 1, "ok", "pause", {}, pause.time, pause.index)
    results = {r.clause_id: r.verdict for fn in (check_precise_no_switch, check_record_kept) for r in fn(ev)}
    assert results == {"RES-02": Verdict.VALID, "RES-04": Verdict.VALID}


def test_res_06_needs_the_users_action_after_the_restoration():
    assert verdicts(World(resume_after_restore=False, final={"w1": "waiting", "w2": "waiting"}))["RES-06"] \
        is Verdict.UNKNOWN


def test_the_scenario_applies_only_to_an_adapter_declaring_a_resource():
    scenario = SCENARIOS_BY_ID["resources_after_downtime"]

    class Declared:  # what the scenario reads of a Run
        def __init__(self, *resources: str) -> None:
            self.resources = set(resources)

    assert scenario.missing_capability(Declared("model")) is None
    assert "init_ok.resources" in scenario.missing_capability(Declared())
    assert {"RES-01", "RES-02", "RES-04", "RES-06"} <= set(scenario.clauses) <= required_clauses("chat_core")


# --- the kit's side of a resource change: the provider's refusals and the probe's directory -----------------


def test_the_provider_refuses_a_missing_model_and_a_revoked_key_as_openai_does(tmp_path):
    import openai
    from recoverykit.conformance.provider import ScriptedProvider, key_fingerprint
    from recoverykit.conformance.provider_script import script_tag

    script = {"scripts": [{"id": "rm", "steps": [{"text": "done"}]}, {"id": "rc", "steps": [{"text": "done"}]}]}
    with ScriptedProvider(script, tmp_path / "ledger.jsonl") as provider:
        provider.models.add("m1")
        client = openai.OpenAI(base_url=provider.base_url, api_key="sk-test-secret", max_retries=0)

        def ask(sid: str, model: str = "m1"):
            return client.chat.completions.create(model=model, messages=[{"role": "user", "content": script_tag(sid)}])

        provider.refuse("rm", model="m1")
        provider.refuse("rc", api_key="sk-test-secret")
        with pytest.raises(openai.NotFoundError) as missing:
            ask("rm")
        assert missing.value.code == "model_not_found"
        with pytest.raises(openai.AuthenticationError) as revoked:
            ask("rc")
        assert revoked.value.code == "invalid_api_key"
        assert ask("rm", model="another").choices[0].message.content == "done"  # a switch would be served...
        assert "m1" in [m.id for m in client.models.list()]  # missing for one session only: still listed
        provider.restore("rm")
        provider.restore("rc")
        assert ask("rm").choices[0].message.content == ask("rc").choices[0].message.content == "done"
        provider.wait_settled()  # a response record is written just after the reply went out
        records = provider.records()
    requests = [r for r in records if r["event"] == "request"]
    assert [r["model"] for r in requests] == ["m1", "m1", "another", "m1", "m1"]  # ...and seen in the ledger
    assert {r["api_key_sha256"] for r in requests} == {key_fingerprint("sk-test-secret")}
    assert "sk-test-secret" not in json.dumps(records)  # a fingerprint, never the key
    refused = [r.get("refused") for r in records if r["event"] == "response"]
    assert refused == ["model_not_found", "invalid_api_key", None, None, None]
    assert [r["event"] for r in records if r["event"].startswith("resource_")] == ["resource_refused"] * 2 + \
        ["resource_restored"] * 2


def test_the_probe_records_the_directory_it_ran_in(tmp_path):
    import subprocess
    import sys

    from recoverykit.conformance.probe_tools import probe_tool
    from recoverykit.conformance.witness import read_witness

    workdir = tmp_path / "wd"
    workdir.mkdir()
    tool = probe_tool("probe_read", "read_only", tmp_path / "w.jsonl", version="2", python=sys.executable)
    subprocess.run([*tool.argv, '{"probe_token": "t.0.1.0"}'], cwd=workdir, check=True, capture_output=True)
    (execution,) = read_witness(tmp_path / "w.jsonl").executions
    assert execution.cwd == str(workdir.resolve()) and execution.tool_version == "2"
