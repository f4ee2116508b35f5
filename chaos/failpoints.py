"""The failpoint term grammar: parse, validate and format ``RECOVERYKIT_FAILPOINTS``.

The kit arms a runtime's interruption points through one environment variable whose grammar
follows FreeBSD fail(9), gofail and pingcap/failpoint (without their probability and print terms,
which make runs unrepeatable)::

    spec    := entry (";" entry)*
    entry   := point "=" term ("->" term)*
    term    := [count "*"] action
    action  := "off" | "pause" | "crash" | "sleep(" millis ")"
    point   := [a-z0-9_]+ ("." [a-z0-9_]+)*       e.g. tool.result.commit.before
    count   := positive integer (a term without a count applies forever)

Hits of one point are counted per process, from 1. ``2*off->1*pause`` passes hits 1 and 2, pauses
at hit 3, and is off from hit 4 on: when every term is used up the point is off. A term without a
count must be the last one of its chain (anything after it could never run).

This module is the kit's strict side (typed errors that name the bad term and quote the grammar);
``failpoint_client`` is the runtime's side, a standard-library copy a runtime can vendor. The tests
check that both read every valid spec alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from recoverykit.model.catalogue import INTERRUPTION_POINTS, POINTS_BY_NAME, Reach
from recoverykit.model.errors import InvalidArgument

ENV_FAILPOINTS = "RECOVERYKIT_FAILPOINTS"
ENV_FAILPOINT_SOCKET = "RECOVERYKIT_FAILPOINT_SOCKET"

GRAMMAR = (
    'spec := entry (";" entry)* ; entry := point "=" term ("->" term)* ; '
    'term := [count "*"] action ; action := off | pause | crash | sleep(<millis>)'
)

_POINT_RE = re.compile(r"[a-z0-9_]+(?:\.[a-z0-9_]+)*")
_TERM_RE = re.compile(r"(?:(?P<count>[0-9]+)\*)?(?P<kind>[a-z]+)(?:\((?P<arg>[^()]*)\))?")


class Kind(StrEnum):
    OFF = "off"
    PAUSE = "pause"
    CRASH = "crash"
    SLEEP = "sleep"


class FailpointSpecError(InvalidArgument, ValueError):
    """A ``RECOVERYKIT_FAILPOINTS`` value does not follow the grammar; names the bad piece."""

    def __init__(self, spec: str, bad: str, why: str) -> None:
        self.spec, self.bad, self.why = spec, bad, why
        super().__init__(
            f"invalid failpoint spec {spec!r}: {bad!r} {why}. Grammar: {GRAMMAR}. "
            f"Example: tool.result.commit.before=1*pause;usage.persist.after=2*off->1*pause"
        )


class UnknownFailpoint(InvalidArgument, KeyError):
    """A spec arms a point that is not in the catalogue (or not among the runtime's points)."""

    def __init__(self, point: str, known: Iterable[str]) -> None:
        self.point = point
        known = sorted(known)
        close = [k for k in known if k.split(".")[0] == point.split(".")[0]]
        hint = f" Did you mean one of {close}?" if close else ""
        super().__init__(f"unknown failpoint {point!r}: it is not one of the {len(known)} known points.{hint}")

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class Term:
    kind: Kind
    count: int | None = None  # None: applies to every remaining hit
    millis: int | None = None  # only for sleep

    def __str__(self) -> str:
        action = f"sleep({self.millis})" if self.kind is Kind.SLEEP else self.kind.value
        return action if self.count is None else f"{self.count}*{action}"


Spec = dict[str, tuple[Term, ...]]


def parse(text: str) -> Spec:
    """Parse a whole ``RECOVERYKIT_FAILPOINTS`` value; an empty value arms nothing."""
    if not isinstance(text, str):
        raise InvalidArgument(f"a failpoint spec must be a str, got {type(text).__name__}: {text!r}")
    spec: Spec = {}
    for entry in text.split(";"):
        if not entry.strip():
            continue  # tolerate a trailing ";" and empty entries, as fail(9) does not care either
        point, sep, chain = entry.partition("=")
        point = point.strip()
        if not sep:
            raise FailpointSpecError(text, entry, 'has no "=": write point=term')
        if not _POINT_RE.fullmatch(point):
            raise FailpointSpecError(text, point, "is not a point name (dotted lower-case words)")
        if point in spec:
            raise FailpointSpecError(text, point, "is armed twice; chain its terms with -> instead")
        spec[point] = parse_chain(chain, spec_text=text)
    return spec


def parse_chain(chain: str, *, spec_text: str | None = None) -> tuple[Term, ...]:
    """Parse the right-hand side of one entry, e.g. ``2*off->1*pause``."""
    whole = chain if spec_text is None else spec_text
    terms: list[Term] = []
    for raw in chain.split("->"):
        piece = raw.strip()
        if terms and terms[-1].count is None:
            raise FailpointSpecError(whole, piece, f"can never run: the term before it ({terms[-1]}) has no count")
        terms.append(_parse_term(piece, whole))
    return tuple(terms)


def _parse_term(piece: str, whole: str) -> Term:
    match = _TERM_RE.fullmatch(piece)
    if match is None:
        raise FailpointSpecError(whole, piece, "is not a term")
    count_text, kind_text, arg = match.group("count", "kind", "arg")
    count = None
    if count_text is not None:
        count = int(count_text)
        if count < 1:
            raise FailpointSpecError(whole, piece, "has a count below 1")
    try:
        kind = Kind(kind_text)
    except ValueError:
        raise FailpointSpecError(whole, piece, f"has an unknown action {kind_text!r}") from None
    if kind is Kind.SLEEP:
        if arg is None or not re.fullmatch(r"[0-9]+", arg):
            raise FailpointSpecError(whole, piece, "needs a whole number of milliseconds: sleep(250)")
        return Term(kind, count, int(arg))
    if arg is not None:
        raise FailpointSpecError(whole, piece, f"takes no argument ({kind.value} has none)")
    return Term(kind, count)


def action_at(terms: Iterable[Term], hit: int) -> Term:
    """The term that acts at the ``hit``-th hit (from 1) of a point armed with ``terms``; off when used up."""
    if not isinstance(hit, int) or hit < 1:
        raise InvalidArgument(f"hits are counted from 1, got {hit!r}")
    passed = 0
    for term in terms:
        if term.count is None or hit <= passed + term.count:
            return term
        passed += term.count
    return Term(Kind.OFF)


def format_spec(spec: Mapping[str, Iterable[Term]]) -> str:
    """The canonical text of a spec; ``parse(format_spec(s)) == s`` for every valid spec."""
    return ";".join(f"{point}=" + "->".join(str(t) for t in terms) for point, terms in spec.items())


def validate(spec: Spec, known: Iterable[str] | None = None) -> Spec:
    """Check every armed point is known (default: the catalogue's points); return the spec."""
    names = set(POINTS_BY_NAME if known is None else known)
    for point in spec:
        if point not in names:
            raise UnknownFailpoint(point, names)
    return spec


def arm_env(spec: Mapping[str, str | Iterable[Term]], *, socket_path: str | None = None,
            known: Iterable[str] | None = None) -> dict[str, str]:
    """The environment variables that arm ``spec`` for a runtime process.

    ``spec`` maps a point to its terms or to the chain text (``{"tool.dispatch.after": "1*pause"}``).
    """
    parsed: Spec = {}
    for point, terms in spec.items():
        parsed[point] = parse_chain(terms) if isinstance(terms, str) else tuple(terms)
    text = format_spec(parsed)
    validate(parse(text), known)
    env = {ENV_FAILPOINTS: text}
    if socket_path is not None:
        env[ENV_FAILPOINT_SOCKET] = str(socket_path)
    return env


def points_table() -> str:
    """The catalogue's points as a Markdown table (the generated part of docs/failpoints.md)."""
    lines = ["| point | reach | profile | what has happened when it is hit |", "| --- | --- | --- | --- |"]
    for p in INTERRUPTION_POINTS:
        how = "runtime calls the failpoint" if p.reach is Reach.RUNTIME else "the kit's environment holds it"
        if p.opt_in:
            how = "the kit's durable-write hook calls it; opt-in, section 7"
        lines.append(f"| `{p.name}` | {p.reach.value} ({how}) | {p.profile.value} | {p.description} |")
    return "\n".join(lines)


__all__ = [
    "ENV_FAILPOINTS",
    "ENV_FAILPOINT_SOCKET",
    "GRAMMAR",
    "FailpointSpecError",
    "Kind",
    "Spec",
    "Term",
    "UnknownFailpoint",
    "action_at",
    "arm_env",
    "format_spec",
    "parse",
    "parse_chain",
    "points_table",
    "refresh_doc",
    "validate",
]


DOC_BEGIN = "<!-- BEGIN GENERATED from model/catalogue.py: regenerate with `recoverykit env docs --write` -->"
DOC_END = "<!-- END GENERATED -->"


def refresh_doc(text: str) -> str:
    """``text`` (docs/failpoints.md) with its generated region replaced by the current catalogue."""
    head, begin, rest = text.partition(DOC_BEGIN)
    _, end, tail = rest.partition(DOC_END)
    if not begin or not end:
        raise InvalidArgument(f"the failpoints doc lacks its generated region markers {DOC_BEGIN!r} ... {DOC_END!r}")
    return f"{head}{DOC_BEGIN}\n{points_table()}\n{DOC_END}{tail}"
