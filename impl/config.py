"""The runtime's configuration, written by the adapter into the data directory at init and start.

Workers and the control process read it at start. The tool registry in it is the trusted one: a
tool's effect class and implementation identity (argv + version) come from here, never from a
tool's name or from what the model says about it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

EFFECT_CLASSES = ("read_only", "idempotent", "state_probe", "unknown")
# A tool registered without a trusted class (a general shell, a third-party MCP tool, a custom tool): seed 000,
# "General shell, third-party MCP, and custom tools default to unknown."
DEFAULT_EFFECT_CLASS = "unknown"
SAFE_FOR_RECOVERY = ("read_only", "state_probe")
# blocked_reason of a call that needs a one-time approval before it may run (impl/approvals.py)
AWAITING_APPROVAL = "awaiting_approval"


@dataclass(frozen=True)
class ToolSpec:
    name: str
    argv: list[str]
    effect_class: str
    version: str
    external: bool = False  # starts an external operation the runtime waits on (impl/waits.py; protocol 1.3)

    @classmethod
    def registered(cls, t: dict) -> ToolSpec:
        """A tool as the kit registers it (``init``/``start``); no class given: the default for custom tools."""
        if t.get("external_operation"):  # protocol 1.3: the scripted external operation of profile waits
            return cls(t["name"], list(t["argv"]), t.get("effect_class") or DEFAULT_EFFECT_CLASS, t["version"],
                       True)
        return cls(t["name"], list(t["argv"]), t.get("effect_class") or DEFAULT_EFFECT_CLASS, t["version"])

    def identity(self) -> dict:
        return {"argv": list(self.argv), "version": self.version}


@dataclass
class Config:
    data_dir: str
    provider_base_url: str = "http://127.0.0.1:9/v1"
    model: str = "scripted"
    api_key: str | None = None  # the provider credential (the kit's init.api_key); never replaced by another
    tools: list[ToolSpec] = field(default_factory=list)
    failpoint_socket: str = ""
    run_marker: str = ""
    host_id: str = "host-unknown"
    clock_offset_s: float = 0.0
    failpoints: str = ""
    workers: int = 2
    concurrency: int = 4  # work items running at once across all workers and sessions
    retry_delays_s: list[float] = field(default_factory=lambda: [1.0, 2.0, 4.0, 8.0, 16.0])
    retry_jitter: float = 0.2
    credentials_env: str | None = None  # when set, this env var must hold the provider credential
    automatic_recovery: bool = True

    def registry(self) -> dict[str, ToolSpec]:
        return {t.name: t for t in self.tools}

    @property
    def path(self) -> Path:
        return Path(self.data_dir)

    @property
    def run_dir(self) -> Path:
        """Where the sockets live; a short path under /tmp when the data dir is too deep for AF_UNIX."""
        run = self.path / "run"
        if len(str(run / "wake-4194304.sock")) <= 100:  # sun_path holds 108 bytes
            return run
        digest = hashlib.sha1(str(self.path.resolve()).encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"rk-impl-{digest}"

    def save(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f"config.json.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, self.path / "config.json")

    @classmethod
    def load(cls, data_dir: str | Path) -> Config:
        raw = json.loads((Path(data_dir) / "config.json").read_text())
        raw["tools"] = [ToolSpec(**t) for t in raw.get("tools", [])]
        return cls(**raw)
