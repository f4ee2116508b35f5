"""The user's intent per work item, read from the kit's history with indefinite operations as possible causes.

An operation answered ``ok`` happened; one answered with a definite error (``fail``) did not and never will. One
answered with an indefinite error (``info``: a timeout, a crash, ``internal``), or never answered, may have
happened, or may still (docs/protocol.md, Errors): Jepsen's indeterminate operation. A check that reads what the
user meant (was this item meant to run? did the user stop it? did the user act on it since?) must accept either
world, so it asks here instead of filtering ``done.type == "ok"`` itself:

- ``Intent.possible(work_id, at)``: the states the user's controls may have left the item in before event ``at``
  (``"run"``, ``"stopped"``): a sure control (``ok``) sets the state from its completion on; an indeterminate one
  adds its state from its invocation on, for good (it may still take effect later);
- ``Intent.meant_to_run(work_id, at)``: submitted and surely still meant to run; an item some indeterminate stop
  may have stopped is not judged as meant to run (neither world can be ruled out: unknown, never invalid);
- ``submitted(history)``: work_id -> the submit's invocation, for acknowledged submits and for indeterminate ones
  that an observation resolved (the item holding the submit's client_msg_id: it happened).

A ``stop_all_exit`` fault (the user quit and stopped all tasks) is a sure stop of every item submitted before it.
"""

from __future__ import annotations

from dataclasses import dataclass

from recoverykit.conformance.history import History, Op

STOPS = ("pause", "end", "stop_all")
CONTROLS = (*STOPS, "resume")
RUN, STOPPED = "run", "stopped"
NEVER = 1 << 62


def indeterminate(done: Op | None) -> bool:
    """An operation that may have happened, or may still: an ``info`` completion, or none at all."""
    return done is None or done.type == "info"


def submits(history: History) -> list[tuple[Op, str]]:
    """(invocation, work_id) of every submit the kit knows reached a work item, in invocation order: acknowledged
    (``ok``), or indeterminate and resolved by an observation that holds its client_msg_id (so it happened)."""
    out: list[tuple[Op, str]] = []
    pending: dict[str, Op] = {}
    for invoke, done in history.completions():
        if invoke.f != "submit":
            continue
        if done is not None and done.type == "ok" and "work_id" in done.value:
            out.append((invoke, done.value["work_id"]))
        elif indeterminate(done) and invoke.value.get("client_msg_id") is not None:
            pending[str(invoke.value["client_msg_id"])] = invoke
    for o in history.observations if pending else ():
        for item in o.snapshot.get("work_items") or []:
            for inp in item.get("inputs") or []:
                invoke = pending.get(str(inp.get("client_msg_id")))
                if invoke is not None and invoke.index < o.index:
                    out.append((invoke, item["work_id"]))
                    del pending[str(inp.get("client_msg_id"))]
    return sorted(out, key=lambda pair: pair[0].index)


def submitted(history: History) -> dict[str, Op]:
    """work_id -> the invocation of the first submit that made or reached it (``submits``)."""
    out: dict[str, Op] = {}
    for invoke, work_id in submits(history):
        out.setdefault(work_id, invoke)
    return out


@dataclass(frozen=True)
class Control:
    """A user control the kit sent (pause, end, stop_all, resume) or a quit that stopped all (a fault)."""

    f: str
    state: str  # RUN or STOPPED: what it asks for
    start: int  # the event index from which it may have taken effect (its invocation)
    sure: int | None  # the event index from which it surely has (its ok completion); None: indeterminate
    start_time: float
    sure_time: float | None
    work_ids: frozenset[str] | None  # None: every item submitted before ``bound`` (a stop_all)
    bound: int = NEVER  # for work_ids None: items whose submit was invoked before this index

    def names(self, work_id: str, submit_index: int | None) -> bool:
        if self.work_ids is not None:
            return work_id in self.work_ids
        return submit_index is not None and submit_index < self.bound


class Intent:
    """The user's controls of a run, sure and indeterminate, and the items the kit submitted."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.submits = submitted(history)
        self.controls: list[Control] = []
        for invoke, done in history.completions():
            if invoke.f not in CONTROLS or (done is not None and done.type == "fail"):
                continue
            sure = done is not None and done.type == "ok"
            if invoke.f == "stop_all":
                names = frozenset(done.value.get("stopped") or []) if sure else None
            else:
                names = frozenset([str(invoke.value.get("work_id"))])
            self.controls.append(Control(
                invoke.f, RUN if invoke.f == "resume" else STOPPED, invoke.index, done.index if sure else None,
                invoke.time, done.time if sure else None, names))
        for f in history.faults:
            if f.kind == "stop_all_exit":  # stops every item submitted before it, acknowledged or not yet
                self.controls.append(Control("stop_all_exit", STOPPED, f.index, f.index, f.time, f.time, None,
                                             bound=f.index))

    def _of(self, work_id: str) -> list[Control]:
        submit = self.submits.get(work_id)
        return [c for c in self.controls if c.names(work_id, submit.index if submit else None)]

    def possible(self, work_id: str, at: int | None = None, *, at_time: float | None = None) -> frozenset[str]:
        """The states the user's controls may have left ``work_id`` in before event index ``at`` (or before
        ``at_time`` on the kit's clock): the last sure control's, plus every indeterminate one's since."""
        def before(index: int | None, t: float | None) -> bool:
            if index is None:
                return False
            return index < at if at is not None else (t is not None and at_time is not None and t < at_time)

        state, since, maybe = RUN, -1, set()
        for c in self._of(work_id):
            if c.sure is not None and before(c.sure, c.sure_time):
                if c.sure > since:
                    state, since = c.state, c.sure
            elif before(c.start, c.start_time):
                maybe.add(c.state)  # in flight at ``at``, or indeterminate: it may have taken effect, or may still
        return frozenset({state} | maybe)

    def meant_to_run(self, work_id: str, at: int) -> bool:
        """Submitted before ``at`` and surely not stopped by the user since (no indeterminate stop either)."""
        submit = self.submits.get(work_id)
        return submit is not None and submit.index < at and self.possible(work_id, at) == {RUN}

    def maybe_stopped(self, work_id: str, at: int | None = None, *, at_time: float | None = None) -> bool:
        """May the user have stopped ``work_id`` before ``at`` (an excuse for it not going on)?"""
        return STOPPED in self.possible(work_id, at, at_time=at_time)

    def indeterminate_stops(self) -> list[tuple[str | None, float]]:
        """(work_id, or None for a stop_all of any item; when sent) of every stop that may have happened, or may
        still: an excuse, wherever the user's stop explains something, for what happened then or later."""
        return [(None if c.work_ids is None else next(iter(c.work_ids), None), c.start_time)
                for c in self.controls if c.state == STOPPED and c.sure is None]


_CACHE: dict[int, tuple[int, Intent]] = {}


def intent_of(history: History) -> Intent:
    """``Intent(history)``, built once per history (and again when it grew): checks ask it per item."""
    cached = _CACHE.get(id(history))
    if cached is not None and cached[0] == len(history.events) and cached[1].history is history:
        return cached[1]
    made = Intent(history)
    _CACHE.clear()  # one history at a time: nothing kept alive after its run
    _CACHE[id(history)] = (len(history.events), made)
    return made
