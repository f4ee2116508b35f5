"""Which tools the kit had registered, with which effect class, at any moment of a run: the trusted registry.

The effect checks judge a runtime's tool safety against the kit's own registration, never against a tool's name
or a model's word. At ``init`` the kit registers the standard probes (``probe_tools.standard_probe_tools``); a
``start`` may carry the tools as they are now (protocol 1.1, ``start.probe_tools``), which the history records
with that start's invocation, so a bundle checked later sees the same registry. The class a tool had when it
really ran is in its witness record (the probe's argv carries it): the implementation identity at execution.
"""

from __future__ import annotations

from recoverykit.conformance.history import History
from recoverykit.conformance.probe_tools import UNCLASSIFIED, standard_probe_tools
from recoverykit.model.catalogue import SAFE_FOR_RECOVERY

STANDARD: dict[str, str] = {t.name: t.effect_class.value for t in standard_probe_tools("witness.jsonl")}
SAFE: frozenset[str] = frozenset(c.value for c in SAFE_FOR_RECOVERY)


def registry_at(history: History, t: float) -> dict[str, str]:
    """Tool name -> effect class as the kit had registered them at time ``t``."""
    registry = dict(STANDARD)
    for op in history.ops:
        tools = op.value.get("probe_tools") if op.type == "invoke" and op.f == "start" else None
        if tools and op.time <= t:
            registry = {str(x["name"]): str(x.get("effect_class") or UNCLASSIFIED) for x in tools}
    return registry


def declared_read_only(history: History, t: float) -> set[str]:
    """Tools whose plugin declared them read-only (``plugin_hints.readOnlyHint``, protocol 1.2) at time ``t``."""
    declared: set[str] = set()
    for op in history.ops:
        tools = op.value.get("probe_tools") if op.type == "invoke" and op.f == "start" else None
        if tools and op.time <= t:
            declared = {str(x["name"]) for x in tools if (x.get("plugin_hints") or {}).get("readOnlyHint")}
    return declared


def safe(registry: dict[str, str], tool: str) -> bool:
    """A tool the registry does not know, or registered without a class (``UNCLASSIFIED``), is never safe: general
    shell, third-party MCP and custom tools default to unknown."""
    return registry.get(tool, "unknown") in SAFE
