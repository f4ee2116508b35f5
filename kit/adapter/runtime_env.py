"""What the kit gives a runtime, and how it reaches the runtime's processes: their environment.

``RuntimeEnv`` is the adapter's side: it keeps what ``init`` gave (data dir, provider, probe tools, the
failpoint socket, the run marker) and what ``start`` / ``restart`` change (failpoints, clock offset, host
id), and builds the environment of every process the adapter starts. The runtime's side reads it back
with ``from_environment()``, ``clock()`` and ``signal_ready()``, so a worker written for the SDK needs no
parsing of its own. Names of the variables:

- ``RECOVERYKIT_RUN_MARKER``: every process (the kit reaps leftovers by it);
- ``RECOVERYKIT_FAILPOINTS``, ``RECOVERYKIT_FAILPOINT_SOCKET``: read by the failpoint client;
- ``RECOVERYKIT_HOST_ID``, ``RECOVERYKIT_CLOCK_OFFSET_S``: the host identity and the clock offset;
- ``RECOVERYKIT_DATA_DIR``, ``RECOVERYKIT_PROVIDER_BASE_URL``, ``RECOVERYKIT_MODEL``, ``RECOVERYKIT_API_KEY``;
- ``RECOVERYKIT_READY_FILE``: a path the process creates once it admits work (``signal_ready``);
- ``PYTHONPATH`` (the durable-write hook first) and ``RECOVERYKIT_FAILPOINT_CLIENT``: only while the failpoints
  arm a ``durable.write.*`` point (``durable_writes``; an adapter that declares those points gets them for free).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recoverykit.adapter import durable_writes

PREFIX = "RECOVERYKIT_"


@dataclass
class RuntimeEnv:
    data_dir: Path
    provider_base_url: str
    probe_tools: list[dict[str, Any]]
    failpoint_socket: str
    run_marker: str
    model: str | None = None
    api_key: str | None = None
    failpoints: str = ""
    clock_offset_s: float = 0.0
    host_id: str = "host-a"
    automatic_recovery: bool | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_init(cls, req: dict[str, Any]) -> RuntimeEnv:
        data_dir = Path(req["data_dir"])
        data_dir.mkdir(parents=True, exist_ok=True)
        return cls(data_dir=data_dir, provider_base_url=req["provider_base_url"],
                   probe_tools=list(req["probe_tools"]), failpoint_socket=req["failpoint_socket"],
                   run_marker=req["run_marker"], model=req.get("model"), api_key=req.get("api_key"))

    def update(self, req: dict[str, Any]) -> None:
        """Apply a ``start`` or ``restart``: a null or absent value keeps the current one."""
        for key in ("failpoints", "clock_offset_s", "host_id", "automatic_recovery"):
            if req.get(key) is not None:
                setattr(self, key, req[key])
        if req.get("probe_tools") is not None:
            self.probe_tools = list(req["probe_tools"])

    def environ(self, **extra: str) -> dict[str, str]:
        """The environment of a runtime process: this process's, plus everything above."""
        env = {**os.environ, **self.extra, **extra,
               "RECOVERYKIT_RUN_MARKER": self.run_marker,
               "RECOVERYKIT_FAILPOINTS": self.failpoints or "",
               "RECOVERYKIT_FAILPOINT_SOCKET": self.failpoint_socket,
               "RECOVERYKIT_HOST_ID": self.host_id,
               "RECOVERYKIT_CLOCK_OFFSET_S": repr(float(self.clock_offset_s)),
               "RECOVERYKIT_DATA_DIR": str(self.data_dir),
               "RECOVERYKIT_PROVIDER_BASE_URL": self.provider_base_url,
               "RECOVERYKIT_PROBE_TOOLS": json.dumps(self.probe_tools)}
        env.update(durable_writes.environ_for(self.failpoints, env))  # only while a durable.write point is armed
        for key, value in (("RECOVERYKIT_MODEL", self.model), ("RECOVERYKIT_API_KEY", self.api_key)):
            if value is not None:
                env[key] = value
            else:
                env.pop(key, None)
        return env


@dataclass(frozen=True)
class WorkerEnv:
    """The runtime process's view of ``RuntimeEnv.environ``."""

    data_dir: Path
    provider_base_url: str
    probe_tools: list[dict[str, Any]]
    host_id: str
    clock_offset_s: float
    model: str | None
    api_key: str | None

    def now(self) -> float:
        """The runtime's wall clock: real time plus the kit's offset ("two hours of downtime" at once)."""
        return time.time() + self.clock_offset_s


def from_environment(environ: dict[str, str] | None = None) -> WorkerEnv:
    env = os.environ if environ is None else environ
    return WorkerEnv(data_dir=Path(env["RECOVERYKIT_DATA_DIR"]),
                     provider_base_url=env["RECOVERYKIT_PROVIDER_BASE_URL"],
                     probe_tools=json.loads(env.get("RECOVERYKIT_PROBE_TOOLS") or "[]"),
                     host_id=env.get("RECOVERYKIT_HOST_ID", "host-a"),
                     clock_offset_s=float(env.get("RECOVERYKIT_CLOCK_OFFSET_S") or 0.0),
                     model=env.get("RECOVERYKIT_MODEL"), api_key=env.get("RECOVERYKIT_API_KEY"))


def clock() -> float:
    """Wall-clock time as the kit wants this process to see it."""
    return time.time() + float(os.environ.get("RECOVERYKIT_CLOCK_OFFSET_S") or 0.0)


def signal_ready() -> None:
    """Tell the adapter that started this process that it admits work (``Supervisor.spawn(ready="file")``)."""
    path = os.environ.get("RECOVERYKIT_READY_FILE")
    if path:
        Path(path).touch()
