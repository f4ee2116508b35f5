"""The Goal profile's kit side: the provider's verifier role and the Goal checks on hand-made evidence.

The end-to-end runs (certify's Goal scenarios, chaos over them, each Goal mutant killed naming its clause) are in
tests/test_certify.py, tests/test_mutants.py and benchmarks; these tests pin the pieces they rest on.
"""

from __future__ import annotations

import json

import openai
from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_goals import check_achieved_was_verified, check_verifier_read_only
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.provider import ScriptedProvider
from recoverykit.conformance.provider_ledger import read_ledger
from recoverykit.conformance.provider_script import ROLE_HEADER, script_tag
from recoverykit.conformance.scenarios_goals import verdict, work
from recoverykit.model.catalogue import Verdict

SCRIPT = {"scripts": [{"id": "g", "usage_style": "final", "steps": [work("[[goal:candidate]] one"),
                                                                     work("[[goal:candidate]] two")],
                       "verifier": {"1": verdict("unmet"), "2": verdict("met", 1)}}]}


def _ask(provider, n_assistant: int, *, role: str | None = None, tools: bool = False) -> str:
    client = openai.OpenAI(base_url=provider.base_url, api_key="unused", max_retries=0, timeout=30)
    messages = [{"role": "user", "content": f"goal {script_tag('g')}"}]
    messages += [{"role": "assistant", "content": f"answer {i}"} for i in range(n_assistant)]
    extra = {"extra_headers": {ROLE_HEADER: role}} if role else {}
    if tools:
        extra["tools"] = [{"type": "function", "function": {"name": "probe_unknown", "parameters": {"type": "object"}}}]
    return client.chat.completions.create(model="m", messages=messages, **extra).choices[0].message.content


def test_a_verifier_request_is_answered_by_the_worker_steps_delivered_before_it(tmp_path):
    with ScriptedProvider(SCRIPT, tmp_path / "ledger.jsonl") as provider:
        assert "one" in _ask(provider, 0)
        first = json.loads(_ask(provider, 0, role="verifier"))  # the verifier sees no assistant turns: no matter
        assert first["requirements"]["objective"]["verdict"] == "unmet"
        assert "two" in _ask(provider, 1)
        again = json.loads(_ask(provider, 5, role="verifier", tools=True))
        assert again["requirements"]["objective"] == {"verdict": "met", "evidence": ["step:1"]}
    requests = [r for r in read_ledger(tmp_path / "ledger.jsonl") if r["event"] == "request"]
    assert [r["role"] for r in requests] == ["worker", "verifier", "worker", "verifier"]
    assert [r["step"] for r in requests] == [0, 1, 1, 2] and requests[-1]["tools_offered"] == ["probe_unknown"]
    # a new provider on the same ledger (the kit restarted) keeps counting the delivered worker steps
    with ScriptedProvider(SCRIPT, tmp_path / "ledger.jsonl") as provider:
        assert json.loads(_ask(provider, 0, role="verifier"))["requirements"]["objective"]["verdict"] == "met"


def _evidence(ledger: list[dict], goals_state: str = "achieved", update_at: float | None = None) -> Evidence:
    clock = iter(range(100, 10_000))
    rec = Recorder(clock=lambda: float(next(clock)))
    invoke = rec.invoke("goal_create", {"session_id": "s", "objective": f"{script_tag('g')} x", "budget": None})
    rec.complete(invoke, "ok", {"goal_id": "g1", "work_id": "w1", "revision": 1})
    if update_at is not None:
        up = rec.invoke("goal_update", {"goal_id": "g1", "revision": 1, "objective": "y", "reason": None})
        rec.complete(up, "ok", {"goal_id": "g1", "revision": 2})
    rec.observe({"goals": [{"goal_id": "g1", "work_id": "w1", "state": goals_state, "phase": None, "revision": 1,
                            "can_resume": False, "can_verify": False, "can_end": False, "reason_code": None,
                            "budget": None, "acceptance": None}]})
    return Evidence(rec.history, ledger)


def _call(seq: int, t: float, role: str, text: str, tools: list[str] | None = None) -> list[dict]:
    return [{"event": "request", "seq": seq, "time": t, "script_id": "g", "step": 0, "role": role,
             "request_id": f"r{seq}", "tools_offered": tools or []},
            {"event": "response", "seq": seq, "time": t + 0.2, "status": 200, "delivered": True, "text_sent": text}]


def _verdicts(results) -> dict[str, Verdict]:
    return {r.clause_id: r.verdict for r in results}


def test_achieved_without_a_verifier_request_breaks_acc_06_and_goal_04():
    ev = _evidence(_call(1, 100.1, "worker", "[[goal:candidate]] done"))
    got = _verdicts(check_achieved_was_verified(ev))
    assert got["ACC-06"] is Verdict.INVALID and got["GOAL-04"] is Verdict.INVALID


def test_achieved_on_a_met_reply_with_evidence_holds_and_without_evidence_breaks_acc_10():
    met = verdict("met", 0)["text"]
    ledger = _call(1, 100.1, "worker", "[[goal:candidate]] done") + _call(2, 100.5, "verifier", met)
    assert _verdicts(check_achieved_was_verified(_evidence(ledger)))["GOAL-04"] is Verdict.VALID
    bare = _call(1, 100.1, "worker", "[[goal:candidate]] done") + _call(2, 100.5, "verifier", verdict("met")["text"])
    assert _verdicts(check_achieved_was_verified(_evidence(bare)))["ACC-10"] is Verdict.INVALID


def test_a_verifier_offered_a_write_tool_breaks_acc_05():
    ledger = _call(1, 100.1, "verifier", verdict("met", 0)["text"], tools=["probe_unknown"])
    got = _verdicts(check_verifier_read_only(_evidence(ledger)))
    assert got["ACC-05"] is Verdict.INVALID
    ok = _call(1, 100.1, "verifier", verdict("met", 0)["text"], tools=["probe_read"])
    assert _verdicts(check_verifier_read_only(_evidence(ok)))["ACC-05"] is Verdict.VALID


def test_no_goal_in_the_run_means_no_goal_verdicts():
    rec = Recorder()
    rec.observe({"work_items": []})
    assert check_achieved_was_verified(Evidence(rec.history, [])) == []
