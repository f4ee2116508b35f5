"""The conformance suite: adapter protocol, adapter client, lockstep machine, history checker, certify.

Layout: ``protocol_envelope`` (envelope and error codes), ``protocol_snapshot`` (the observe snapshot),
``protocol_rpcs`` (every RPC, declared once), ``protocol`` (parse, check, JSON Schema), ``protocol_docs``
(docs/protocol.md), ``client`` and ``client_process`` (AdapterClient: messages, then process hygiene),
``ping`` (the first check of an adapter), ``errors``. What an adapter author or a suite writer
needs is re-exported here; the modules' other names are machinery and may change.
"""

from recoverykit.conformance.client import AdapterClient, Exchange, PendingCall
from recoverykit.conformance.errors import (
    AdapterCommandError,
    AdapterExited,
    AdapterTimeout,
    LineTooLong,
    MalformedMessage,
    OperationFailed,
    ProtocolError,
    SnapshotMismatch,
    UnexpectedReply,
)
from recoverykit.conformance.protocol import check_snapshot, decode, encode, json_schema, parse_reply
from recoverykit.conformance.protocol_envelope import (
    ERROR_CODES,
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    ErrorReply,
    error_is_definite,
)
from recoverykit.conformance.protocol_rpcs import RPCS, RPCS_BY_NAME, InitOk, ProbeTool
from recoverykit.conformance.protocol_snapshot import Section, Snapshot

__all__ = [
    "ERROR_CODES",
    "MAX_LINE_BYTES",
    "PROTOCOL_VERSION",
    "RPCS",
    "RPCS_BY_NAME",
    "AdapterClient",
    "AdapterCommandError",
    "AdapterExited",
    "AdapterTimeout",
    "ErrorReply",
    "Exchange",
    "InitOk",
    "LineTooLong",
    "MalformedMessage",
    "OperationFailed",
    "PendingCall",
    "ProbeTool",
    "ProtocolError",
    "Section",
    "Snapshot",
    "SnapshotMismatch",
    "UnexpectedReply",
    "check_snapshot",
    "decode",
    "encode",
    "error_is_definite",
    "json_schema",
    "parse_reply",
]
