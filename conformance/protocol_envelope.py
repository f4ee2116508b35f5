"""The envelope every adapter message shares, and the registry of error codes.

Kept apart from the RPC declarations so that the rules a message must satisfy whatever its type
(reserved keys, msg_id, in_reply_to, error definiteness) are written down once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PROTOCOL_VERSION = "1.4"  # MAJOR.MINOR: the kit accepts any adapter with the same MAJOR
MAX_LINE_BYTES = 1 << 20  # default per-line limit, newline excluded; the client can raise it
MAX_MSG_ID = 2**53 - 1  # exactly representable in every JSON implementation (IEEE double)

RESERVED_KEYS: dict[str, str] = {
    "type": "the message type: a request name, `<request>_ok` for its reply, or `error`",
    "msg_id": "an integer unique among the messages of one sender (0 <= msg_id < 2^53)",
    "in_reply_to": "on replies only: the `msg_id` of the request answered",
    "code": "on `error` only: the error code (see Errors)",
    "text": "on `error` only: a human-readable explanation",
    "definite": "on `error` only: true if the operation certainly did not and will not happen",
}


# Meanings of fields that recur across messages and records; a field's own description wins.
FIELD_DOCS: dict[str, str] = {
    "type": "The message type (see Envelope).",
    "work_id": "The work item (chat request, Goal or Job), as the runtime identifies it.",
    "session_id": "The chat session, as the runtime identifies it.",
    "goal_id": "The Goal, as the runtime identifies it.",
    "approval_id": "The approval, as the runtime identifies it.",
    "turn_id": "The turn, as the runtime identifies it.",
    "call_id": "The tool call, as the runtime identifies it.",
    "run_id": "The run (one attempt of a task), as the runtime identifies it.",
    "receipt_id": "The usage receipt, as the runtime identifies it.",
    "task_id": "The Paperclip task, as the runtime identifies it (since 1.3).",
    "company": "The company a Paperclip task belongs to, as the runtime names it (since 1.3).",
    "pid": "An operating-system process id.",
    "host_id": "The execution host identity the runtime records.",
    "kind": "One value of the vocabulary named in the type column.",
    "status": "One value of the vocabulary named in the type column.",
    "state": "One value of the vocabulary named in the type column.",
    "role": "What the process is: the killer picks the worker, the tree, or spares tool children by role.",
}


def finish_schema(schema: dict, cls: type) -> None:
    """Pydantic hook: fill in recurring field meanings and mark `type` required on the wire."""
    for name, prop in schema.get("properties", {}).items():
        if not prop.get("description") and name in FIELD_DOCS:
            prop["description"] = FIELD_DOCS[name]
    # `type` has a default so the kit can build messages without repeating it, but on the wire it is required.
    if "type" in schema.get("properties", {}):
        required = schema.setdefault("required", [])
        if "type" not in required:
            required.insert(0, "type")


class Message(BaseModel):
    """Base of every message: strict (no type coercion), closed (unknown keys are a break)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, json_schema_extra=finish_schema)

    msg_id: int = Field(ge=0, le=MAX_MSG_ID, description="Unique among the messages of one sender.")


class Request(Message):
    """A message from the kit to the adapter. Adapters must ignore keys they do not know."""


class Reply(Message):
    """A message from the adapter to the kit, answering exactly one request."""

    in_reply_to: int = Field(ge=0, le=MAX_MSG_ID, description="The `msg_id` of the request answered.")


class ErrorReply(Reply):
    """The adapter could not perform the request. Any request may be answered with an error."""

    type: Literal["error"] = "error"
    code: str = Field(
        min_length=1, max_length=64,
        description="A registered code (see Errors) or a custom one (snake_case by convention; always indefinite).",
    )
    text: str = Field(max_length=4096, description="What went wrong, for a person.")
    definite: bool = Field(
        description="True: the operation did not happen and never will. False: it may have happened. "
        "Must match the registry for registered codes; must be false for custom codes."
    )


@dataclass(frozen=True, slots=True)
class ErrorCode:
    name: str
    definite: bool
    doc: str


ERROR_CODES: tuple[ErrorCode, ...] = (
    ErrorCode("timeout", False,
              "The adapter gave up waiting for the runtime; the operation may still complete."),
    ErrorCode("crashed", False,
              "A runtime process the operation depended on died while it was in flight."),
    ErrorCode("not_supported", True,
              "The adapter or runtime does not implement this request (e.g. a profile it did not declare)."),
    ErrorCode("malformed_request", True,
              "The request broke the protocol as the adapter understands it; nothing was done."),
    ErrorCode("unknown_work_item", True,
              "The request names a work item, Goal, approval or run the runtime has never seen."),
    ErrorCode("precondition_failed", True,
              "A stale revision, control version or observed run id, or a state that forbids the request."),
    ErrorCode("forbidden", True,
              "Since 1.3: the caller lacks the authority the request needs (a Retry without board task-mutation "
              "authority); nothing was done."),
    ErrorCode("temporarily_unavailable", True,
              "The runtime refused the request now (stopped, shutting down, storage unreadable)."),
    ErrorCode("internal", False,
              "Anything else went wrong inside the adapter or runtime; the outcome is unknown."),
)
ERROR_CODES_BY_NAME: dict[str, ErrorCode] = {c.name: c for c in ERROR_CODES}


def error_is_definite(code: str) -> bool:
    """Definiteness the kit assumes for a code: custom codes are indefinite ("when in doubt, indefinite")."""
    known = ERROR_CODES_BY_NAME.get(code)
    return known.definite if known is not None else False


def major(version: str) -> str:
    return version.split(".", 1)[0]
