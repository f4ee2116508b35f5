"""Fuzzing the kit's parser against its own JSON Schema (hypothesis-jsonschema).

Two promises: every message the schema allows parses, and anything else raises a ``ProtocolError``
and nothing but a ``ProtocolError``. A third ties them: what the parser accepts, the schema accepts.
"""

import functools
import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema_compat import from_schema
from recoverykit.conformance import protocol
from recoverykit.conformance.errors import ProtocolError
from recoverykit.conformance.protocol_envelope import Reply
from recoverykit.conformance.protocol_rpcs import RPCS
from recoverykit.conformance.protocol_snapshot import SECTION_MODELS, Section

FROM_ADAPTER = [f"{rpc.name}_ok" for rpc in RPCS] + ["error"]
FROM_KIT = [rpc.name for rpc in RPCS]
SCHEMA = protocol.json_schema()
ADAPTER_VALIDATOR = jsonschema.Draft202012Validator(
    {**SCHEMA, "oneOf": [{"$ref": f"#/$defs/{protocol.ADAPTER_MESSAGE_TYPES[t].__name__}"} for t in FROM_ADAPTER]})


@functools.cache
def messages(type_name: str) -> st.SearchStrategy:
    # resolving a schema's refs costs about a second: build each strategy once per session
    return from_schema(protocol.message_schema(type_name))


def _scaled(n: int) -> int:
    # per-type budgets sized for the `ci` profile (60 examples); `thorough` scales them up
    return max(n, n * settings.default.max_examples // 60)


def _dump(obj) -> bytes:
    return json.dumps(obj).encode() + b"\n"


@pytest.mark.parametrize("type_name", [t for t in FROM_ADAPTER if t != "observe_ok"])
@settings(max_examples=_scaled(25))
@given(data=st.data())
def test_schema_valid_adapter_messages_parse(type_name, data):
    message = data.draw(messages(type_name))
    parsed = protocol.decode(_dump(message))
    assert isinstance(parsed, Reply) and parsed.type == type_name


@functools.cache
def records(section: Section) -> st.SearchStrategy:
    model = SECTION_MODELS[section]
    schema = {"$schema": SCHEMA["$schema"], **model.model_json_schema(ref_template="#/$defs/{model}")}
    return st.lists(from_schema(schema), max_size=3)


# observe_ok is fuzzed a section at a time: drawing whole snapshots from the schema is ten times slower
@pytest.mark.parametrize("section", list(Section))
@settings(max_examples=_scaled(15))
@given(data=st.data())
def test_schema_valid_snapshots_parse(section, data):
    body = {"type": "observe_ok", "msg_id": data.draw(st.integers(0, 2**53 - 1)), "in_reply_to": 1,
            "snapshot": {section.value: data.draw(records(section))}}
    assert ADAPTER_VALIDATOR.is_valid(body)
    parsed = protocol.decode(_dump(body))
    assert len(getattr(parsed.snapshot, section.value)) == len(body["snapshot"][section.value])


@pytest.mark.parametrize("type_name", FROM_KIT)
@settings(max_examples=_scaled(10))
@given(data=st.data())
def test_schema_valid_kit_messages_round_trip(type_name, data):
    message = data.draw(messages(type_name))
    parsed = protocol.decode(_dump(message), direction="from_kit")
    assert protocol.decode(protocol.encode(parsed), direction="from_kit") == parsed


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=12,
)


@st.composite
def mutated_messages(draw):
    """A schema-valid adapter message, then one mutation: drop, add, retype a key, or change the type."""
    type_name = draw(st.sampled_from([t for t in FROM_ADAPTER if t != "observe_ok"]))
    message = dict(draw(messages(type_name)))
    how = draw(st.sampled_from(["drop", "add", "retype", "rename_type"]))
    key = draw(st.sampled_from(sorted(message)))
    if how == "drop":
        del message[key]
    elif how == "add":
        message[draw(st.text(min_size=1, max_size=8))] = draw(json_values)
    elif how == "retype":
        message[key] = draw(json_values)
    else:
        message["type"] = draw(st.sampled_from([*FROM_ADAPTER, *FROM_KIT, "ok", ""]))
    return message


def _parses_or_raises_protocol_error(line: bytes) -> bool:
    try:
        protocol.decode(line)
    except ProtocolError as exc:
        assert str(exc).startswith("Adapter protocol error (verdict: invalid)")
        return False
    return True


@given(mutated_messages())
def test_mutated_messages_parse_only_if_the_schema_allows_them(message):
    if _parses_or_raises_protocol_error(_dump(message)):
        assert ADAPTER_VALIDATOR.is_valid(message), message


@given(json_values)
def test_arbitrary_json_raises_only_protocol_errors(value):
    if _parses_or_raises_protocol_error(_dump(value)):
        assert ADAPTER_VALIDATOR.is_valid(value)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_protocol_errors(raw):
    _parses_or_raises_protocol_error(raw)


@given(st.integers(min_value=1, max_value=300), st.integers(min_value=0, max_value=400))
def test_the_size_limit_is_exact(limit, size):
    line = b'"' + b"x" * max(size - 2, 0) + b'"' if size >= 2 else b"x" * size
    try:
        protocol.decode(line + b"\n", max_line_bytes=limit)
    except ProtocolError as exc:
        assert ("over the" in str(exc)) == (len(line) > limit)
