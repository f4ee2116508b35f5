"""The kit's own record of a run: every operation, observation and fault, as Jepsen keeps it.

The history is the checker's evidence, so it is written by the kit, never taken from the adapter:
each operation is an ``invoke`` followed by exactly one completion, ``ok`` (the reply), ``fail``
(a definite error: it did not and will not happen) or ``info`` (indefinite: it may have happened,
e.g. in flight when a process was killed). Observations (``observe`` snapshots) and faults (kills,
restarts, clock jumps) are interleaved in the same sequence with wall times, so the checker can ask
"what did the runtime do after the user's Pause was acknowledged?".

The file is JSON lines (``history.jsonl`` in the run directory), flushed per record, so a bundle
re-checked later (``recoverykit check``) sees exactly what the run saw.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from recoverykit.model.errors import MalformedRecord

OpType = Literal["invoke", "ok", "fail", "info"]


@dataclass(frozen=True)
class Op:
    index: int  # position in the history; a completion carries its invocation's index in ``invoke``
    type: OpType
    f: str  # the request type: submit, pause, stop_all, ...
    value: dict[str, Any]
    time: float
    invoke: int | None = None  # for completions: the index of the matching invoke


@dataclass(frozen=True)
class Observation:
    index: int
    time: float
    snapshot: dict[str, Any]
    quiescent: bool | None = None  # the quiesce reply that preceded it, when there was one


@dataclass(frozen=True)
class Fault:
    index: int
    time: float
    kind: str  # a RestartKind value, "kill", "clock_jump", ...
    detail: dict[str, Any] = field(default_factory=dict)


Event = Op | Observation | Fault

# Faults of the kit's that take no runtime process down: a clock jump, a resource taken away or given back,
# a process paused (SIGSTOP) or let go on (SIGCONT), the state of a scripted external operation set (profile
# waits), a kill or pause the kit refused (a pid not of the run: nothing signalled), a kill that found nothing to
# kill. Checks about restarts ignore them.
KILL_REFUSED = "kill_refused"  # the kit refused to kill or pause a pid the adapter listed (proc_guard.vet_recorded)
NOTHING_KILLED = "nothing_killed"  # a kill found no listed process to kill: no restart happened
NOT_A_RESTART = frozenset({"clock_jump", "resource_missing", "resource_restored", "process_pause",
                           "process_continue", "external_state", "workspace_inspection", KILL_REFUSED,
                           NOTHING_KILLED})


def restarts(history: History) -> list[Fault]:
    """The faults that took runtime processes down (kills, exits, restarts)."""
    return [f for f in history.faults if f.kind not in NOT_A_RESTART]


@dataclass
class History:
    """An in-memory history; ``Recorder`` builds one and mirrors it to disk."""

    events: list[Event] = field(default_factory=list)

    @property
    def ops(self) -> list[Op]:
        return [e for e in self.events if isinstance(e, Op)]

    @property
    def observations(self) -> list[Observation]:
        return [e for e in self.events if isinstance(e, Observation)]

    @property
    def faults(self) -> list[Fault]:
        return [e for e in self.events if isinstance(e, Fault)]

    def completions(self) -> Iterator[tuple[Op, Op | None]]:
        """Each invocation with its completion (None if the run ended before it completed)."""
        done = {op.invoke: op for op in self.ops if op.type != "invoke"}
        for op in self.ops:
            if op.type == "invoke":
                yield op, done.get(op.index)

    def final_observation(self) -> Observation | None:
        observations = self.observations
        return observations[-1] if observations else None


class Recorder:
    """Appends events to a History and, if given a path, to ``history.jsonl``."""

    def __init__(self, path: str | os.PathLike | None = None, *, clock=time.time) -> None:
        self.history = History()
        self._clock = clock
        self._file = open(path, "a", encoding="utf-8") if path is not None else None  # noqa: SIM115

    def _add(self, event: Event) -> Event:
        self.history.events.append(event)
        if self._file is not None:
            record = {"event": type(event).__name__.lower(), **asdict(event)}
            self._file.write(json.dumps(record, sort_keys=True, default=str) + "\n")
            self._file.flush()
        return event

    def _next(self) -> int:
        return len(self.history.events)

    def invoke(self, f: str, value: dict[str, Any]) -> Op:
        return self._add(Op(self._next(), "invoke", f, dict(value), self._clock()))

    def complete(self, invocation: Op, type_: OpType, value: dict[str, Any]) -> Op:
        if type_ == "invoke":
            raise ValueError("a completion is ok, fail or info")
        return self._add(Op(self._next(), type_, invocation.f, dict(value), self._clock(), invocation.index))

    def observe(self, snapshot: dict[str, Any], quiescent: bool | None = None) -> Observation:
        return self._add(Observation(self._next(), self._clock(), snapshot, quiescent))

    def fault(self, kind: str, **detail: Any) -> Fault:
        return self._add(Fault(self._next(), self._clock(), kind, detail))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_history(path: str | os.PathLike) -> History:
    """Read ``history.jsonl``; a torn last line (the kit killed mid-write) is dropped, not fatal.

    Anything else that is not what ``Recorder`` writes is a ``MalformedRecord`` naming its line: a
    record of the wrong shape or types, indices that do not increase, a completion of no invocation
    (or of one already completed). A stored history is evidence; one that was altered proves nothing.
    """
    history = History()
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise MalformedRecord(f"{path}: cannot be read as a history ({type(exc).__name__}: {exc})") from None
    invokes: dict[int, Op] = {}
    completed: set[int] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            if number == len(lines):
                break
            raise MalformedRecord(f"{path}: line {number} is not JSON ({exc}); the history is corrupt") from None
        if not isinstance(record, dict):
            raise MalformedRecord(f"{path}: line {number} is not a JSON object; the history is corrupt")
        kind = record.pop("event", None)
        cls = {"op": Op, "observation": Observation, "fault": Fault}.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise MalformedRecord(f"{path}: line {number} has event {kind!r}; expected op, observation or fault")
        try:
            event = cls(**record)
        except TypeError as exc:
            raise MalformedRecord(f"{path}: line {number} is not a valid {kind} record: {exc}") from None
        problem = _problem(event, history.events[-1].index if history.events else -1, invokes, completed)
        if problem:
            raise MalformedRecord(f"{path}: line {number}: {problem}; the history is corrupt")
        history.events.append(event)
    return history


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _problem(event: Event, last: int, invokes: dict[int, Op], completed: set[int]) -> str | None:
    """What makes ``event`` something ``Recorder`` never writes, or None."""
    if not _integer(event.index) or event.index <= last:
        return f"index {event.index!r} is not an integer after {last}"
    if not _number(event.time):
        return f"time {event.time!r} is not a number"
    if isinstance(event, Op):
        if event.type not in ("invoke", "ok", "fail", "info") or not isinstance(event.f, str):
            return f"an op of type {event.type!r} and request {event.f!r}"
        if not isinstance(event.value, dict):
            return f"op value {event.value!r} is not an object"
        if event.type == "invoke":
            if event.invoke is not None:
                return "an invocation names an invocation"
            invokes[event.index] = event
            return None
        if not _integer(event.invoke) or event.invoke not in invokes or invokes[event.invoke].f != event.f:
            return f"a {event.type} completion of {event.f} names no invocation of it ({event.invoke!r})"
        if event.invoke in completed:
            return f"invocation {event.invoke} is completed twice"
        completed.add(event.invoke)
    elif isinstance(event, Observation):
        if not isinstance(event.snapshot, dict) or not (event.quiescent is None or isinstance(event.quiescent, bool)):
            return "an observation whose snapshot is not an object or whose quiescent is not a boolean"
    elif not isinstance(event.kind, str) or not isinstance(event.detail, dict):
        return "a fault whose kind is not a string or whose detail is not an object"
    return None
