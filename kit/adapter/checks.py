"""Checking a reply against the protocol's own schemas before it is sent.

A reply that breaks the protocol ends a certify run with a protocol error, far from the handler that
wrote it. The SDK checks every reply here first, against the JSON Schema the kit itself validates with
(``protocol_schema.json``, generated from conformance/protocol_*.py and kept equal to it by a test), plus
the rules a schema cannot say: error definiteness agrees with the registry, and a snapshot fills exactly
the sections declared in ``init_ok.observes``. Each mistake names the protocol section to read.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA_FILE = Path(__file__).with_name("protocol_schema.json")


@cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


@cache
def _validator(reply_type: str) -> Draft202012Validator | None:
    found = schema()["replies"].get(reply_type)
    return Draft202012Validator(found) if found is not None else None


def doc(reply_type: str) -> str:
    """The section of docs/protocol.md that documents a reply type."""
    return f"{schema()['doc']}#{schema()['anchors'].get(reply_type, 'envelope')}"


def error_is_definite(code: str) -> bool:
    """The registry's definiteness; a custom code is indefinite ("when in doubt, indefinite")."""
    return bool(schema()["error_codes"].get(code, False))


def mistakes(reply: dict[str, Any], *, observes: list[str] | None = None, storage: bool | None = None) -> list[str]:
    """What is wrong with one reply, as sentences for the adapter's author (empty: nothing)."""
    kind = reply.get("type")
    validator = _validator(kind) if isinstance(kind, str) else None
    if validator is None:
        return [f"`{kind}` is not a reply type of protocol {schema()['protocol_version']} ({schema()['doc']}#envelope)"]
    found = []
    for err in sorted(validator.iter_errors(reply), key=lambda e: list(e.path))[:5]:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.path) or "(the reply)"
        found.append(f"`{kind}{where}`: {_short(err.message)} ({doc(kind)})")
    if kind == "error" and not found:
        definite = error_is_definite(reply["code"])
        if reply["definite"] != definite:
            said = str(reply["definite"]).lower()
            found.append(f"error code `{reply['code']}` is {'definite' if definite else 'indefinite'} by the registry "
                         f"(custom codes are indefinite), not definite={said} ({doc('error')})")
    if kind == "observe_ok" and not found and observes is not None:
        found += _snapshot_mistakes(reply["snapshot"], observes, storage)
    return found


def _snapshot_mistakes(snapshot: dict[str, Any], observes: list[str], storage: bool | None) -> list[str]:
    where = f"{schema()['doc']}#observe-snapshot"
    found = []
    store = snapshot.get("storage")
    if storage is not None and storage != (store is not None):
        found.append(f"`storage` must be sent exactly when init_ok declares `storage` ({where})")
    unreadable = store is not None and store.get("state") != "ok"
    for section in schema()["sections"]:
        value = snapshot.get(section)
        if section in observes and value is None and not unreadable:
            found.append(f"section `{section}` is declared in init_ok.observes but sent as null; send [] ({where})")
        if section not in observes and value is not None:
            found.append(f"section `{section}` is filled but not declared in init_ok.observes ({where})")
    return found


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
