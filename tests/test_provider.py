"""The scripted provider served to a real ``openai`` client: replies, usage, faults and the ledger."""

import json
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest
from recoverykit.conformance.provider import ProviderTimeout, ScriptedProvider
from recoverykit.conformance.provider_ledger import calls, read_ledger
from recoverykit.conformance.provider_script import script_tag

try:  # the installed openai may ship its HTTP stack as httpx or as httpx2
    import httpx2 as _http
except ImportError:  # pragma: no cover
    import httpx as _http

TRANSPORT_ERRORS = (openai.APIError, _http.HTTPError)

SCRIPT = {"scripts": [
    {"id": "t1", "steps": [
        {"tool_calls": [{"name": "probe_unknown", "arguments": {"sleep_s": 0}}],
         "usage": {"prompt_tokens": 20, "completion_tokens": 8}},
        {"text": "all done now", "usage": {"prompt_tokens": 40, "completion_tokens": 3}}]},
    {"id": "cumul", "cumulative_usage": True, "steps": [
        {"text": "abcdefghij", "chunks": 5, "usage": {"prompt_tokens": 7, "completion_tokens": 10}}]},
    {"id": "faulty", "steps": [
        {"text": "fine", "faults": [{"kind": "error", "status": 503, "attempts": [1]},
                                    {"kind": "cut", "at_chunk": 2, "attempts": [2]},
                                    {"kind": "hold", "at_chunk": 0, "attempts": [3]}]}]},
    {"id": "midhold", "steps": [{"text": "abcdef", "faults": [{"kind": "hold", "at_chunk": 1, "then": "cut"}]}]},
]}


@pytest.fixture
def provider(tmp_path):
    with ScriptedProvider(SCRIPT, tmp_path / "ledger.jsonl") as p:
        yield p


def _client(provider, **kw):
    return openai.OpenAI(base_url=provider.base_url, api_key="unused", max_retries=0, timeout=30, **kw)


def _user(script_id):
    return [{"role": "user", "content": f"please work {script_tag(script_id)}"}]


def test_a_streamed_tool_round_trip_matches_the_ledger(provider, tmp_path):
    client = _client(provider)
    stream = client.chat.completions.create(model="m", messages=_user("t1"), stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    calls_seen = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert [tc.function.name for tc in calls_seen] == ["probe_unknown"]
    arguments = json.loads(calls_seen[0].function.arguments)
    assert arguments == {"probe_token": "t1.0.1.0", "sleep_s": 0}
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 28
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"

    messages = [*_user("t1"), {"role": "assistant", "content": None,
                               "tool_calls": [calls_seen[0].model_dump(exclude={"index"})]},
                {"role": "tool", "tool_call_id": calls_seen[0].id, "content": "ok"}]
    reply = client.chat.completions.create(model="m", messages=messages,
                                           extra_headers={"X-Request-Id": "my-req-1", "Idempotency-Key": "k-1"})
    assert reply.choices[0].message.content == "all done now" and reply.usage.completion_tokens == 3

    provider.wait_settled()
    records = read_ledger(tmp_path / "ledger.jsonl")
    assert records == provider.records()  # the durable file holds exactly what was recorded
    first, second = calls(records)
    assert (first.request["script_id"], first.request["step"], first.request["attempt"]) == ("t1", 0, 1)
    assert first.request["stream"] and first.request["include_usage"]
    assert first.delivered and first.usage_billed == first.usage_reported == {
        "prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}
    assert first.response["probe_tokens"] == ["t1.0.1.0"]
    assert second.request["request_id"] == "my-req-1" and second.request["request_id_source"] == "header"
    assert second.request["step"] == 1 and second.delivered and second.usage_billed["total_tokens"] == 43
    assert second.request["idempotency_key"] == "k-1" and first.request["idempotency_key"] is None
    assert second.request["roles"] == {"user": 1, "assistant": 1, "tool": 1}
    assert second.request["tool_results_for"] == [calls_seen[0].id]
    assert first.request["messages_sha256"] != second.request["messages_sha256"]


def test_cumulative_usage_rises_in_every_chunk(provider):
    chunks = list(_client(provider).chat.completions.create(model="m", messages=_user("cumul"), stream=True))
    usages = [c.usage.completion_tokens for c in chunks]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "abcdefghij"
    assert usages == sorted(usages) and usages[-1] == 10 and len(usages) == 6
    assert all(c.usage.prompt_tokens == 7 for c in chunks)
    provider.wait_settled()
    assert provider.records()[-1]["usage_reported"]["completion_tokens"] == 10


def test_no_usage_in_a_stream_unless_asked(provider):
    chunks = list(_client(provider).chat.completions.create(model="m", messages=_user("t1"), stream=True))
    assert all(c.usage is None for c in chunks)
    provider.wait_settled()
    response = provider.records()[-1]
    assert response["usage_reported"] is None and response["usage_billed"]["total_tokens"] == 28


def test_faults_by_attempt_error_cut_hold(provider):
    client = _client(provider)
    with pytest.raises(openai.InternalServerError) as info:  # attempt 1: 503 with an OpenAI error body
        client.chat.completions.create(model="m", messages=_user("faulty"), stream=True)
    assert info.value.status_code == 503 and info.value.body["code"] == "scripted_error"

    with pytest.raises(TRANSPORT_ERRORS):  # attempt 2: cut after 2 chunks
        list(client.chat.completions.create(model="m", messages=_user("faulty"), stream=True))

    result = []
    t = threading.Thread(target=lambda: result.append(
        client.chat.completions.create(model="m", messages=_user("faulty"))))
    t.start()  # attempt 3: held before the response starts, then released
    held = provider.wait_for_held(timeout=30, script_id="faulty")
    assert (held.step, held.attempt, held.at_chunk) == (0, 3, 0)
    assert provider.release(held) == 1
    t.join(30)
    assert result[0].choices[0].message.content == "fine"

    provider.wait_settled()
    records = provider.records()
    responses = [r for r in records if r["event"] == "response"]
    assert [r["status"] for r in responses] == [503, 200, 200]
    assert responses[0]["usage_billed"] is None and responses[0]["delivered"]
    assert not responses[1]["delivered"] and responses[1]["chunks_sent"] == 2 and responses[1]["cut"]
    assert responses[1]["usage_billed"]["total_tokens"] == 15  # billed although never fully delivered
    assert responses[2]["delivered"]
    assert [r["event"] for r in records if r["event"] in ("held", "released")] == ["held", "released"]


def test_hold_mid_stream_then_cut(provider):
    client = _client(provider)
    seen, errors = [], []

    def consume():
        try:
            for chunk in client.chat.completions.create(model="m", messages=_user("midhold"), stream=True):
                seen.append(chunk)
        except TRANSPORT_ERRORS as exc:
            errors.append(exc)

    t = threading.Thread(target=consume)
    t.start()
    held = provider.wait_for_held(timeout=30, script_id="midhold")
    assert held.at_chunk == 1 and held.attempt == 1
    provider.release(held)  # the script says: then cut
    t.join(30)
    assert len(seen) == 1 and errors
    provider.wait_settled()
    last = provider.records()[-1]
    assert last["event"] == "response" and not last["delivered"] and last["chunks_sent"] == 1


def test_wait_for_held_times_out(provider):
    with pytest.raises(ProviderTimeout, match="no request held"):
        provider.wait_for_held(timeout=0.05)


def test_close_cuts_held_requests(tmp_path):
    notified = []
    provider = ScriptedProvider({"scripts": [{"id": "h", "steps": [
        {"text": "x", "faults": [{"kind": "hold"}]}]}]}, tmp_path / "l.jsonl", on_held=notified.append)
    errors = []

    def call():
        try:
            _client(provider).chat.completions.create(model="m", messages=_user("h"))
        except TRANSPORT_ERRORS as exc:
            errors.append(exc)

    t = threading.Thread(target=call)
    t.start()
    held = provider.wait_for_held(timeout=30)
    deadline = time.monotonic() + 30
    while not notified and time.monotonic() < deadline:  # the callback runs on the request's thread
        time.sleep(0.01)
    assert notified == [held]
    before = threading.active_count()
    provider.close()
    t.join(30)
    assert errors and threading.active_count() < before
    records = read_ledger(tmp_path / "l.jsonl")
    assert records[-1]["event"] == "response" and not records[-1]["delivered"]


def _raw(provider, path, body: bytes | None, method="POST"):
    url = provider.base_url.removesuffix("/v1") + path
    headers = {"Content-Type": "application/json", "X-Recoverykit-Token": provider.token}  # the kit's own call
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize(("path", "body", "status", "code"), [
    ("/v1/nothing", b"{}", 404, "unknown_url"),
    ("/v1/chat/completions", b"{not json", 400, "invalid_json"),
    ("/v1/chat/completions", b'{"model": "m"}', 400, "invalid_request"),
    ("/v1/chat/completions", json.dumps({"messages": _user("nope")}).encode(), 400, "script_mismatch"),
    ("/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "no tag"}]}).encode(),
     400, "script_mismatch"),
])
def test_bad_requests_get_openai_style_errors(provider, path, body, status, code):
    got_status, payload = _raw(provider, path, body)
    assert got_status == status
    assert payload["error"]["code"] == code and payload["error"]["message"]
    assert set(payload["error"]) == {"message", "type", "param", "code"}


def test_other_methods_are_refused_openai_style(provider):
    got_status, payload = _raw(provider, "/v1/chat/completions", b"{}", method="PUT")
    code = "method_not_allowed"
    assert got_status == 405
    assert payload["error"]["code"] == code and payload["error"]["message"]
    assert set(payload["error"]) == {"message", "type", "param", "code"}


def test_exhausted_script_and_models_and_kit_endpoints(provider):
    messages = [*_user("cumul"), {"role": "assistant", "content": "abcdefghij"}, {"role": "user", "content": "more"}]
    status, payload = _raw(provider, "/v1/chat/completions", json.dumps({"messages": messages}).encode())
    assert status == 400 and "has 1 steps" in payload["error"]["message"]
    status, models = _raw(provider, "/v1/models", None, method="GET")
    assert status == 200 and models["data"][0]["id"] == "recoverykit-scripted"
    assert _raw(provider, "/_kit/held", None, method="GET") == (200, [])
    status, ledger = _raw(provider, "/_kit/ledger", None, method="GET")
    assert status == 200 and ledger[0]["event"] == "request"
    assert _raw(provider, "/_kit/release", b"{}") == (200, {"released": 0})


def test_attempts_count_per_script_step(provider):
    client = _client(provider)
    for _ in range(3):
        client.chat.completions.create(model="m", messages=_user("t1"))
    provider.wait_settled()
    assert [c.request["attempt"] for c in calls(provider.records())] == [1, 2, 3]
    tokens = [c.response["probe_tokens"][0] for c in calls(provider.records())]
    assert tokens == ["t1.0.1.0", "t1.0.2.0", "t1.0.3.0"]  # unique per delivered tool call


def test_a_held_request_ends_when_its_client_is_killed(tmp_path):
    import subprocess
    import sys

    from recoverykit.conformance.killer import kill

    script = {"scripts": [{"id": "k", "steps": [{"text": "never seen", "faults": [{"kind": "hold"}]}]}]}
    with ScriptedProvider(script, tmp_path / "l.jsonl") as provider:
        code = ("import openai\n"
                f"openai.OpenAI(base_url={provider.base_url!r}, api_key='x', max_retries=0).chat.completions.create("
                "model='m', messages=[{'role': 'user', 'content': 'hi'}], stream=True)\n")
        runtime = subprocess.Popen([sys.executable, "-c", code])
        try:
            held = provider.wait_for_held(timeout=60)  # provider.request.inflight, reached from outside
            assert kill(runtime.pid).ok
        finally:
            kill(runtime.pid)
            runtime.wait()
        provider.wait_settled(timeout=30)  # no release needed: the provider notices the client is gone
        records = provider.records()
        released = next(r for r in records if r["event"] == "released")
        assert released["client_gone"] and released["seq"] == held.seq
        response = records[-1]
        assert response["event"] == "response" and not response["delivered"] and response["chunks_sent"] == 0
        assert provider.held() == []


def test_a_stall_trips_a_client_read_timeout_and_the_ledger_says_so(tmp_path):
    script = {"scripts": [{"id": "st", "steps": [{"text": "slow reply", "chunks": 2,
                                                   "faults": [{"kind": "stall", "at_chunk": 1, "seconds": 30,
                                                               "attempts": [1]}]}]}]}
    with ScriptedProvider(script, tmp_path / "l.jsonl") as provider:
        client = openai.OpenAI(base_url=provider.base_url, api_key="x", max_retries=0, timeout=0.5)
        seen = []
        with pytest.raises(TRANSPORT_ERRORS):
            for chunk in client.chat.completions.create(model="m", messages=_user("st"), stream=True):
                seen.append(chunk)
        assert len(seen) == 1
        provider.wait_settled(timeout=30)  # the provider notices the client left during the stall
        again = list(_client(provider).chat.completions.create(model="m", messages=_user("st"), stream=True))
        provider.wait_settled()
    assert "".join(c.choices[0].delta.content or "" for c in again) == "slow reply"
    records = provider.records()
    assert [r["event"] for r in records if r["seq"] == 1] == ["request", "stalled", "response"]
    first = next(r for r in records if r["event"] == "response" and r["seq"] == 1)
    assert not first["delivered"] and first["chunks_sent"] == 1


def test_a_new_provider_on_the_same_ledger_continues_its_numbering(tmp_path):
    script = {"scripts": [{"id": "r", "steps": [{"tool_calls": [{"name": "probe_read"}]}]}]}
    tokens = []
    for _ in range(2):  # e.g. the kit restarted between two phases of one run
        with ScriptedProvider(script, tmp_path / "l.jsonl") as provider:
            reply = _client(provider).chat.completions.create(model="m", messages=_user("r"))
            tokens.append(json.loads(reply.choices[0].message.tool_calls[0].function.arguments)["probe_token"])
            provider.wait_settled()
    assert tokens == ["r.0.1.0", "r.0.2.0"]
    assert [c.request["seq"] for c in calls(read_ledger(tmp_path / "l.jsonl"))] == [1, 2]


def test_a_taken_port_is_an_environment_fault(provider, tmp_path):
    from recoverykit.errors import EnvironmentFault

    with pytest.raises(EnvironmentFault, match="cannot listen"):
        ScriptedProvider(SCRIPT, tmp_path / "other.jsonl", port=provider.port)


def test_reused_call_ids_a_cut_answer_kept_and_probe_tokens_per_message(tmp_path):
    script = {"scripts": [
        {"id": "ru", "reuse_call_ids": True, "steps": [
            {"tool_calls": [{"name": "probe_read"}]}, {"tool_calls": [{"name": "probe_read"}]}, {"text": "end"}]},
        {"id": "ct", "steps": [{"text": "abcdefghi", "faults": [{"kind": "cut", "at_chunk": 2, "attempts": [1]}]}]}]}
    with ScriptedProvider(script, tmp_path / "ledger.jsonl") as p:
        client = _client(p)
        first = client.chat.completions.create(model="m", messages=_user("ru")).choices[0].message
        history = [*_user("ru"), first.model_dump(exclude_none=True),
                   {"role": "tool", "tool_call_id": first.tool_calls[0].id,
                    "content": json.dumps({"probe_token": "ru.0.1.0", "outcome": "ok"})}]
        second = client.chat.completions.create(model="m", messages=history).choices[0].message
        assert first.tool_calls[0].id == second.tool_calls[0].id == "call_0"  # ids repeat across responses
        with pytest.raises(TRANSPORT_ERRORS):
            list(client.chat.completions.create(model="m", messages=_user("ct"), stream=True))
        p.wait_settled()
        partial = [r for r in p.records() if r["event"] == "response"][-1]["text_sent"]
        assert partial and "abcdefghi".startswith(partial) and partial != "abcdefghi"
        kept = [*_user("ct"), {"role": "assistant", "content": partial + " [interrupted]"}]
        again = client.chat.completions.create(model="m", messages=kept)  # the partial answers no step
        assert again.choices[0].message.content == "abcdefghi"
        p.wait_settled()
        requests = [r for r in p.records() if r["event"] == "request"]
    assert requests[1]["messages"][2]["probe_tokens"] == ["ru.0.1.0"]
    assert (requests[-1]["step"], requests[-1]["attempt"]) == (0, 2)
