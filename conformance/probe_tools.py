"""Declaring probe tools for a runtime: name, argv, effect class, version (what ``init`` carries).

The argv runs ``probe.py`` as a file with the current interpreter in isolated mode without site
(``-I -S``), so a probe starts without importing the kit or scanning site-packages. The runtime
appends one argument, the tool call's arguments as JSON (see ``probe``), and must not add anything
else.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from recoverykit.conformance.protocol_rpcs import ProbeTool
from recoverykit.model.catalogue import EffectClass

PROBE_FILE = str(Path(__file__).with_name("probe.py"))
# The class a probe registered without one (protocol 1.2: effect_class null) records in the witness log.
UNCLASSIFIED = "unclassified"


def probe_tool(name: str, effect_class: EffectClass | str | None, witness_path: str | os.PathLike, *,
               broker_socket: str | None = None, version: str = "1", python: str | None = None,
               plugin_hints: dict[str, bool] | None = None, external_dir: str | os.PathLike | None = None) -> ProbeTool:
    """``effect_class`` None: a tool registered without a trusted class (a custom tool); ``plugin_hints``: what its
    plugin declares about it (MCP tool annotations). Both for adapters speaking protocol 1.2 only.
    ``external_dir``: the tool is the scripted external operation of profile waits (protocol 1.3)."""
    effect = None if effect_class is None else EffectClass(effect_class)
    argv = [python or sys.executable, "-I", "-S", PROBE_FILE, "--witness", os.fspath(witness_path), "--name", name,
            "--effect-class", effect.value if effect else UNCLASSIFIED, "--tool-version", version]
    if broker_socket:
        argv += ["--broker", broker_socket]
    if external_dir is not None:  # the scripted external operation (profile waits, protocol 1.3)
        argv += ["--external", os.fspath(external_dir)]
    return ProbeTool(name=name, argv=argv, effect_class=effect, version=version, plugin_hints=plugin_hints,
                     external_operation=external_dir is not None)


def external_dir(witness_path: str | os.PathLike) -> str:
    """Where a run's scripted external operations keep their state: beside its witness log."""
    return f"{os.fspath(witness_path)}.external"


def standard_probe_tools(witness_path: str | os.PathLike, broker_socket: str | None = None) -> list[ProbeTool]:
    """The probes every scenario can use: probe_read, probe_idempotent, probe_unknown, and probe_external, the
    scripted external operation of profile waits (a runtime that does not wait on operations runs it as an
    ordinary idempotent tool)."""
    return [probe_tool("probe_read", EffectClass.READ_ONLY, witness_path, broker_socket=broker_socket),
            probe_tool("probe_idempotent", EffectClass.IDEMPOTENT, witness_path, broker_socket=broker_socket),
            probe_tool("probe_unknown", EffectClass.UNKNOWN, witness_path, broker_socket=broker_socket),
            probe_tool("probe_external", EffectClass.IDEMPOTENT, witness_path, broker_socket=broker_socket,
                       external_dir=external_dir(witness_path))]
