"""The reference runtime's provider client: request id header, watermark settlement, lost streams."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from recoverykit.impl.provider import ProviderFault, Request, Watermark


def _chunk(body: dict) -> bytes:
    return f"data: {json.dumps(body)}\n\n".encode()


class _Stub(BaseHTTPRequestHandler):
    plan: list[bytes] = []
    seen: list[dict] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"request_id": self.headers.get("X-Request-Id"), "body": body})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in type(self).plan:
            self.wfile.write(piece)
            self.wfile.flush()

    def log_message(self, *args):
        pass


@pytest.fixture
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    _Stub.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _ask(url: str) -> Request:
    req = Request(url, "m", [{"role": "user", "content": "hi"}], [], "req-1.s0.a1", timeout_s=10)
    req.send()
    return req


def test_cumulative_usage_raises_a_watermark_and_is_never_summed(stub):
    _, url = stub
    usage = [{"prompt_tokens": 10, "completion_tokens": c, "total_tokens": 10 + c} for c in (1, 3, 5)]
    _Stub.plan = [_chunk({"choices": [{"delta": {"content": t}}], "usage": u})
                  for t, u in zip("abc", usage, strict=True)]
    _Stub.plan.append(b"data: [DONE]\n\n")
    resp = _ask(url).receive()
    assert resp.content == "abc"
    assert resp.watermark.values == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert resp.watermark.chunks == 3
    (seen,) = _Stub.seen
    assert seen["request_id"] == "req-1.s0.a1"
    assert seen["body"]["stream"] is True and seen["body"]["stream_options"] == {"include_usage": True}


def test_streamed_tool_call_fragments_are_assembled(stub):
    _, url = stub
    _Stub.plan = [
        _chunk({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1", "function": {
            "name": "probe_read", "arguments": '{"a"'}}]}}]}),
        _chunk({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]},
                             "finish_reason": "tool_calls"}]}),
        b"data: [DONE]\n\n"]
    resp = _ask(url).receive()
    assert resp.tool_calls == [{"id": "call_1", "name": "probe_read", "arguments": '{"a": 1}'}]
    assert resp.finish_reason == "tool_calls" and not resp.watermark.seen


def test_a_stream_lost_midway_keeps_a_lower_bound_and_the_partial_text(stub):
    _, url = stub
    _Stub.plan = [_chunk({"choices": [{"delta": {"content": "par"}}],
                          "usage": {"prompt_tokens": 7, "completion_tokens": 2}})]  # and then the connection ends
    with pytest.raises(ProviderFault) as err:
        _ask(url).receive()
    fault = err.value
    assert fault.retryable and not fault.delivered
    assert fault.watermark.seen and fault.watermark.values == {"prompt_tokens": 7, "completion_tokens": 2}
    assert fault.partial_text == "par"


def test_nothing_received_is_unknown_not_zero():
    req = Request("http://127.0.0.1:9/v1", "m", [], [], "req-x")
    with pytest.raises(ProviderFault) as err:
        req.send()
        req.receive()
    assert not err.value.watermark.seen and err.value.watermark.values == {}


def test_watermark_ignores_lower_snapshots():
    wm = Watermark()
    for completion in (4, 9, 6):  # an out-of-order lower snapshot never lowers the mark
        wm.raise_to({"completion_tokens": completion})
    assert wm.values == {"completion_tokens": 9}


def test_ambiguous_duplicate_call_ids_are_an_explicit_error_not_a_guess(stub, tmp_path):
    from recoverykit.impl import recovery
    from recoverykit.impl.engine import Interrupted, provider_step
    from test_impl_recovery import item, make_ctx, submit
    _, url = stub
    call = {"id": "dup", "function": {"name": "probe_read", "arguments": "{}"}}
    _Stub.plan = [_chunk({"choices": [{"delta": {"tool_calls": [dict(call, index=0), dict(call, index=1)]}}],
                          "usage": {"prompt_tokens": 3, "completion_tokens": 1}}), b"data: [DONE]\n\n"]
    ctx = make_ctx(tmp_path, provider_base_url=url)
    work_id = submit(ctx)
    gen = recovery.claim(ctx, work_id)
    turn = recovery.admit(ctx, item(ctx, work_id), gen, recovery=False)
    with pytest.raises(Interrupted):
        provider_step(ctx, item(ctx, work_id), turn, gen)
    got = item(ctx, work_id)
    assert (got["status"], got["reason_code"]) == ("waiting", "retry_exhausted")
    assert "duplicate tool call ids" in got["reason_text"]
    assert ctx.db.conn.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0] == 0  # nothing guessed
    assert ctx.udb.conn.execute("SELECT state FROM receipts").fetchone()[0] == "known"  # it was delivered
