"""A streaming OpenAI-compatible chat client on http.client, with usage settled by watermark.

Plain http.client rather than the ``openai`` package: the runtime must decide every attempt itself
(no hidden library retries that would be extra provider attempts without a receipt), send its own
``X-Request-Id``, and see each streamed chunk's cumulative usage. Cumulative usage only ever raises
the attempt's watermark; snapshots are never summed. A stream that breaks after some usage chunks
leaves a lower bound (partial); one that breaks before any leaves usage unknown, never zero.
"""

from __future__ import annotations

import contextlib
import http.client
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass
class Watermark:
    """The highest cumulative usage seen for one attempt."""

    values: dict[str, int] = field(default_factory=dict)
    chunks: int = 0

    def raise_to(self, usage: dict[str, Any] | None) -> None:
        if not usage:
            return
        self.chunks += 1
        for key in USAGE_FIELDS:
            value = usage.get(key)
            if isinstance(value, int):
                self.values[key] = max(self.values.get(key, 0), value)

    @property
    def seen(self) -> bool:
        return self.chunks > 0


@dataclass
class Response:
    content: str
    tool_calls: list[dict[str, str]]  # [{"id", "name", "arguments"}]
    finish_reason: str | None
    watermark: Watermark


class ProviderFault(Exception):
    """The attempt failed. ``delivered`` says whether a response (an HTTP status) came back at all."""

    def __init__(self, text: str, *, retryable: bool, delivered: bool, watermark: Watermark, status: int = 0,
                 partial_text: str = ""):
        super().__init__(text)
        self.retryable, self.delivered, self.watermark, self.status = retryable, delivered, watermark, status
        self.partial_text = partial_text  # streamed text received before the loss, kept for the record


class Request:
    """One attempt: ``send`` puts the request on the wire, ``receive`` consumes the stream.

    Split so the runtime can mark ``provider.request.after`` between the two.
    """

    def __init__(self, base_url: str, model: str, messages: list[dict], tools: list[dict], request_id: str,
                 timeout_s: float = 300.0, api_key: str | None = None):
        parts = urlsplit(base_url.rstrip("/"))
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = (parts.path or "") + "/chat/completions"
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": True,
                                "stream_options": {"include_usage": True}}
        if tools:
            body["tools"] = tools
        self.body = json.dumps(body).encode()
        self.headers = {"Content-Type": "application/json", "X-Request-Id": request_id,
                        "Accept": "text/event-stream", "Authorization": f"Bearer {api_key or 'recoverykit'}"}
        self.timeout_s = timeout_s
        self.watermark = Watermark()
        self.partial: list[str] = []
        self.conn: http.client.HTTPConnection | None = None

    def send(self) -> None:
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        try:
            self.conn.request("POST", self.path, body=self.body, headers=self.headers)
        except OSError as exc:
            self.close()
            # Not even connected or not fully sent: the provider may still have seen it, so unknown.
            raise ProviderFault(f"sending the request failed: {exc}", retryable=True, delivered=False,
                                watermark=self.watermark) from exc

    def receive(self) -> Response:
        assert self.conn is not None
        try:
            resp = self.conn.getresponse()
            if resp.status != 200:
                text = resp.read().decode("utf-8", "replace")[:500]
                with contextlib.suppress(ValueError, AttributeError):
                    self.watermark.raise_to(json.loads(text).get("usage"))
                raise ProviderFault(f"provider answered HTTP {resp.status}: {text}",
                                    retryable=resp.status in (408, 409, 429) or resp.status >= 500,
                                    delivered=True, watermark=self.watermark, status=resp.status)
            if "text/event-stream" not in (resp.getheader("Content-Type") or ""):
                return self._whole(json.loads(resp.read()))
            return self._stream(resp)
        except ProviderFault:
            raise
        except (TimeoutError, OSError, http.client.HTTPException, ValueError) as exc:
            raise ProviderFault(f"the response was lost: {exc!r}", retryable=True, delivered=False,
                                watermark=self.watermark, partial_text="".join(self.partial)) from exc
        finally:
            self.close()

    def _whole(self, body: dict) -> Response:
        self.watermark.raise_to(body.get("usage"))
        choice = (body.get("choices") or [{}])[0]
        msg = choice.get("message") or {}
        calls = [{"id": c.get("id", ""), "name": c["function"]["name"], "arguments": c["function"].get("arguments", "")}
                 for c in msg.get("tool_calls") or []]
        return Response(msg.get("content") or "", calls, choice.get("finish_reason"), self.watermark)

    def _stream(self, resp: http.client.HTTPResponse) -> Response:
        content = self.partial
        calls: dict[int, dict[str, str]] = {}
        finish: str | None = None
        done = False
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            self.watermark.raise_to(chunk.get("usage"))
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    content.append(delta["content"])
                for tc in delta.get("tool_calls") or []:
                    slot = calls.setdefault(tc.get("index", 0), {"id": "", "name": "", "arguments": ""})
                    slot["id"] = tc.get("id") or slot["id"]
                    fn = tc.get("function") or {}
                    slot["name"] = fn.get("name") or slot["name"]
                    slot["arguments"] += fn.get("arguments") or ""
                finish = choice.get("finish_reason") or finish
        if not done:
            raise ProviderFault("the stream ended before [DONE]", retryable=True, delivered=False,
                                watermark=self.watermark, partial_text="".join(content))
        return Response("".join(content), [calls[i] for i in sorted(calls)], finish, self.watermark)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
