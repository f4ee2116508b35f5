"""The conformance suite: adapter protocol, adapter client, lockstep machine, history checker, certify.

Layout: ``protocol_envelope`` (envelope and error codes), ``protocol_snapshot`` (the observe snapshot),
``protocol_rpcs`` (every RPC, declared once), ``protocol`` (parse, check, JSON Schema), ``protocol_docs``
(docs/protocol.md), ``client`` and ``client_process`` (AdapterClient: messages, then process hygiene),
``ping`` (the first check of an adapter), ``errors``. What an adapter author or a suite writer
needs is re-exported here; the modules' other names are machinery and may change.
"""

from __future__ import annotations

import importlib
from typing import Any

# The re-exports load on first use (PEP 562): a runtime process that imports only the failpoint client
# (``recoverykit.conformance.failpoint_client``, standard library only) must not pay for pydantic and the
# protocol models, ~0.4 s of every process start when they loaded eagerly.
_EXPORTS = {
    "AdapterClient": "client", "Exchange": "client", "PendingCall": "client",
    "AdapterCommandError": "errors", "AdapterExited": "errors", "AdapterTimeout": "errors",
    "LineTooLong": "errors", "MalformedMessage": "errors", "OperationFailed": "errors",
    "ProtocolError": "errors", "SnapshotMismatch": "errors", "UnexpectedReply": "errors",
    "check_snapshot": "protocol", "decode": "protocol", "encode": "protocol", "json_schema": "protocol",
    "parse_reply": "protocol",
    "ERROR_CODES": "protocol_envelope", "MAX_LINE_BYTES": "protocol_envelope",
    "PROTOCOL_VERSION": "protocol_envelope", "ErrorReply": "protocol_envelope",
    "error_is_definite": "protocol_envelope",
    "RPCS": "protocol_rpcs", "RPCS_BY_NAME": "protocol_rpcs", "InitOk": "protocol_rpcs", "ProbeTool": "protocol_rpcs",
    "Section": "protocol_snapshot", "Snapshot": "protocol_snapshot",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
