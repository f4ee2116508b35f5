"""The scripted provider's ledger: the ground truth for every usage clause.

Append-only JSON lines, one ``os.write`` per record on an ``O_APPEND`` descriptor followed by
``fsync``, so a record the provider wrote survives the kit being killed right after. Records:

- ``{"event": "request", "seq", "time", "request_id", "request_id_source", "response_id", "attempt",
  "script_id", "step", "usage_style", "stream", "include_usage", "model"}``: a request was received
  (``request_id`` from the ``X-Request-Id`` header when sent, else generated; ``response_id`` the
  ``chatcmpl-...`` id its reply carries, unique per attempt, null when no script step fits;
  ``attempt`` counts requests for the same script step, from 1; ``model`` the model it named,
  ``api_key_sha256`` a fingerprint of its bearer key, null without one; ``role`` ``verifier`` for a Goal
  acceptance request the runtime marked with ``X-Recoverykit-Role: verifier``, else ``worker``; ``tools_offered``
  the tools the request offered, by name);
- ``{"event": "held", "seq", "time", "at_chunk"}`` and ``{"event": "released", "seq", "time"}``;
- ``{"event": "response", "seq", "time", "request_id", "response_id", "response_id_sent", "status",
  "stream", "delivered", "chunks_sent", "usage_style", "usage_billed", "usage_reported", "usage_chunks",
  "probe_tokens", "cut", "call_ids", "tool_names", "read_only_claims", "script_id", "text_sent"}`` (``text_sent``:
  the content written, all of it or, for a response cut off, the partial text the client could have read):
  ``delivered`` is true only when the whole response (for a stream, through
  ``data: [DONE]``) was written; ``response_id_sent`` when some of the body carrying the id was;
  ``usage_billed`` is what the provider charges (the step's usage for any non-error reply, even one cut
  off, whatever the usage style); ``usage_reported`` is the last usage the client could have read (None
  when it saw none: always so in style ``none``, and in style ``final`` without ``include_usage``);
  ``usage_chunks`` how many usage objects it could have read (more than one only in style
  ``cumulative``); ``call_ids``, ``tool_names`` and ``read_only_claims`` are the tool calls it carried, index by
  index with ``probe_tokens`` (a claim: the model's arguments say ``"read_only": true``, as a model asked to
  classify its own call would); ``refused`` (``model_not_found`` / ``invalid_api_key``) when a resource the kit took
  away answered it (404 / 401);
- ``{"event": "resource_refused", "script_id", "model", "api_key_sha256"}`` and
  ``{"event": "resource_restored", "script_id"}``: the kit took a resource away from a script's requests,
  or gave it back.

``read_ledger`` tolerates a torn last line (a writer killed mid-write); ``calls`` joins a request
with its response.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recoverykit.model.errors import MalformedRecord


class Ledger:
    """The writer; thread-safe; every record is durable when ``append`` returns."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"event": event, "time": time.time(), **fields}
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        with self._lock:
            if self._fd < 0:
                raise ValueError(f"ledger {self.path} is closed")
            os.write(self._fd, line)
            os.fsync(self._fd)
            self._records.append(record)
        return record

    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._records)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def read_jsonl(path: str | os.PathLike) -> tuple[list[dict[str, Any]], str | None]:
    """(records, torn last line or None). A bad line anywhere but last is corruption."""
    data = Path(path).read_bytes() if Path(path).exists() else b""
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline, else an unfinished record
    records, torn = [], None
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            records.append(json.loads(raw))
        except ValueError as exc:
            raise MalformedRecord(f"{path}: line {number} is not JSON ({exc}): {raw[:200]!r}") from None
    if tail.strip():
        try:
            records.append(json.loads(tail))  # complete JSON, only the newline is missing
        except ValueError:
            torn = tail.decode(errors="replace")
    return records, torn


def read_ledger(path: str | os.PathLike) -> list[dict[str, Any]]:
    return read_jsonl(path)[0]


@dataclass(frozen=True)
class Call:
    """One request and (if it was answered or cut) its response record."""

    request: dict[str, Any]
    response: dict[str, Any] | None

    @property
    def seq(self) -> int:
        return self.request["seq"]

    @property
    def delivered(self) -> bool:
        return bool(self.response and self.response.get("delivered"))

    @property
    def usage_billed(self) -> dict[str, int] | None:
        return self.response.get("usage_billed") if self.response else None

    @property
    def usage_reported(self) -> dict[str, int] | None:
        return self.response.get("usage_reported") if self.response else None

    @property
    def usage_chunks(self) -> int:
        """How many usage objects the client could have read (0 for a ledger older than the field)."""
        return int(self.response.get("usage_chunks") or 0) if self.response else 0

    @property
    def header_request_id(self) -> str | None:
        """The runtime's own ``X-Request-Id``, if it sent one."""
        return self.request["request_id"] if self.request.get("request_id_source") == "header" else None

    @property
    def response_id(self) -> str | None:
        return self.request.get("response_id")

    @property
    def response_id_sent(self) -> bool:
        """Did the client get (part of) the body carrying ``response_id``?"""
        return bool(self.response and self.response.get("response_id_sent"))

    def ids(self) -> tuple[str, ...]:
        """Every id a receipt may name this attempt by: its request id (the runtime's ``X-Request-Id``, or the
        provider's own, returned in that response header) and its response id."""
        return tuple(i for i in (self.request.get("request_id"), self.response_id) if i)


def calls(records: list[dict[str, Any]]) -> list[Call]:
    requests = {r["seq"]: r for r in records if r.get("event") == "request"}
    responses = {r["seq"]: r for r in records if r.get("event") == "response"}
    return [Call(req, responses.get(seq)) for seq, req in sorted(requests.items())]
