"""Errors of the adapter protocol: a broken adapter is not a misused kit.

``ProtocolError`` means the adapter broke the protocol (or went silent): the message says what the kit
sent, what it expected, what came back and why that is wrong, which document to read, and the verdict
(invalid for a definite break, unknown for silence). ``OperationFailed`` is different: the adapter
answered correctly with an ``error`` message, and the kit must take the code's definiteness into
account. ``AdapterCommandError`` is a user mistake (the adapter command cannot be started).
"""

from __future__ import annotations

from typing import Any

from recoverykit.model.catalogue import Verdict
from recoverykit.model.errors import InvalidArgument, RecoveryKitError

PROTOCOL_DOC = "docs/protocol.md"
_SHOW = 240  # characters of a message shown in an error; the full text is in the message record


def _clip(value: Any) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes | bytearray) else str(value)
    text = text.rstrip("\n").replace("\n", "\\n")
    if len(text) > _SHOW:
        return f"{text[:_SHOW]}... ({len(text)} characters in all)"
    return text


class EnvironmentFault(RecoveryKitError, RuntimeError):
    """The kit's own environment (provider, broker, run directory) failed: the verdict is unknown."""


class OutputsNotWritten(RecoveryKitError):
    """The disk under ``--out`` is full (or refuses writes): the run's results could not be written. Not a verdict on
    the runtime and not a defect of the kit: the command line says so and exits 2 (unknown), never 70."""


class ProtocolError(RecoveryKitError):
    """The adapter broke the protocol; ``verdict`` is INVALID for a definite break, UNKNOWN for silence."""

    verdict: Verdict = Verdict.INVALID

    def __init__(
        self,
        reason: str,
        *,
        sent: Any = None,
        expected: str | None = None,
        received: Any = None,
        doc: str = PROTOCOL_DOC,
        verdict: Verdict | None = None,
    ) -> None:
        self.reason = reason
        self.sent = sent
        self.expected = expected
        self.received = received
        self.doc = doc
        if verdict is not None:
            self.verdict = verdict
        super().__init__(self._paragraph())

    def _paragraph(self) -> str:
        what = []
        if self.sent is not None:
            what.append(f"the kit sent {_clip(self.sent)}")
        if self.expected:
            what.append(f"{'expecting' if what else 'the kit expected'} {self.expected}")
        text = f"Adapter protocol error (verdict: {self.verdict.value}): " + ", ".join(what)
        if self.received is not None:
            text += f"{'; ' if what else ''}the adapter wrote {_clip(self.received)}"
        return f"{text.rstrip(': ')}. Why: {self.reason.rstrip('.')}. Read {self.doc}."

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code


class MalformedMessage(ProtocolError):
    """A line that is not UTF-8 JSON, not an object, of an unknown type, or that fails its schema."""


class UnexpectedReply(ProtocolError):
    """A well-formed message that answers nothing outstanding, or answers with the wrong type."""


class LineTooLong(ProtocolError):
    """A line over the client's size limit; the stream cannot be trusted after it."""


class AdapterExited(ProtocolError):
    """The adapter process ended (or closed stdout) while the kit waited for a reply."""


class AdapterTimeout(ProtocolError):
    """No reply within the timeout: silence proves nothing, so the verdict is unknown."""

    verdict = Verdict.UNKNOWN


class SnapshotMismatch(ProtocolError):
    """An observe snapshot contradicts the adapter's own init_ok (a declared section missing, or invented)."""


class OperationFailed(RecoveryKitError):
    """The adapter answered a request with a well-formed ``error`` message.

    ``definite`` True means the operation did not happen and never will; False means it may have
    happened (or may still happen), and a checker must accept either outcome.
    """

    def __init__(self, request_type: str, code: str, text: str, definite: bool) -> None:
        self.request_type = request_type
        self.code = code
        self.text = text
        self.definite = definite
        kind = "definite: it did not happen" if definite else "indefinite: it may have happened"
        super().__init__(f"The adapter refused {request_type!r} with error {code!r} ({kind}): {text}")


class RefusedProcess(ProtocolError):
    """The adapter's ``processes`` named a pid the kit may not kill: not of this run, or the kit's own."""


class NothingKilled(RecoveryKitError):
    """A kill found no runtime process to kill (the adapter listed none of the roles, or they were gone): the
    case interrupted nothing, so it proves nothing about recovery (unknown, never invalid on runtime clauses)."""


class AdapterCommandError(InvalidArgument):
    """The adapter command line is empty, unparsable, or names a program that cannot be started."""


__all__ = [
    "AdapterCommandError",
    "AdapterExited",
    "AdapterTimeout",
    "LineTooLong",
    "MalformedMessage",
    "NothingKilled",
    "OperationFailed",
    "ProtocolError",
    "RefusedProcess",
    "SnapshotMismatch",
    "UnexpectedReply",
]
