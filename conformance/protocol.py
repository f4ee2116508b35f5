"""Encoding, parsing and checking of adapter messages, and the protocol's JSON Schema.

Everything the kit reads from an adapter goes through ``parse_reply`` (or ``decode``): a line either
becomes a validated pydantic message or raises a typed ``ProtocolError`` whose text teaches what was
wrong. Nothing else may escape: the fuzz tests hold this module to that.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema
from recoverykit.conformance.errors import LineTooLong, MalformedMessage, SnapshotMismatch, UnexpectedReply
from recoverykit.conformance.protocol_envelope import (
    ERROR_CODES_BY_NAME,
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    ErrorReply,
    Message,
    Reply,
    Request,
    major,
)
from recoverykit.conformance.protocol_rpcs import REPLY_TYPES, REQUEST_TYPES, RPCS, InitOk
from recoverykit.conformance.protocol_snapshot import Section, Snapshot

Direction = Literal["from_adapter", "from_kit"]
DOC = "docs/protocol.md"
ADAPTER_MESSAGE_TYPES: dict[str, type[Reply]] = {**REPLY_TYPES, "error": ErrorReply}


def encode(message: Message) -> bytes:
    """One protocol line: compact JSON, ASCII-safe, newline-terminated. Nulls are sent explicitly."""
    body = message.model_dump(mode="json")
    ordered = {"type": body.pop("type"), **body}  # type first: easier to read in logs and transcripts
    return json.dumps(ordered, separators=(",", ":")).encode("ascii") + b"\n"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _explain(exc: ValidationError, limit: int = 3) -> str:
    problems = []
    for err in exc.errors(include_url=False)[:limit]:
        where = ".".join(str(p) for p in err["loc"]) or "(message)"
        problems.append(f"`{where}`: {err['msg']}")
    more = exc.error_count() - limit
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")


def decode(line: bytes | str, *, direction: Direction = "from_adapter", max_line_bytes: int = MAX_LINE_BYTES,
           sent: Any = None, expected: str | None = None) -> Message:
    """Turn one line into a validated message of the given direction, or raise a ``ProtocolError``."""
    raw = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else bytes(line)
    body = raw[:-1] if raw.endswith(b"\n") else raw
    ctx = {"sent": sent, "expected": expected or "one JSON object on one line", "received": raw}
    if len(body) > max_line_bytes:
        raise LineTooLong(f"the line is {len(body)} bytes or more, over the {max_line_bytes}-byte limit",
                               doc=f"{DOC}#transport", **ctx)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedMessage(f"the line is not UTF-8 ({exc.reason} at byte {exc.start})",
                               doc=f"{DOC}#transport", **ctx) from None
    if not text.strip():
        raise MalformedMessage("an empty line; stdout must carry only messages (logs go to stderr)",
                               doc=f"{DOC}#transport", **ctx)
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise MalformedMessage(f"not JSON ({exc}); stdout must carry only messages, logs go to stderr",
                               doc=f"{DOC}#transport", **ctx) from None
    if not isinstance(obj, dict):
        raise MalformedMessage(f"a JSON {type(obj).__name__}, not an object", doc=f"{DOC}#envelope", **ctx)
    kind = obj.get("type")
    known = ADAPTER_MESSAGE_TYPES if direction == "from_adapter" else REQUEST_TYPES
    if not isinstance(kind, str) or kind not in known:
        hint = ""
        if direction == "from_adapter" and isinstance(kind, str) and kind in REQUEST_TYPES:
            hint = f" (`{kind}` is a request; an adapter only replies, with `{kind}_ok` or `error`)"
        raise MalformedMessage(f"the `type` {kind!r} is not a known message type{hint}",
                               doc=f"{DOC}#envelope", **ctx)
    try:
        return known[kind].model_validate_json(text, strict=True)
    except ValidationError as exc:
        raise MalformedMessage(f"the `{kind}` message fails its schema: {_explain(exc)}",
                               doc=f"{DOC}#{_anchor(kind)}", **ctx) from None
    except (ValueError, RecursionError) as exc:  # pydantic's own JSON parser may disagree on edge cases
        raise MalformedMessage(f"the `{kind}` message was rejected by the schema parser ({exc})",
                               doc=f"{DOC}#envelope", **ctx) from None


def _anchor(kind: str) -> str:
    return "errors" if kind == "error" else kind.removesuffix("_ok")


def expected_reply(request: Request) -> str:
    return f"`{request.type}_ok` or `error` with in_reply_to {request.msg_id}"  # type: ignore[attr-defined]


def check_answers(reply: Reply, request: Request, raw: Any = None) -> Reply:
    """Check that a parsed reply answers this request, with a consistent error if it is one."""
    rtype = request.type  # type: ignore[attr-defined]
    ctx = {"sent": encode(request), "expected": expected_reply(request), "received": raw or encode(reply)}
    if reply.in_reply_to != request.msg_id:
        raise UnexpectedReply(f"in_reply_to {reply.in_reply_to} answers no request in flight", **ctx)
    if isinstance(reply, ErrorReply):
        known = ERROR_CODES_BY_NAME.get(reply.code)
        if known is not None and reply.definite != known.definite:
            raise MalformedMessage(
                f"error code `{reply.code}` is {'definite' if known.definite else 'indefinite'} by the registry, "
                f"but the message says definite={str(reply.definite).lower()}", doc=f"{DOC}#errors", **ctx)
        if known is None and reply.definite:
            raise MalformedMessage(f"custom error code `{reply.code}` claims definite=true; custom codes are "
                                   "indefinite (use a registered code for a definite refusal)",
                                   doc=f"{DOC}#errors", **ctx)
        return reply
    if reply.type != f"{rtype}_ok":  # type: ignore[attr-defined]
        raise UnexpectedReply(f"a reply of type `{reply.type}` cannot answer `{rtype}`", **ctx)  # type: ignore[attr-defined]
    if isinstance(reply, InitOk) and major(reply.protocol_version) != major(PROTOCOL_VERSION):
        raise MalformedMessage(f"the adapter speaks protocol {reply.protocol_version}, the kit {PROTOCOL_VERSION}; "
                               "the MAJOR versions must match", doc=f"{DOC}#handshake", **ctx)
    return reply


def parse_reply(line: bytes | str, request: Request, *, max_line_bytes: int = MAX_LINE_BYTES) -> Reply:
    """Parse a line the adapter wrote in answer to ``request``; raise a ``ProtocolError`` if it is not one."""
    msg = decode(line, max_line_bytes=max_line_bytes, sent=encode(request), expected=expected_reply(request))
    assert isinstance(msg, Reply)
    return check_answers(msg, request, raw=line)


def check_snapshot(snapshot: Snapshot, observes: list[Section] | tuple[Section, ...], *, raw: Any = None,
                   storage_declared: bool | None = None) -> Snapshot:
    """A declared section must be present (a list), an undeclared one absent (null): never invented. A declared
    store (``init_ok.storage``) is reported in every snapshot; while it is not ``ok`` sections may be null."""
    if storage_declared is not None and storage_declared != (snapshot.storage is not None):
        why = ("`storage` is declared in init_ok but sent as null" if storage_declared
               else "`storage` is filled but not declared in init_ok")
        raise SnapshotMismatch(why, expected="snapshot.storage exactly when init_ok.storage is declared",
                               received=raw, doc=f"{DOC}#observe-snapshot")
    declared = set(observes)
    unreadable = snapshot.storage is not None and snapshot.storage.state != "ok"
    for section in Section:
        value = getattr(snapshot, section.value)
        if section in declared and value is None and not unreadable:
            raise SnapshotMismatch(f"section `{section.value}` is declared in init_ok.observes but sent as null "
                                   "(send [] when there is nothing)", expected="every declared section as a list",
                                   received=raw, doc=f"{DOC}#observe-snapshot")
        if section not in declared and value is not None:
            raise SnapshotMismatch(f"section `{section.value}` is filled but not declared in init_ok.observes; "
                                   "declare it or send null", expected="undeclared sections as null",
                                   received=raw, doc=f"{DOC}#observe-snapshot")
    return snapshot


def all_message_models() -> list[type[BaseModel]]:
    models: list[type[BaseModel]] = []
    for rpc in RPCS:
        models += [rpc.request, rpc.reply]
    return [*models, ErrorReply]


def json_schema() -> dict[str, Any]:
    """One JSON Schema (draft 2020-12) document covering every message, in registry order."""
    models = all_message_models()
    refs, top = models_json_schema([(m, "validation") for m in models], ref_template="#/$defs/{model}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"recoverykit adapter protocol {PROTOCOL_VERSION}",
        "description": "Every message of the recoverykit adapter protocol (one JSON object per line). "
        "Generated by `recoverykit protocol schema`; see docs/protocol.md.",
        "oneOf": [refs[(m, "validation")] for m in models],
        "$defs": top["$defs"],
    }


def message_schema(type_name: str) -> dict[str, Any]:
    """The JSON Schema of one message type (e.g. ``observe_ok``), self-contained, with only the defs it uses."""
    model = {**REQUEST_TYPES, **ADAPTER_MESSAGE_TYPES}[type_name]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            **model.model_json_schema(ref_template="#/$defs/{model}")}


def sdk_schema() -> dict[str, Any]:
    """What ``recoverykit.adapter`` checks an adapter's replies against, as data: the SDK may not import this
    package (it would pull in the model), so it ships this document as kit/adapter/protocol_schema.json,
    kept equal to this function's output by tests/test_adapter_sdk.py. Regenerate with
    ``python -c "from recoverykit.conformance.protocol import write_sdk_schema; write_sdk_schema()"``."""
    replies = {**{name: message_schema(name) for name in REPLY_TYPES}, "error": message_schema("error")}
    return {
        "generated_by": "recoverykit.conformance.protocol.sdk_schema; do not edit",
        "protocol_version": PROTOCOL_VERSION,
        "doc": DOC,
        "replies": replies,
        "anchors": {name: _anchor(name) for name in replies},
        "error_codes": {code.name: code.definite for code in ERROR_CODES_BY_NAME.values()},
        "sections": [section.value for section in Section],
        "requests": {rpc.name: rpc.since for rpc in RPCS},
    }


def sdk_schema_text() -> str:
    return json.dumps(sdk_schema(), indent=1, sort_keys=True) + "\n"


def write_sdk_schema(path: str | None = None) -> None:
    from pathlib import Path

    target = Path(path) if path else Path(__file__).resolve().parent.parent / "kit" / "adapter" / "protocol_schema.json"
    target.write_text(sdk_schema_text(), encoding="utf-8")
