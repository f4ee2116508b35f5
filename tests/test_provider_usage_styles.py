"""The provider's three usage styles (final, cumulative, none), its per-attempt response ids, and receipts
matched to attempts by response id: on the wire (raw HTTP and the ``openai`` client), in the ledger, and
as the history checker judges them."""

from __future__ import annotations

import http.client
import json

import openai
import pytest
from pydantic import ValidationError
from recoverykit.conformance.checker import Evidence, check
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.provider import ScriptedProvider
from recoverykit.conformance.provider_ledger import calls
from recoverykit.conformance.provider_script import ProviderScript, script_tag
from recoverykit.model.catalogue import Verdict

USAGE = {"prompt_tokens": 7, "completion_tokens": 10}
WHOLE = {**USAGE, "total_tokens": 17}
STYLES = ("final", "cumulative", "none")


def _script(**extra) -> dict:
    steps = [{"text": "abcdefghij", "chunks": 5, "usage": USAGE}]
    return {"scripts": [{"id": style, "usage_style": style, "steps": steps} for style in STYLES]
            + [{"id": "cut-" + style, "usage_style": style,
                "steps": [{**steps[0], "faults": [{"kind": "cut", "at_chunk": 2}]}]} for style in STYLES], **extra}


@pytest.fixture
def provider(tmp_path):
    with ScriptedProvider(_script(), tmp_path / "ledger.jsonl") as p:
        yield p


def _raw(provider, script_id: str, *, stream: bool = True, include_usage: bool | None = True,
         request_id: str | None = None) -> tuple[dict[str, str], list[dict] | dict]:
    """POST without any client library: (response headers, the parsed SSE chunks or the JSON body)."""
    body: dict = {"model": "m", "messages": [{"role": "user", "content": f"go {script_tag(script_id)}"}],
                  "stream": stream}
    if include_usage is not None:
        body["stream_options"] = {"include_usage": include_usage}
    conn = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=30)
    try:
        headers = {"Content-Type": "application/json", **({"X-Request-Id": request_id} if request_id else {})}
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
        resp = conn.getresponse()
        got_headers = {k.lower(): v for k, v in resp.getheaders()}
        if not stream:
            return got_headers, json.loads(resp.read())
        events = []
        try:
            for raw in resp:
                line = raw.decode().strip()
                if line.startswith("data:"):
                    events.append(line[5:].strip())
        except http.client.IncompleteRead:
            pass
    finally:
        conn.close()
    assert not events or events[-1] == "[DONE]" or script_id.startswith("cut-")
    return got_headers, [json.loads(e) for e in events if e != "[DONE]"]


def _last_response(provider) -> dict:
    provider.wait_settled()
    return [r for r in provider.records() if r["event"] == "response"][-1]


# --- on the wire, raw HTTP ---------------------------------------------------------------------------


def test_final_is_one_usage_chunk_only_when_asked(provider):
    _, chunks = _raw(provider, "final")
    assert [c for c in chunks if c.get("usage")] == [chunks[-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == WHOLE
    assert all("usage" in c and c["usage"] is None for c in chunks[:-1])  # OpenAI: null until the end
    response = _last_response(provider)
    assert response["usage_billed"] == response["usage_reported"] == WHOLE and response["usage_chunks"] == 1

    _, chunks = _raw(provider, "final", include_usage=None)
    assert all("usage" not in c for c in chunks) and all(c["choices"] for c in chunks)
    response = _last_response(provider)
    assert response["usage_billed"] == WHOLE and response["usage_reported"] is None
    assert response["usage_chunks"] == 0


def test_cumulative_is_a_running_total_in_every_chunk(provider):
    _, chunks = _raw(provider, "cumulative", include_usage=None)
    completion = [c["usage"]["completion_tokens"] for c in chunks]
    assert len(completion) == len(chunks) == 6 and completion == sorted(completion) and completion[-1] == 10
    assert all(c["usage"]["prompt_tokens"] == 7 for c in chunks)
    response = _last_response(provider)
    assert response["usage_reported"] == response["usage_billed"] == WHOLE and response["usage_chunks"] == 6

    _, chunks = _raw(provider, "cumulative")  # with include_usage: the final usage chunk as well
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == WHOLE and all(c.get("usage") for c in chunks)
    assert _last_response(provider)["usage_chunks"] == 7


def test_none_reports_no_usage_even_when_asked(provider):
    _, chunks = _raw(provider, "none")
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "abcdefghij"
    assert all("usage" not in c and c["choices"] for c in chunks)
    response = _last_response(provider)
    assert response["usage_billed"] == WHOLE and response["usage_reported"] is None  # billed, never reported
    assert response["usage_chunks"] == 0 and response["usage_style"] == "none"


@pytest.mark.parametrize("style", STYLES)
def test_a_whole_response_carries_usage_in_its_body_unless_none(provider, style):
    _, body = _raw(provider, style, stream=False, include_usage=None)
    assert body["choices"][0]["message"]["content"] == "abcdefghij"
    if style == "none":
        assert "usage" not in body
    else:
        assert body["usage"] == WHOLE
    response = _last_response(provider)
    assert response["usage_billed"] == WHOLE
    assert response["usage_reported"] == (None if style == "none" else WHOLE)


@pytest.mark.parametrize(("style", "reported"), [("final", None), ("cumulative", {"prompt_tokens": 7,
                                                 "completion_tokens": 3, "total_tokens": 10}), ("none", None)])
def test_a_cut_stream_is_billed_whatever_the_client_could_read(provider, style, reported):
    _, chunks = _raw(provider, f"cut-{style}")
    assert len(chunks) == 2
    response = _last_response(provider)
    assert response["cut"] and not response["delivered"] and response["usage_billed"] == WHOLE
    assert response["usage_reported"] == reported


def test_every_attempt_has_its_own_response_id_in_body_and_ledger(provider):
    seen = []
    for style in STYLES:
        for _ in range(2):
            _, chunks = _raw(provider, style)
            ids = {c["id"] for c in chunks}
            assert len(ids) == 1  # every chunk of one reply carries the same id
            seen.append(ids.pop())
        _, body = _raw(provider, style, stream=False)
        seen.append(body["id"])
    assert all(i.startswith("chatcmpl-") for i in seen) and len(set(seen)) == len(seen)
    provider.wait_settled()
    ledger = calls(provider.records())
    assert [c.response_id for c in ledger] == seen
    assert [c.response["response_id"] for c in ledger] == seen and all(c.response_id_sent for c in ledger)


def test_response_ids_stay_unique_across_a_provider_restarted_on_its_ledger(tmp_path):
    ids = []
    for _ in range(2):
        with ScriptedProvider(_script(), tmp_path / "ledger.jsonl") as p:
            ids.append(_raw(p, "final", stream=False)[1]["id"])
            p.wait_settled()
    assert len(set(ids)) == 2


def test_an_error_reply_records_that_no_id_reached_the_client(tmp_path):
    script = {"scripts": [{"id": "e", "steps": [{"text": "x", "faults": [{"kind": "error", "status": 503}]}]}]}
    with ScriptedProvider(script, tmp_path / "l.jsonl") as p:
        headers, body = _raw(p, "e", stream=False)
        (call,) = calls((p.wait_settled(), p.records())[1])
    assert "error" in body and call.response["status"] == 503 and not call.response_id_sent
    assert call.response_id.startswith("chatcmpl-") and headers["x-request-id"] == call.request["request_id"]


# --- through the openai client ---------------------------------------------------------------------


def _client(provider):
    return openai.OpenAI(base_url=provider.base_url, api_key="unused", max_retries=0, timeout=30)


def _user(script_id):
    return [{"role": "user", "content": f"please {script_tag(script_id)}"}]


@pytest.mark.parametrize("style", STYLES)
def test_the_openai_client_reads_each_style(provider, style):
    client = _client(provider)
    chunks = list(client.chat.completions.create(model="m", messages=_user(style), stream=True,
                                                 stream_options={"include_usage": True}))
    usages = [c.usage for c in chunks if c.usage is not None]
    if style == "final":
        assert len(usages) == 1 and chunks[-1].usage is usages[0] and chunks[-1].choices == []
    elif style == "cumulative":
        assert len(usages) == len(chunks) and [u.completion_tokens for u in usages][-2:] == [10, 10]
    else:
        assert usages == []
    whole = client.chat.completions.create(model="m", messages=_user(style))
    assert (whole.usage is None) == (style == "none")
    provider.wait_settled()
    streamed, unstreamed = calls(provider.records())
    assert {c.id for c in chunks} == {streamed.response_id} and whole.id == unstreamed.response_id
    assert streamed.request["request_id_source"] == "generated"  # the openai client sends no X-Request-Id
    assert streamed.usage_billed == WHOLE and (streamed.usage_reported is None) == (style == "none")


# --- the old flag --------------------------------------------------------------------------------


def test_the_old_cumulative_flag_maps_onto_a_style():
    def styles(script):
        s = ProviderScript.model_validate({"scripts": [script]}).scripts[0]
        return s.style, [s.style_of(step) for step in s.steps]

    text = {"text": "x"}
    assert styles({"id": "a", "steps": [text]}) == ("final", ["final"])
    assert styles({"id": "a", "cumulative_usage": True, "steps": [text]}) == ("cumulative", ["cumulative"])
    assert styles({"id": "a", "cumulative_usage": False, "steps": [text, {**text, "cumulative_usage": True}]}) \
        == ("final", ["final", "cumulative"])
    assert styles({"id": "a", "usage_style": "none", "steps": [text, {**text, "usage_style": "final"}]}) \
        == ("none", ["none", "final"])
    with pytest.raises(ValidationError, match="contradicts"):
        ProviderScript.model_validate({"scripts": [{"id": "a", "usage_style": "none", "cumulative_usage": True,
                                                    "steps": [text]}]})
    with pytest.raises(ValidationError):
        ProviderScript.model_validate({"scripts": [{"id": "a", "usage_style": "sometimes", "steps": [text]}]})


# --- receipts matched by response id ---------------------------------------------------------------


def _evidence(ledger: list[dict], receipts: list[dict], script_id: str) -> Evidence:
    rec = Recorder(clock=iter(range(1, 10_000)).__next__)
    op = rec.invoke("submit", {"session_id": "s1", "text": f"{script_tag(script_id)} hi", "client_msg_id": "c1"})
    rec.complete(op, "ok", {"work_id": "w1", "input_id": "i-c1"})
    rec.observe({"work_items": [], "usage_receipts": receipts}, quiescent=True)
    return Evidence(rec.history, ledger)


def _receipt(request_id: str, usage: dict | None) -> dict:
    return {"receipt_id": f"u-{request_id}", "work_id": "w1", "request_id": request_id, "attempt": 1,
            "goal_id": None, "revision": None, "prompt_tokens": usage and usage["prompt_tokens"],
            "completion_tokens": usage and usage["completion_tokens"], "usage": "known" if usage else "unknown"}


def _usage_verdicts(ev: Evidence) -> dict[str, Verdict]:
    return {r.clause_id: r.verdict for r in check(ev) if r.clause_id.startswith("USG")}


def _openai_run(provider, style: str) -> tuple[list[dict], str, openai.types.CompletionUsage | None]:
    """One streamed attempt through the openai client (no X-Request-Id): (ledger, response id, last usage)."""
    chunks = list(_client(provider).chat.completions.create(model="m", messages=_user(style), stream=True,
                                                            stream_options={"include_usage": True}))
    provider.wait_settled()
    usage = next((c.usage for c in reversed(chunks) if c.usage is not None), None)
    return provider.records(), chunks[0].id, usage


@pytest.mark.parametrize("style", STYLES)
def test_a_receipt_named_by_the_response_id_matches_its_attempt(provider, style):
    ledger, response_id, usage = _openai_run(provider, style)
    honest = _usage_verdicts(_evidence(ledger, [_receipt(response_id, usage and usage.model_dump())], style))
    assert honest["USG-03"] is honest["USG-10"] is Verdict.VALID
    # summing and a watermark differ only when usage came in more than one chunk
    assert honest["USG-05"] is (Verdict.VALID if style == "cumulative" else Verdict.UNKNOWN)


def test_a_fabricated_or_dropped_receipt_is_found_by_response_id(provider):
    ledger, response_id, _ = _openai_run(provider, "none")
    fabricated = _usage_verdicts(_evidence(ledger, [_receipt(response_id, USAGE)], "none"))
    assert fabricated["USG-10"] is Verdict.INVALID  # the provider reported nothing: known usage is invented
    dropped = _usage_verdicts(_evidence(ledger, [], "none"))
    assert dropped["USG-10"] is Verdict.INVALID
    ledger, response_id, usage = _openai_run(provider, "cumulative")
    summed = {**usage.model_dump(), "completion_tokens": usage.completion_tokens * 3}
    receipts = [_receipt(c.response_id, None) for c in calls(ledger)[:-1]] + [_receipt(response_id, summed)]
    assert _usage_verdicts(_evidence(ledger, receipts, "cumulative"))["USG-05"] is Verdict.INVALID


def test_a_receipt_naming_neither_id_is_unknown_not_valid(provider):
    ledger, _, usage = _openai_run(provider, "final")
    verdicts = _usage_verdicts(_evidence(ledger, [_receipt("my-own-id", usage.model_dump())], "final"))
    assert set(verdicts.values()) == {Verdict.UNKNOWN}


def test_the_header_id_still_matches(provider):
    _raw(provider, "final", request_id="mine-1")
    provider.wait_settled()
    ledger = provider.records()
    assert calls(ledger)[0].header_request_id == "mine-1"
    verdicts = _usage_verdicts(_evidence(ledger, [_receipt("mine-1", WHOLE)], "final"))
    assert verdicts["USG-03"] is verdicts["USG-10"] is Verdict.VALID
