"""The environment variables the kit gives every process of a run, in one place.

- ``RECOVERYKIT_RUN_MARKER``: the run's marker (``reaper``); inherited by everything the runtime starts.
- ``RECOVERYKIT_FAILPOINTS`` and ``RECOVERYKIT_FAILPOINT_SOCKET``: armed points and the broker
  (``failpoints``, ``broker``).
- ``RECOVERYKIT_CLOCK_OFFSET_S``: seconds (a decimal, may be negative) the runtime adds to its wall
  clock for every time it stores or compares (``now = time.time() + offset``). The kit raises it
  between a kill and the next start to simulate downtime, e.g. past the old two-hour window,
  without waiting; a runtime's monotonic clocks are unaffected (they never survive a restart).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping

from recoverykit.chaos.failpoints import ENV_FAILPOINT_SOCKET, ENV_FAILPOINTS, Term, arm_env
from recoverykit.chaos.reaper import marked_env
from recoverykit.model.errors import InvalidArgument

ENV_CLOCK_OFFSET = "RECOVERYKIT_CLOCK_OFFSET_S"
ALL_VARIABLES = ("RECOVERYKIT_RUN_MARKER", ENV_FAILPOINTS, ENV_FAILPOINT_SOCKET, ENV_CLOCK_OFFSET)


def run_environment(marker: str, *, failpoints: Mapping[str, str | Iterable[Term]] | None = None,
                    socket_path: str | None = None, clock_offset_s: float = 0.0,
                    base: Mapping[str, str] | None = None, known_points: Iterable[str] | None = None) -> dict[str, str]:
    """The full environment for one process of a run (``base`` defaults to this process's own)."""
    if not isinstance(clock_offset_s, int | float) or not math.isfinite(clock_offset_s):
        raise InvalidArgument(f"clock_offset_s must be a finite number of seconds, got {clock_offset_s!r}")
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in ALL_VARIABLES}
    env = marked_env(marker, env)
    if failpoints:
        env.update(arm_env(failpoints, socket_path=socket_path, known=known_points))
    elif socket_path:
        env[ENV_FAILPOINT_SOCKET] = socket_path
    env[ENV_CLOCK_OFFSET] = repr(float(clock_offset_s))
    return env


def clock_offset(environ: Mapping[str, str] | None = None) -> float:
    """What a Python runtime reads: the offset in seconds, 0.0 when unset."""
    raw = (os.environ if environ is None else environ).get(ENV_CLOCK_OFFSET, "").strip()
    try:
        value = float(raw) if raw else 0.0
    except ValueError:
        raise InvalidArgument(f"{ENV_CLOCK_OFFSET}={raw!r} is not a number of seconds") from None
    if not math.isfinite(value):
        raise InvalidArgument(f"{ENV_CLOCK_OFFSET}={raw!r} is not a finite number of seconds")
    return value
