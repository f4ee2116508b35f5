"""The failpoint term grammar: round trips, typed errors, and kit/client agreement."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from recoverykit.chaos.failpoints import (
    ENV_FAILPOINT_SOCKET,
    ENV_FAILPOINTS,
    GRAMMAR,
    FailpointSpecError,
    Kind,
    Term,
    UnknownFailpoint,
    arm_env,
    format_spec,
    parse,
    validate,
)
from recoverykit.conformance import failpoint_client as client
from recoverykit.errors import InvalidArgument
from recoverykit.model.catalogue import POINTS_BY_NAME

point_names = st.from_regex(r"[a-z0-9_]{1,8}(\.[a-z0-9_]{1,8}){0,3}", fullmatch=True)
counts = st.integers(min_value=1, max_value=10_000)


@st.composite
def terms(draw, last: bool):
    kind = draw(st.sampled_from(list(Kind)))
    millis = draw(st.integers(0, 100_000)) if kind is Kind.SLEEP else None
    count = draw(st.one_of(st.none(), counts)) if last else draw(counts)
    return Term(kind, count, millis)


@st.composite
def chains(draw):
    head = draw(st.lists(terms(last=False), max_size=4))
    return (*head, draw(terms(last=True)))


specs = st.dictionaries(point_names, chains(), max_size=5)


@given(specs)
def test_format_then_parse_is_identity(spec):
    assert parse(format_spec(spec)) == spec


@given(specs)
def test_the_runtime_client_reads_every_spec_as_the_kit_does(spec):
    read = client.parse(format_spec(spec))
    assert read == {p: [(t.kind.value, t.count, t.millis) for t in ts] for p, ts in spec.items()}


def test_the_example_from_the_issue_parses():
    spec = parse("tool.result.commit.before=1*pause;usage.persist.after=2*off->1*pause")
    assert spec == {"tool.result.commit.before": (Term(Kind.PAUSE, 1),),
                    "usage.persist.after": (Term(Kind.OFF, 2), Term(Kind.PAUSE, 1))}
    assert validate(spec) is spec


@pytest.mark.parametrize(("text", "bad"), [
    ("tool.dispatch.after", "tool.dispatch.after"),  # no "="
    ("tool.dispatch.after=explode", "explode"),
    ("tool.dispatch.after=0*pause", "0*pause"),
    ("tool.dispatch.after=sleep", "sleep"),
    ("tool.dispatch.after=sleep(fast)", "sleep(fast)"),
    ("tool.dispatch.after=pause(3)", "pause(3)"),
    ("tool.dispatch.after=pause->1*crash", "1*crash"),  # unreachable after an unbounded term
    ("Tool.Dispatch=pause", "Tool.Dispatch"),
    ("a.b=pause;a.b=crash", "a.b"),
    ("a.b=1*pause->", ""),
])
def test_invalid_specs_raise_typed_errors_naming_the_term_and_the_grammar(text, bad):
    with pytest.raises(FailpointSpecError) as info:
        parse(text)
    err = info.value
    assert isinstance(err, InvalidArgument) and isinstance(err, ValueError)
    assert err.bad == bad
    assert repr(bad) in str(err) and GRAMMAR in str(err)
    with pytest.raises(ValueError):
        client.parse(text)


@given(st.one_of(st.text(alphabet="abc.=*;->()019 ", max_size=30),
                 specs.map(format_spec).map(lambda t: t.replace("pause", "pause ").replace("*", " *"))))
def test_the_kit_and_the_client_accept_the_same_texts(text):
    try:
        kit = parse(text)
    except FailpointSpecError:
        kit = None
    try:
        runtime = client.parse(text)
    except ValueError:
        runtime = None
    assert (kit is None) == (runtime is None), (kit, runtime)
    if kit is not None:
        assert runtime == {p: [(t.kind.value, t.count, t.millis) for t in ts] for p, ts in kit.items()}


def test_parse_rejects_a_non_string():
    with pytest.raises(InvalidArgument, match="must be a str"):
        parse(b"a.b=pause")  # type: ignore[arg-type]


def test_unknown_point_is_named_with_a_hint():
    with pytest.raises(UnknownFailpoint) as info:
        validate(parse("tool.dispatch.middle=pause"))
    assert "tool.dispatch.middle" in str(info.value)
    assert "tool.dispatch.after" in str(info.value)
    assert isinstance(info.value, InvalidArgument)


def test_validate_against_a_runtimes_own_points():
    validate(parse("x.y=crash"), known={"x.y"})
    with pytest.raises(UnknownFailpoint):
        validate(parse("x.z=crash"), known={"x.y"})


def test_arm_env_builds_the_two_variables():
    env = arm_env({"tool.dispatch.after": "1*pause", "usage.persist.before": [Term(Kind.SLEEP, 2, 5)]},
                  socket_path="/tmp/x.sock")
    assert env == {ENV_FAILPOINTS: "tool.dispatch.after=1*pause;usage.persist.before=2*sleep(5)",
                   ENV_FAILPOINT_SOCKET: "/tmp/x.sock"}
    with pytest.raises(UnknownFailpoint):
        arm_env({"no.such.point": "pause"})


def test_every_catalogue_point_is_armable():
    env = arm_env({name: "1*off" for name in POINTS_BY_NAME})
    assert set(parse(env[ENV_FAILPOINTS])) == set(POINTS_BY_NAME)


def test_chain_semantics_in_the_client(monkeypatch):
    fired = []
    monkeypatch.setattr(client, "_report", lambda report, wait: fired.append((report["hit"], report["action"])))
    client.reload({ENV_FAILPOINTS: "a.b=2*off->1*sleep(0)->1*sleep(0)"})
    try:
        for _ in range(6):
            client.failpoint("a.b", "w")
        client.failpoint("unarmed.point")
        assert fired == [(3, "sleep"), (4, "sleep")]
        assert client.armed_points() == ["a.b"]
    finally:
        client.reload({})


@given(chains(), st.integers(1, 40))
def test_the_client_acts_as_action_at_predicts(chain, hits):
    from recoverykit.chaos.failpoints import action_at

    (point,) = client._load(format_spec({"p.q": chain})).values()
    steps = [client._step(point) for _ in range(hits)]
    expected = [(h, action_at(chain, h).kind.value, action_at(chain, h).millis) for h in range(1, hits + 1)]
    assert steps == expected


def test_action_at_counts_from_one():
    from recoverykit.chaos.failpoints import action_at

    chain = parse("a.b=2*off->1*pause")["a.b"]
    assert [action_at(chain, h).kind for h in (1, 2, 3, 4)] == [Kind.OFF, Kind.OFF, Kind.PAUSE, Kind.OFF]
    with pytest.raises(InvalidArgument, match="from 1"):
        action_at(chain, 0)
