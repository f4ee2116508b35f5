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
from pathlib import Path

from recoverykit.chaos.failpoints import ENV_FAILPOINT_SOCKET, ENV_FAILPOINTS, Term, arm_env
from recoverykit.conformance.broker import FailpointBroker
from recoverykit.conformance.killer import KillReport
from recoverykit.conformance.probe_tools import standard_probe_tools
from recoverykit.conformance.provider import ScriptedProvider
from recoverykit.conformance.provider_script import ProviderScript
from recoverykit.conformance.reaper import marked_env, new_marker, reap
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


class RunEnvironment:
    """Everything the kit owns around one run, started together and torn down together.

    ``with RunEnvironment(run_dir, script) as world:`` gives ``world.provider`` (scripted, ledger in
    ``run_dir/provider-ledger.jsonl``), ``world.broker`` (failpoint socket), ``world.witness`` (the probe
    witness log path), ``world.probe_tools`` (for ``init``), ``world.marker`` and ``world.env(...)`` for
    processes. ``close()`` releases every hold, stops the provider and the broker, then reaps every
    process carrying the run's marker, and reports what it had to kill in ``reaped``.
    """

    def __init__(self, run_dir: str | os.PathLike, script: ProviderScript | dict, *, marker: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.marker = marker or new_marker()
        self.witness = self.run_dir / "witness.jsonl"
        self.ledger = self.run_dir / "provider-ledger.jsonl"
        self.broker = FailpointBroker(self.run_dir)
        try:
            self.provider = ScriptedProvider(script, self.ledger)
        except BaseException:
            self.broker.close()
            raise
        self.probe_tools = standard_probe_tools(self.witness, self.broker.path)
        self.reaped: KillReport | None = None

    def env(self, *, failpoints: Mapping[str, str | Iterable[Term]] | None = None, clock_offset_s: float = 0.0,
            base: Mapping[str, str] | None = None, known_points: Iterable[str] | None = None) -> dict[str, str]:
        return run_environment(self.marker, failpoints=failpoints, socket_path=self.broker.path,
                               clock_offset_s=clock_offset_s, base=base, known_points=known_points)

    def close(self) -> None:
        if self.reaped is not None:
            return
        self.broker.release_all()
        self.provider.close()
        self.broker.close()
        self.reaped = reap(self.marker)

    def __enter__(self) -> RunEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
