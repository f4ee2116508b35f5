"""The scripted provider under hostile HTTP: JSON errors and a quiet stderr, a token on /_kit/, a bounded close.

Raw sockets send what no HTTP client library would (``Content-Length: abc``, a negative length, a
request line that does not parse, a list where ``/_kit/release`` takes an object); every one must get
a JSON error with the right status and leave nothing on stderr. The kit's own endpoints must refuse
anyone without the provider's per-run token. And a connection a foreign process keeps open (say, a
runtime process that escaped the run) must not make ``close()`` wait forever.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from recoverykit.conformance.provider import ScriptedProvider
from recoverykit.conformance.provider_script import script_tag

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = {"scripts": [{"id": "h", "steps": [{"text": "held reply", "faults": [{"kind": "hold"}]}]},
                      {"id": "plain", "steps": [{"text": "fine"}]}]}


@pytest.fixture
def provider(tmp_path):
    with ScriptedProvider(SCRIPT, tmp_path / "ledger.jsonl") as p:
        yield p


def _exchange(provider: ScriptedProvider, data: bytes, half_close: bool = True) -> tuple[int, dict]:
    """Send raw bytes, read the whole answer (the provider closes every connection), parse it.

    ``half_close=False`` keeps the sending side open, as a runtime waiting on a held answer does: the provider
    takes a client that shut its side for a client gone, and ends a held request for it."""
    with socket.create_connection(("127.0.0.1", provider.port), timeout=30) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode()
    assert status_line.startswith("HTTP/1."), answer[:200]
    assert b"content-type: application/json" in head.lower(), head
    return int(status_line.split()[1]), json.loads(body)


def _post(path: str, body: bytes, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]
    return "\r\n".join(lines).encode() + body


MESSAGES = json.dumps({"messages": [{"role": "user", "content": f"hi {script_tag('plain')}"}]}).encode()


@pytest.mark.parametrize(("data", "status", "code"), [
    (_post("/v1/chat/completions", b"{}", "Content-Length: abc"), 400, "bad_content_length"),
    (_post("/v1/chat/completions", b"{}", "Content-Length: -5"), 400, "bad_content_length"),
    (_post("/v1/chat/completions", b"{}", "Content-Length: 1_0"), 400, "bad_content_length"),
    (_post("/v1/chat/completions", b"{}", "Content-Length: 99999999999999999999999"), 400, "bad_content_length"),
    (_post("/v1/chat/completions", b"2\r\n{}\r\n0\r\n\r\n", "Transfer-Encoding: chunked"), 411, "length_required"),
    (_post("/v1/chat/completions", b"\xff\xfe{", "Content-Length: 3"), 400, "invalid_json"),
    (_post("/v1/chat/completions", b"[1, 2]", "Content-Length: 6"), 400, "invalid_request"),
    (b"GARBAGE / HTTP/1.1 extra\r\n\r\n", 400, "bad_request"),
    (b"GET / HTTP/9.9\r\n\r\n", 505, "http_version_not_supported"),
    (b"BREW /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 501, "not_implemented"),
    (b"GET /v1/models HTTP/1.1\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n", 431, "request_header_fields_too_large"),
])
def test_malformed_http_gets_a_json_400_family_answer_and_no_traceback(provider, capfd, data, status, code):
    got_status, payload = _exchange(provider, data)
    assert (got_status, payload["error"]["code"]) == (status, code), payload
    assert set(payload["error"]) == {"message", "type", "param", "code"} and payload["error"]["message"]
    assert _exchange(provider, _post("/v1/chat/completions", MESSAGES, f"Content-Length: {len(MESSAGES)}"))[0] == 200
    provider.close()  # any handler error would have been printed by now
    captured = capfd.readouterr()
    assert captured.err == "" and "Traceback" not in captured.out


@pytest.mark.parametrize("body", [b"[1, 2]", b'"all"', b"7", b'{"seq": "3"}', b'{"seq": true}', b'{"cut": "yes"}'])
def test_kit_release_refuses_a_body_it_does_not_take(provider, capfd, body):
    data = _post("/_kit/release", body, f"Content-Length: {len(body)}", f"X-Recoverykit-Token: {provider.token}")
    status, payload = _exchange(provider, data)
    assert (status, payload["error"]["code"]) == (400, "invalid_request")
    provider.close()
    assert capfd.readouterr().err == ""


def _get(path: str, *headers: str) -> bytes:
    return "\r\n".join([f"GET {path} HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]).encode()


HELD = json.dumps({"messages": [{"role": "user", "content": script_tag("h")}]}).encode()


@pytest.mark.parametrize("token_header", [None, "X-Recoverykit-Token: ", "X-Recoverykit-Token: wrong"])
def test_kit_endpoints_need_the_run_token(provider, token_header):
    headers = [token_header] if token_header else []
    request = _post("/v1/chat/completions", HELD, f"Content-Length: {len(HELD)}")
    client = threading.Thread(target=_exchange, args=(provider, request, False), daemon=True)
    client.start()
    held = provider.wait_for_held(timeout=30)
    for data in (_get("/_kit/held", *headers), _get("/_kit/ledger", *headers),
                 _post("/_kit/release", b"{}", "Content-Length: 2", *headers), _get("/_kit/nothing", *headers)):
        status, payload = _exchange(provider, data)
        assert (status, payload["error"]["code"]) == (403, "forbidden")
    assert [h.seq for h in provider.held()] == [held.seq]  # nobody without the token released it
    token = f"X-Recoverykit-Token: {provider.token}"
    status, listed = _exchange(provider, _get("/_kit/held", token))
    assert status == 200 and [h["seq"] for h in listed] == [held.seq]
    assert _exchange(provider, _post("/_kit/release", b"{}", "Content-Length: 2", token)) == (200, {"released": 1})
    client.join(timeout=30)
    assert not client.is_alive()


def test_each_provider_has_its_own_token(tmp_path):
    with ScriptedProvider(SCRIPT, tmp_path / "a.jsonl") as a, ScriptedProvider(SCRIPT, tmp_path / "b.jsonl") as b:
        assert a.token != b.token and len(a.token) >= 32
        status, _ = _exchange(a, _get("/_kit/held", f"X-Recoverykit-Token: {b.token}"))
        assert status == 403


def _wait_for(condition, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass


def _close_within(provider: ScriptedProvider, bound: float) -> float:
    began = time.monotonic()
    closer = threading.Thread(target=provider.close, daemon=True)
    closer.start()
    closer.join(timeout=bound)
    assert not closer.is_alive(), f"provider.close() still waiting after {bound} s"
    return time.monotonic() - began


def test_close_is_bounded_while_foreign_clients_hold_connections_open(tmp_path, capfd):
    provider = ScriptedProvider(SCRIPT, tmp_path / "ledger.jsonl")
    foreign = []
    try:
        idle = socket.create_connection(("127.0.0.1", provider.port), timeout=30)  # connects, says nothing
        half = socket.create_connection(("127.0.0.1", provider.port), timeout=30)  # half a body, then silence
        half.sendall(_post("/v1/chat/completions", b'{"messages": [', "Content-Length: 1000"))
        partial = socket.create_connection(("127.0.0.1", provider.port), timeout=30)  # half a request line
        partial.sendall(b"POST /v1/chat/com")
        foreign += [idle, half, partial]
        time.sleep(0.3)  # the server hands each connection to a handler thread, which waits for more bytes
        assert _close_within(provider, bound=30) < 30
        for sock in foreign:  # the provider ended each connection: the foreign end reads to its end
            _drain(sock)
    finally:
        for sock in foreign:
            sock.close()
        provider.close()
    assert capfd.readouterr().err == ""


def test_close_is_bounded_while_a_foreign_client_reads_nothing_of_a_held_stream(tmp_path, capfd):
    script = {"scripts": [{"id": "s", "steps": [{"text": "x" * 8_000_000, "chunks": 800,
                                                 "faults": [{"kind": "hold", "at_chunk": 1}]}]}]}
    provider = ScriptedProvider(script, tmp_path / "ledger.jsonl")
    body = json.dumps({"stream": True, "messages": [{"role": "user", "content": script_tag("s")}]}).encode()
    sock = socket.create_connection(("127.0.0.1", provider.port), timeout=30)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(_post("/v1/chat/completions", body, f"Content-Length: {len(body)}"))
        provider.release(provider.wait_for_held(timeout=30))  # the stream goes on into a reader that never reads
        _wait_for(lambda: any(r["event"] == "released" for r in provider.records()))
        time.sleep(0.5)
        assert not any(r["event"] == "response" for r in provider.records()), "the handler should still be writing"
        assert _close_within(provider, bound=30) < 30
        response = next(r for r in provider.records() if r["event"] == "response")
        assert not response["delivered"] and response["cut"]  # the handler still recorded how it ended
    finally:
        sock.close()
        provider.close()
    assert capfd.readouterr().err == ""


def test_env_provider_prints_its_token_and_stays_quiet_on_bad_requests(tmp_path):
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", "env", "provider", "--script",
                             str(tmp_path / "script.json"), "--ledger", str(tmp_path / "ledger.jsonl")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        info = json.loads(proc.stdout.readline())
        port = int(info["base_url"].rsplit(":", 1)[1].split("/")[0])
        target = type("Target", (), {"port": port})()
        assert _exchange(target, _post("/v1/chat/completions", b"{}", "Content-Length: abc"))[0] == 400
        assert _exchange(target, _get("/_kit/ledger"))[0] == 403
        status, ledger = _exchange(target, _get("/_kit/ledger", f"X-Recoverykit-Token: {info['token']}"))
        assert status == 200 and [r["event"] for r in ledger] == ["rejected", "rejected"]
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err == b"", err.decode(errors="replace")
