"""HTTP handling for the scripted provider: OpenAI wire shapes, streaming, holds, cuts.

Kept apart from ``provider`` (which owns the decisions, the holds and the ledger) so that this
module only turns a planned reply into bytes on the wire and records what actually got out.

Whatever arrives, the answer is JSON and nothing reaches the kit's stderr: a malformed request (a bad
request line, ``Content-Length: abc`` or negative, a body that is not what an endpoint takes) gets a
400 with an OpenAI-style error, and the ``/_kit/`` endpoints answer 403 unless the request carries the
provider's per-run token in ``X-Recoverykit-Token`` (a runtime, or anything else on 127.0.0.1, must
not release its own holds or read the ledger).

Bounded, whatever arrives: a path over ``MAX_PATH`` bytes gets 414, a body over ``MAX_BODY`` 413, and the bodies
being read at once share ``BODY_BUDGET`` bytes (a request that cannot get its share within ``BODY_WAIT_S`` gets
503), so concurrent large bodies cannot grow the kit's memory with the number of connections. A refused
request's ledger record keeps a prefix of its path with the whole path's length and digest, once.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from recoverykit.conformance.peer import sender_of
from recoverykit.conformance.provider_script import ROLE_HEADER

if TYPE_CHECKING:
    from recoverykit.conformance.provider import Planned, ScriptedProvider

MAX_BODY = 16 * 1024 * 1024
MAX_PATH = 8192  # bytes of a request path (the endpoints' are short); longer: 414
BODY_BUDGET = 2 * MAX_BODY  # bytes of request bodies being read and parsed at once, over every connection
BODY_WAIT_S = 30.0  # how long a body waits for its share of the budget before 503
MAX_ID = 1024  # characters of an X-Request-Id or Idempotency-Key (the request's record keeps them whole); longer: 431
PATH_PREFIX = 200  # characters of a refused request's path its ledger record keeps
TOKEN_HEADER = "X-Recoverykit-Token"
KIT_PREFIX = "/_kit/"
_DIGITS = re.compile(r"[0-9]{1,20}")
COMPLETIONS_PATHS = ("/v1/chat/completions", "/chat/completions")
_SERVES = "this provider serves POST /v1/chat/completions (and GET /v1/models)"


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def tool_calls_of(plan: Planned) -> list[dict[str, Any]]:
    """The step's tool calls, each with a unique id and a unique ``probe_token`` in its arguments."""
    out = []
    for i, call in enumerate(plan.step.tool_calls):
        token = f"{plan.script.id}.{plan.step_index}.{plan.attempt}.{i}"
        arguments = {"probe_token": token, **call.arguments}
        n = 0 if plan.step.duplicate_call_ids else i
        # ``reuse_call_ids``: ids repeat from response to response (call_0, call_1, ...), as some servers' are
        call_id = (f"call_{n}" if plan.script.reuse_call_ids
                   else f"call_{plan.script.id}_{plan.step_index}_{plan.attempt}_{n}")
        out.append({"id": call_id.replace(".", "_"),
                    "type": "function", "function": {"name": call.name, "arguments": json.dumps(arguments)}})
    return out


def split_text(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


class _Cut(Exception):
    """The scripted reply ends here without finishing (or the client went away)."""


class _BodyBudget:
    """Bytes of request bodies in flight, shared by every connection: ``take`` waits (bounded) for room."""

    def __init__(self, total: int) -> None:
        self.total, self.used = total, 0
        self._cond = threading.Condition()

    def take(self, n: int, wait_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.used + n <= self.total, timeout=wait_s) and self._grant(n)

    def _grant(self, n: int) -> bool:
        self.used += n
        return True

    def give(self, n: int) -> None:
        with self._cond:
            self.used -= n
            self._cond.notify_all()


BODIES = _BodyBudget(BODY_BUDGET)  # per process: the kit's memory is what it bounds


def path_fields(path: Any) -> dict[str, Any]:
    """A path as a ledger record keeps it: a prefix, and the whole path's length and digest when it was cut."""
    if not isinstance(path, str):
        return {"path": None}
    if len(path) <= PATH_PREFIX:
        return {"path": path}
    raw = path.encode("utf-8", "replace")
    return {"path": path[:PATH_PREFIX], "path_bytes": len(raw), "path_sha256": hashlib.sha256(raw).hexdigest()}


def _shown(path: Any) -> str:
    text = str(path)
    return repr(text) if len(text) <= PATH_PREFIX else f"{text[:PATH_PREFIX]!r}... ({len(text)} characters)"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "recoverykit-scripted-provider"

    @property
    def provider(self) -> ScriptedProvider:
        return self.server.provider  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the ledger is the record
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own refusals (bad request line, header too long, unknown method) as JSON too."""
        short = self.responses.get(code, ("error", ""))[0]
        text = f"{message or short}; {_SERVES}"
        self.close_connection = True
        if self.request_version == self.default_request_version:  # the line did not parse: answer with a status line
            self.request_version = "HTTP/1.0"
        with contextlib.suppress(OSError, ValueError):  # the client is gone, or the ledger closed under a late request
            self._reject(code, text, "bad_request" if code == 400 else short.lower().replace(" ", "_"))

    # -- plumbing ----------------------------------------------------------------------------

    def _send_json(self, status: int, payload: Any, request_id: str | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        if request_id:
            self.send_header("X-Request-Id", request_id)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True

    def _reject(self, status: int, message: str, code: str) -> None:
        """Answer an error; the ledger keeps the path once, cut (``path_fields``), and the reason (never the path)."""
        self.provider.ledger.append("rejected", **path_fields(getattr(self, "path", None)), status=status,
                                    reason=message[:500])
        self._send_json(status, error_body(message, code=code))

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if len(self.path) > MAX_PATH:
            self.send_error(414, f"the request path is {len(self.path)} bytes, over the {MAX_PATH} byte limit")
            return False
        return True

    def _kit_allowed(self) -> bool:
        """A ``/_kit/`` request carries this run's token; else it is refused with 403 (and False)."""
        sent = self.headers.get(TOKEN_HEADER) or ""
        if hmac.compare_digest(sent.encode("utf-8", "replace"), self.provider.token.encode()):
            return True
        self._reject(403, f"the kit endpoints need this run's token in the {TOKEN_HEADER} header", "forbidden")
        return False

    def _body_length(self) -> int | None:
        """The declared body length, or None after answering 400/411/413 for a bad or missing one."""
        declared = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding"):
            self._reject(411, "send the body with a Content-Length, not Transfer-Encoding", "length_required")
            return None
        if declared is None:
            return 0
        if not _DIGITS.fullmatch(declared.strip()):
            self._reject(400, f"Content-Length {declared[:40]!r} is not a non-negative integer", "bad_content_length")
            return None
        length = int(declared)
        if length > MAX_BODY:
            self._reject(413, f"request body of {length} bytes is over the {MAX_BODY} byte limit", "body_too_large")
            return None
        return length

    def _cut_connection(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _client_gone(self) -> bool:
        """Has the client closed its end? (The body was read in full, so readable means EOF.)"""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    # -- routes ------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path.startswith(KIT_PREFIX) and not self._kit_allowed():
            return
        if self.path.rstrip("/") == "/v1/models":
            models = self.provider.listed_models()
            self._send_json(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "recoverykit"}
                                                             for m in models]})
        elif self.path == "/_kit/held":
            self._send_json(200, [{k: v for k, v in h.__dict__.items() if not k.startswith("_")}
                                  for h in self.provider.held()])
        elif self.path == "/_kit/ledger":
            self._send_json(200, self.provider.records())
        else:
            self._reject(404, f"unknown path {_shown(self.path)}; {_SERVES}", "unknown_url")

    def _not_allowed(self) -> None:
        self._reject(405, f"method {self.command} is not supported on {_shown(self.path)}; {_SERVES}",
                     "method_not_allowed")

    do_PUT = do_DELETE = do_PATCH = _not_allowed

    def do_POST(self) -> None:
        arrived = time.time()  # before the body is read and the sender looked up: a loaded kit logs late
        if self.path.startswith(KIT_PREFIX) and not self._kit_allowed():
            return
        length = self._body_length()
        if length is None:
            return
        if not BODIES.take(length, BODY_WAIT_S):
            self._reject(503, f"too many request bodies in flight (over {BODY_BUDGET} bytes in all); retry",
                         "server_busy")
            return
        try:
            answered = self._post_body(length, arrived)
        finally:
            BODIES.give(length)
        if answered is not None:
            self._serve_plan(*answered)

    def _post_body(self, length: int, arrived: float) -> tuple[Planned, dict[str, Any]] | None:
        """Read, parse and admit a body within its share of ``BODIES``; what ``_serve_plan`` needs of it, or None
        when answered already. The body itself is not kept past here (a held reply would keep it alive)."""
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:  # also invalid UTF-8 (UnicodeDecodeError is a ValueError)
            self._reject(400, f"the request body is not valid JSON ({str(exc)[:200]})", "invalid_json")
            return None
        del raw
        if self.path == "/_kit/release":
            self._release(body)
            return None
        if self.path.rstrip("/") not in COMPLETIONS_PATHS:
            self._reject(404, f"unknown path {_shown(self.path)}; {_SERVES}", "unknown_url")
            return None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._reject(400, "the body must be a JSON object with a 'messages' list", "invalid_request")
            return None
        for name in ("X-Request-Id", "Idempotency-Key"):  # kept whole in the request's record: bounded here
            if len(self.headers.get(name) or "") > MAX_ID:
                self._reject(431, f"the {name} header is over {MAX_ID} characters", "header_too_large")
                return None
        authorization = self.headers.get("Authorization")
        if not hasattr(self, "_sender"):  # once per connection: keep-alive requests share their sender
            self._sender = sender_of(self.client_address, self.server.server_address)
        plan, why, seq, request_id = self.provider.admit(
            body, self.headers.get("X-Request-Id"), self.headers.get("Idempotency-Key"), sender=self._sender,
            authorization=authorization, arrived=arrived, role=self.headers.get(ROLE_HEADER))
        if plan is None:
            self._send_json(400, error_body(why, code="script_mismatch"), request_id)
            self.provider.respond(seq=seq, request_id=request_id, status=400, delivered=True,
                                  chunks_sent=0, usage_billed=None, usage_reported=None, usage_chunks=0,
                                  response_id=None, response_id_sent=False, probe_tokens=[], cut=None)
            return None
        refused = self.provider.refusal(plan, body, authorization)
        if refused is not None:  # a resource the kit took away: answered as OpenAI does, nothing billed
            status, code, message = refused
            self._send_json(status, error_body(message, code=code), request_id)
            self.provider.respond(seq=seq, request_id=request_id, status=status, delivered=True, chunks_sent=0,
                                  usage_billed=None, usage_reported=None, usage_chunks=0, response_id=None,
                                  response_id_sent=False, probe_tokens=[], cut=None, refused=code)
            return None
        return plan, {"stream": body.get("stream"), "stream_options": body.get("stream_options")}

    def _release(self, body: Any) -> None:
        body = {} if body is None else body
        seq, cut = (body.get("seq"), body.get("cut", False)) if isinstance(body, dict) else (None, None)
        if (not isinstance(body, dict) or not (seq is None or (isinstance(seq, int) and not isinstance(seq, bool)))
                or not isinstance(cut, bool)):
            self._reject(400, 'the body must be a JSON object {"seq": N or null, "cut": true or false}',
                         "invalid_request")
            return
        self._send_json(200, {"released": self.provider.release(seq, cut=cut)})

    # -- the scripted reply ------------------------------------------------------------------

    def _serve_plan(self, plan: Planned, body: dict[str, Any]) -> None:
        step, fault = plan.step, plan.step.fault_for(plan.attempt)
        stream = step.stream if step.stream is not None else bool(body.get("stream"))
        calls = tool_calls_of(plan)
        tokens = [json.loads(c["function"]["arguments"])["probe_token"] for c in calls]
        outcome = {"seq": plan.seq, "request_id": plan.request_id, "status": 200, "stream": stream, "delivered": False,
                   "chunks_sent": 0, "usage_style": plan.usage_style, "usage_billed": step.usage.as_openai(),
                   "usage_reported": None, "usage_chunks": 0, "response_id": plan.response_id,
                   "response_id_sent": False, "probe_tokens": tokens, "cut": None,
                   "call_ids": [c["id"] for c in calls], "tool_names": [c["function"]["name"] for c in calls],
                   "read_only_claims": [bool(json.loads(c["function"]["arguments"]).get("read_only")) for c in calls],
                   "script_id": plan.script.id, "text_sent": ""}
        try:
            if fault is not None and fault.kind == "error":
                self._send_json(fault.status, error_body(fault.message, "server_error" if fault.status >= 500
                                                         else "invalid_request_error", "scripted_error"),
                                plan.request_id)
                outcome.update(status=fault.status, delivered=True, usage_billed=None, probe_tokens=[])
            elif stream:
                self._stream(plan, body, calls, fault, outcome)
            else:
                self._whole(plan, calls, fault, outcome)
        except _Cut as cut:
            outcome["cut"] = str(cut)
            self._cut_connection()
        except OSError as exc:  # the client went away mid-reply
            outcome["cut"] = f"client_gone: {type(exc).__name__}"
            self.close_connection = True
        finally:
            self.provider.respond(**outcome)

    def _maybe_fault(self, plan: Planned, fault: Any, at: int) -> None:
        if fault is None or fault.kind == "error" or fault.at_chunk != at:
            return
        if fault.kind == "cut":
            raise _Cut(f"scripted cut at chunk {at}")
        if fault.kind == "stall":
            if not self.provider.stall(plan, at, fault.seconds, self._client_gone):
                raise _Cut(f"client gone or provider closing during a stall at chunk {at}")
            return
        if not self.provider.hold(plan, at, self._client_gone) or fault.then == "cut":
            raise _Cut(f"cut after hold at chunk {at}")

    def _whole(self, plan: Planned, calls: list, fault: Any, outcome: dict) -> None:
        if fault is not None and fault.kind != "error":
            self._maybe_fault(plan, fault.model_copy(update={"at_chunk": 0}), 0)
        message: dict[str, Any] = {"role": "assistant", "content": plan.step.text}
        if calls:
            message["tool_calls"] = calls
        payload = {"id": plan.response_id, "object": "chat.completion", "created": int(time.time()),
                   "model": plan.script.model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                                            "finish_reason": plan.step.finish_reason}]}
        usage = None if plan.usage_style == "none" else plan.step.usage.as_openai()
        if usage is not None:  # a non-streamed reply carries its usage in the body (final and cumulative alike)
            payload["usage"] = usage
        self._send_json(200, payload, plan.request_id)
        outcome.update(delivered=True, chunks_sent=1, usage_reported=usage, usage_chunks=int(usage is not None),
                       response_id_sent=True, text_sent=plan.step.text or "")

    def _stream(self, plan: Planned, body: dict, calls: list, fault: Any, outcome: dict) -> None:
        step = plan.step
        options = body.get("stream_options") or {}
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        style = plan.usage_style
        deltas: list[dict[str, Any]] = []
        if step.text is not None:
            deltas += [{"content": piece} for piece in split_text(step.text, step.chunks)]
        deltas += [{"tool_calls": [{"index": i, **call}]} for i, call in enumerate(calls)]
        deltas[0] = {"role": "assistant", **deltas[0]}
        base = {"id": plan.response_id, "object": "chat.completion.chunk", "created": int(time.time()),
                "model": plan.script.model}
        chunks = []
        for j, delta in enumerate([*deltas, {}], start=1):
            last = j == len(deltas) + 1
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                          "finish_reason": step.finish_reason if last else None}]}
            if style == "cumulative":
                chunk["usage"] = step.usage.fraction(j, len(deltas) + 1).as_openai()
            elif style == "final" and include_usage:
                chunk["usage"] = None  # as OpenAI: the key is there, the usage comes in the last chunk
            chunks.append(chunk)
        if include_usage and style != "none":
            chunks.append({**base, "choices": [], "usage": step.usage.as_openai()})
        self._maybe_fault(plan, fault, 0)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.send_header("X-Request-Id", plan.request_id)
        self.end_headers()
        self.close_connection = True
        for i, chunk in enumerate(chunks):
            if i:
                self._maybe_fault(plan, fault, i)
            self._write_event(json.dumps(chunk))
            outcome.update(chunks_sent=i + 1, response_id_sent=True)
            piece = chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None
            if isinstance(piece, str):
                outcome["text_sent"] += piece
            if chunk.get("usage"):
                outcome["usage_reported"] = chunk["usage"]
                outcome["usage_chunks"] += 1
        if fault is not None and fault.kind != "error" and fault.at_chunk >= len(chunks):
            self._maybe_fault(plan, fault.model_copy(update={"at_chunk": len(chunks)}), len(chunks))
        self._write_event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        outcome["delivered"] = True

    def _write_event(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        self.wfile.flush()
