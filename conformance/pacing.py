"""Pacing: every window the kit waits in for the runtime, in one place, and the one scale that stretches them.

A window is how long the kit gives the runtime to do something it expects (a model request to arrive and be
held, work to settle, an adapter to answer, a failpoint to be reached). A runtime slower than a window is not
wrong, so running out of one is unknown, never invalid; and the reason names the window and the time it was
given, so the user knows which knob helps (``--timeout-scale``, or the automatic calibration: ``calibration``).

``Pacing(scale)`` multiplies every window below. The kit's own fast paths (thread joins, polls, the provider's
close grace, the killer's checks) are not windows and never scale; neither are the short *watch* periods a drive
spends looking for a violation to show (``BUSY_HOLD_S``, ``STALE_WINDOW_S``, ...): a longer watch proves no more.

The pacing of the current run is a context variable (``using``, ``current``): certify, lockstep and chaos set it
where a case starts, the environment (``Run``) takes it from there, and messages read it to say what was given.
Nothing global is mutated; a thread that sets none gets the default (scale 1).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from recoverykit.model.errors import InvalidArgument

MIN_SCALE, MAX_SCALE = 0.1, 100.0  # what --timeout-scale accepts (below 1: a CI gate that wants hangs found sooner)


@dataclass(frozen=True)
class Window:
    """One named window: its base length (at scale 1) and what the kit waits for in it."""

    name: str
    seconds: float
    waits_for: str


REQUEST = Window("request", 20.0, "a scripted model request to reach the provider and be held")
SETTLE = Window("settle", 20.0, "the runtime to settle (quiesce) after a step of a scenario")
GOAL_SETTLE = Window("goal settle", 30.0, "a Goal to reach the state a scenario waits for")
TASK = Window("task", 20.0, "a Paperclip task or run to reach the status a scenario waits for")
FINAL_SETTLE = Window("final settle", 15.0, "the lockstep machine's work to settle at the end of a program")
STEP_SETTLE = Window("step settle", 0.3, "the lockstep machine's work to settle after one step")
SEEN = Window("seen", 5.0, "a Goal event's effect to show (a Pause reaching a worker mid-request)")
REPORT = Window("report", 5.0, "the runtime's own report a drive looks for (a retry scheduled, a wait entered)")
LIVE_CHILD = Window("live child", 3.0, "a tool child that outlived its worker to finish (it sleeps 1.5 s)")
DWELL = Window("dwell", 1.0, "the runtime to act on a faulted or unreadable store (ends early on a model request)")
FAIR = Window("fair", 2.0, "the second backlog's first request to be in flight (fair_queueing)")
REPLY = Window("reply", 15.0, "the adapter's reply to an ordinary request (observe, submit, processes, ...)")
START = Window("start", 60.0, "the adapter's reply to a slow request (init, start, restart, stop); "
                              "RECOVERYKIT_START_TIMEOUT_S sets its base")
CHAOS_POINT = Window("point", 20.0, "a chaos case's interruption point to be reached (chaos --timeout sets its base)")
CHAOS_QUIESCE = Window("quiesce", 30.0, "the runtime to settle after a chaos case's restart")
CHAOS_GRACE = Window("grace", 5.0, "an action during a chaos fault to answer, a kick to land, the ledger to close")
QUIET_GRACE = Window("quiet grace", 3.0, "a quiet runtime to report a chaos point before it counts as unreached")

WINDOWS = (REQUEST, SETTLE, GOAL_SETTLE, TASK, FINAL_SETTLE, STEP_SETTLE, SEEN, REPORT, LIVE_CHILD, DWELL, FAIR,
           REPLY, START, CHAOS_POINT, CHAOS_QUIESCE, CHAOS_GRACE, QUIET_GRACE)
ADVICE = "--timeout-scale gives more"


def check_scale(value: Any, flag: str = "--timeout-scale") -> float:
    """A user's scale, checked where it is given: a number from 0.1 to 100 (a usage error otherwise)."""
    try:
        scale = float(value)
    except (TypeError, ValueError):
        scale = math.nan
    if not MIN_SCALE <= scale <= MAX_SCALE:  # NaN fails both comparisons
        raise InvalidArgument(f"{flag} {value!r}: give a factor from {MIN_SCALE:g} to {MAX_SCALE:g} (1 is the "
                              "default pacing; 3 gives a slow runtime three times as long in every window)")
    return scale


@dataclass(frozen=True)
class Pacing:
    """The windows of one run: each base window times ``scale``. ``asked``: the user's scale (the calibration
    may raise ``scale`` above it); ``calibration``: what was measured (``calibration.Calibration.as_dict``)."""

    scale: float = 1.0
    asked: float = 1.0
    calibration: dict[str, Any] | None = field(default=None, compare=False)

    def __call__(self, window: Window | float) -> float:
        """The seconds given for ``window`` (a Window, or a base length in seconds)."""
        base = window.seconds if isinstance(window, Window) else float(window)
        return base * self.scale

    def says(self, window: Window | str, given: float | None = None) -> str:
        """What a reason appends: ``request window 20 s x1.5 = 30 s; --timeout-scale gives more``."""
        name = window.name if isinstance(window, Window) else window
        if isinstance(window, Window):
            given = self(window) if given is None else given
            base = window.seconds
        else:
            base = (given or 0.0) / self.scale
        shown = f"{name} window {base:g} s x{self.scale:g}"
        if given is not None and self.scale != 1.0:
            shown += f" = {given:g} s"
        return f"{shown}; {ADVICE}"

    def with_scale(self, scale: float, calibration: dict[str, Any] | None = None) -> Pacing:
        return replace(self, scale=scale, calibration=calibration)

    def as_dict(self) -> dict[str, Any]:
        """For results.json: the scale used, the user's, and the calibration (None when it did not run)."""
        return {"scale": self.scale, "asked": self.asked, "calibration": self.calibration,
                "windows": {w.name: round(self(w), 3) for w in WINDOWS}}


DEFAULT = Pacing()
_CURRENT: contextvars.ContextVar[Pacing | None] = contextvars.ContextVar("recoverykit_pacing", default=None)


def current() -> Pacing:
    """The pacing of the case running in this thread (scale 1 when nothing set one)."""
    return _CURRENT.get() or DEFAULT


@contextlib.contextmanager
def using(pacing: Pacing | None) -> Iterator[Pacing]:
    """Run the body with ``pacing`` (None: keep the current one); restored on the way out."""
    if pacing is None:
        yield current()
        return
    token = _CURRENT.set(pacing)
    try:
        yield pacing
    finally:
        _CURRENT.reset(token)
