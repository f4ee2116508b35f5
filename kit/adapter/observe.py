"""Building ``observe`` replies: records with every required field, sections exactly as declared.

A snapshot record must carry every field its schema names, with null for what the runtime cannot know
(never an invented value). The builders here take what you know as keywords and fill the rest with null,
and ``snapshot()`` sends each declared section as a list and every other one as null, so the two mistakes
adapters make most (a missing field, a section filled but not declared) cannot happen.

``continuation_key()`` derives the stable key a turn continues under (docs/adapter-guide.md, "Deriving the
continuation key"): a digest of the work item, the control version the turn runs under, and the commit
point it continues from. The same inputs give the same key in every process and after every restart.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .checks import schema

WORK_ITEM_DEFAULTS = {"kind": "chat_request", "desired_state": "run", "control_version": 0, "status": "queued",
                      "reason_code": None, "recovery_policy": None, "host_id": None, "parent_id": None,
                      "inputs": [], "last_progress": None}


def _record(name: str, defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    fields = schema()["replies"]["observe_ok"]["$defs"][name]["properties"]
    unknown = set(given) - set(fields)
    if unknown:
        raise TypeError(f"{name} has no field {sorted(unknown)}; its fields are {sorted(fields)}")
    return {key: given.get(key, defaults.get(key)) for key in fields}


def work_item(**given: Any) -> dict[str, Any]:
    return _record("WorkItem", WORK_ITEM_DEFAULTS, given)


def accepted_input(input_id: str, client_msg_id: str, text: str) -> dict[str, Any]:
    return {"input_id": input_id, "client_msg_id": client_msg_id, "text": text}


def turn(**given: Any) -> dict[str, Any]:
    return _record("Turn", {}, given)


def tool_call(**given: Any) -> dict[str, Any]:
    return _record("ToolCall", {}, given)


def usage_receipt(**given: Any) -> dict[str, Any]:
    """``usage`` defaults to ``unknown`` with null counts: claim nothing you did not read from the provider."""
    return _record("UsageReceipt", {"attempt": 1, "usage": "unknown"}, given)


def lease(**given: Any) -> dict[str, Any]:
    return _record("Lease", {}, given)


def snapshot(observes: list[str], **sections: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Declared sections as lists (``[]`` when not given), every other section null."""
    undeclared = [name for name, value in sections.items() if value is not None and name not in observes]
    if undeclared:
        raise ValueError(f"sections {undeclared} are filled but not declared in init_ok.observes")
    out: dict[str, Any] = {name: None for name in schema()["sections"]}
    for name in observes:
        out[name] = list(sections.get(name) or [])
    if "storage" in sections:
        out["storage"] = sections["storage"]
    return out


def continuation_key(work_id: str, control_version: int, commit_point: str | None) -> str:
    """A stable key for the turn that continues ``work_id`` from ``commit_point`` under ``control_version``."""
    text = f"{work_id}\x1f{control_version}\x1f{commit_point or ''}"
    return "ck-" + hashlib.sha256(text.encode()).hexdigest()[:24]
