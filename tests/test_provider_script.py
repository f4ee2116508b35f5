"""The provider script: deterministic selection, validation, and streamed replies that add up."""

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from recoverykit.conformance.provider import ScriptedProvider
from recoverykit.conformance.provider_script import ProviderScript, Usage, script_tag

ids = st.from_regex(r"[A-Za-z0-9_.\-]{1,12}", fullmatch=True)
roles = st.sampled_from(["user", "assistant", "tool", "system"])


@given(script_id=ids, others=st.lists(st.tuples(roles, st.text(max_size=20)), max_size=8),
       where=st.integers(0, 8))
def test_the_tag_picks_the_script_and_assistant_messages_pick_the_step(script_id, others, where):
    script = ProviderScript.model_validate({"scripts": [{"id": script_id, "steps": [{"text": "a"}]},
                                                        {"id": "zz-other", "steps": [{"text": "b"}]}]})
    messages = [{"role": r, "content": t.replace("[[", "")} for r, t in others]
    messages.insert(min(where, len(messages)), {"role": "user", "content": f"go {script_tag(script_id)} now"})
    chosen, step, why = script.select(messages)
    assert chosen is not None and chosen.id == script_id and why == ""
    assert step == sum(1 for m in messages if m["role"] == "assistant")


def test_content_parts_carry_the_tag_too():
    script = ProviderScript.model_validate({"scripts": [{"id": "a", "steps": [{"text": "x"}]},
                                                        {"id": "b", "steps": [{"text": "y"}]}]})
    chosen, step, _ = script.select([{"role": "user", "content": [{"type": "text", "text": "[[rk-script:b]]"}]}])
    assert chosen.id == "b" and step == 0
    assert script.select([{"role": "user", "content": "untagged"}])[0] is None


@pytest.mark.parametrize("bad", [
    {"scripts": []},
    {"scripts": [{"id": "a", "steps": []}]},
    {"scripts": [{"id": "a", "steps": [{}]}]},  # no reply
    {"scripts": [{"id": "a b", "steps": [{"text": "x"}]}]},
    {"scripts": [{"id": "a", "steps": [{"text": "x"}]}, {"id": "a", "steps": [{"text": "y"}]}]},
    {"scripts": [{"id": "a", "steps": [{"text": "x"}]}], "default_script": "b"},
    {"scripts": [{"id": "a", "steps": [{"text": "x", "faults": [{"kind": "explode"}]}]}]},
    {"scripts": [{"id": "a", "steps": [{"text": "x", "usage": {"prompt_tokens": -1}}]}]},
    {"scripts": [{"id": "a", "steps": [{"text": "x", "typo_field": 1}]}]},
])
def test_invalid_scripts_are_refused(bad):
    with pytest.raises(ValidationError):
        ProviderScript.model_validate(bad)


@given(st.integers(0, 10_000), st.integers(0, 10_000), st.integers(1, 50))
def test_cumulative_fractions_rise_to_the_whole(prompt, completion, of):
    usage = Usage(prompt_tokens=prompt, completion_tokens=completion)
    steps = [usage.fraction(done, of) for done in range(1, of + 1)]
    assert [u.completion_tokens for u in steps] == sorted(u.completion_tokens for u in steps)
    assert steps[-1] == usage and all(u.prompt_tokens == prompt for u in steps)


@settings(max_examples=20)
@given(text=st.text(min_size=1, max_size=60), chunks=st.integers(1, 8), cumulative=st.booleans(),
       prompt=st.integers(0, 500), completion=st.integers(0, 500))
def test_a_streamed_reply_adds_up_to_the_script(tmp_path_factory, text, chunks, cumulative, prompt, completion):
    step = {"text": text, "chunks": chunks, "cumulative_usage": cumulative,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
    with ScriptedProvider({"scripts": [{"id": "s", "steps": [step]}]},
                          tmp_path_factory.mktemp("p") / "l.jsonl") as provider:
        client = openai.OpenAI(base_url=provider.base_url, api_key="x", max_retries=0, timeout=30)
        got = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                  stream=True, stream_options={"include_usage": True}))
        provider.wait_settled()
        response = provider.records()[-1]
    assert "".join(c.choices[0].delta.content or "" for c in got if c.choices) == text
    usages = [c.usage for c in got if c.usage is not None]
    assert usages[-1].prompt_tokens == prompt and usages[-1].completion_tokens == completion
    assert [u.completion_tokens for u in usages] == sorted(u.completion_tokens for u in usages)
    assert len(usages) == (len(got) if cumulative else 1)
    assert response["delivered"] and response["usage_reported"]["completion_tokens"] == completion
