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

- ``{"event": "rejected", "path", "path_bytes", "path_sha256", "status", "reason"}``: a request the provider does not
  serve (a bad request line, an unknown path, a refused body), answered with an error; ``path`` is at most
  ``PATH_PREFIX`` characters, with the whole path's length and digest beside it.
- ``{"event": "truncated", "what", "dropped_after_bytes"}``: the ledger stopped recording ``what`` here (see below).

Bounded, because whatever arrives on its port writes into it: records of unrecognised requests
(``rejected``, ``handler_error``: noise, no check reads them) share ``NOISE_BUDGET`` bytes; past it one
``truncated`` marker (``what: "unrecognised requests"``) is written and they are only counted. The evidence
records (requests to the completions endpoint, their responses, holds) are always recorded while the file is
under ``MAX_LEDGER_BYTES``; past it one ``truncated`` marker with ``what: "evidence"`` is written, and a
ledger holding it (``evidence_truncated``) leaves every verdict resting on it unknown, never valid.

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

NOISE = frozenset({"rejected", "handler_error"})  # records of requests the provider does not serve: no check reads them
NOISE_BUDGET = 1 << 20  # bytes of noise records a ledger keeps; then one ``truncated`` marker, and a count
MAX_LEDGER_BYTES = 256 << 20  # the whole ledger; past it evidence is dropped, marked, and its verdicts are unknown
TRUNCATED = "truncated"
EVIDENCE = "evidence"  # the ``what`` of a marker after which evidence records were dropped


def evidence_truncated(records: list[dict[str, Any]]) -> bool:
    """Did the provider drop evidence records (the ledger hit ``MAX_LEDGER_BYTES``)? Then nothing resting on the
    ledger can be valid."""
    return any(r.get("event") == TRUNCATED and r.get("what") == EVIDENCE for r in records)


class Ledger:
    """The writer; thread-safe; every record is durable when ``append`` returns (a dropped one: never written).

    Noise past ``NOISE_BUDGET`` is counted (``dropped``), not written, so a flood of unrecognised requests
    costs neither unbounded disk nor memory nor an fsync each."""

    def __init__(self, path: str | os.PathLike, *, noise_budget: int = NOISE_BUDGET,
                 max_bytes: int = MAX_LEDGER_BYTES) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        self._noise_budget, self._max_bytes = noise_budget, max_bytes
        self._bytes = self._noise = 0
        self.dropped: dict[str, int] = {}  # what -> how many records were not written

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"event": event, "time": time.time(), **fields}
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        noise = event in NOISE
        with self._lock:
            if self._fd < 0:
                raise ValueError(f"ledger {self.path} is closed")
            what = "unrecognised requests" if noise else EVIDENCE
            over = (self._noise + len(line) > self._noise_budget) if noise else \
                (self._bytes + len(line) > self._max_bytes)
            if over or what in self.dropped:
                if what not in self.dropped:
                    self._write({"event": TRUNCATED, "time": record["time"], "what": what,
                                 "dropped_after_bytes": self._noise if noise else self._bytes})
                self.dropped[what] = self.dropped.get(what, 0) + 1
                return record
            self._write(record, line)
            if noise:
                self._noise += len(line)
        return record

    def _write(self, record: dict[str, Any], line: bytes | None = None) -> None:
        line = line or (json.dumps(record, sort_keys=True) + "\n").encode()
        os.write(self._fd, line)
        os.fsync(self._fd)
        self._bytes += len(line)
        self._records.append(record)

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
