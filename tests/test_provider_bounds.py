"""The scripted provider under hostile load keeps its ledger and the kit's memory bounded (issue 27 item 14).

Measured before the fix: 3,000 requests with a 60 KiB path, each answered 404, made a 360 MB ledger (the path
twice per record, each record fsynced) and took the kit to 420 MB RSS; 8 concurrent 16 MiB bodies took it to
378 MB, linear in connections. The bounds asserted here are generous (a few times what the fix gives), never
timings: what they prove is that growth no longer follows the load.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading

import psutil
import pytest
from recoverykit.conformance.checker import COMPLETION, Evidence, check
from recoverykit.conformance.history import History
from recoverykit.conformance.provider import ScriptedProvider
from recoverykit.conformance.provider_ledger import Ledger, read_ledger
from recoverykit.model.catalogue import Verdict

SCRIPT = {"scripts": [{"id": "plain", "steps": [{"text": "fine"}]}]}
MiB = 1 << 20


def _status(port: int, *parts: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        with contextlib.suppress(OSError):  # refused before the whole body was sent: the answer is there to read
            for part in parts:  # sent piece by piece: the client side holds one copy of a large body, shared
                sock.sendall(part)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                answer += chunk
    return int(answer.split(b"\r\n", 1)[0].split()[1])


class Peak:
    """This process's peak RSS while the block runs, sampled (psutil)."""

    def __enter__(self) -> Peak:
        self.me, self.base, self.peak, self._stop = psutil.Process(), 0, 0, threading.Event()
        self.base = self.peak = self.me.memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.me.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.me.memory_info().rss)

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.base) / 1e6


def test_a_flood_of_long_unknown_paths_keeps_the_ledger_and_memory_bounded(tmp_path):
    path = "/" + "a" * (60 * 1024)
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    with ScriptedProvider(SCRIPT, tmp_path / "ledger.jsonl") as provider, Peak() as peak:
        statuses = {_status(provider.port, request) for _ in range(3000)}
    size = (tmp_path / "ledger.jsonl").stat().st_size
    assert statuses == {414}  # the path is over the limit: refused before anything else
    assert size < 4 * MiB, f"ledger {size / MiB:.1f} MiB (old code: about 360 MB for 3,000 such requests)"
    records = read_ledger(tmp_path / "ledger.jsonl")
    rejected = [r for r in records if r["event"] == "rejected"]
    assert rejected and all(len(r["path"]) <= 200 and r["path_bytes"] > 60 * 1024 for r in rejected)
    assert all(path[1:200] not in r["reason"] for r in rejected)  # the path once per record, cut
    assert [r["what"] for r in records if r["event"] == "truncated"] == ["unrecognised requests"]
    assert peak.growth_mb < 120, f"the kit grew by {peak.growth_mb:.0f} MB"


def test_a_path_under_the_limit_is_still_answered_404_with_a_cut_record(tmp_path):
    path = "/" + "b" * 5000
    with ScriptedProvider(SCRIPT, tmp_path / "ledger.jsonl") as provider:
        assert _status(provider.port, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()) == 404
    (record,) = [r for r in read_ledger(tmp_path / "ledger.jsonl") if r["event"] == "rejected"]
    assert record["path"] == path[:200] and record["path_bytes"] == 5001 and len(record["path_sha256"]) == 64
    assert len(json.dumps(record)) < 1500


def test_concurrent_large_bodies_do_not_grow_memory_with_connections(tmp_path):
    size = 16 * MiB
    body = b'{"messages": [{"role": "user", "content": "' + b"x" * (size - 64) + b'"}]}'
    body += b" " * (size - len(body))
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    results: list[int] = []
    with ScriptedProvider(SCRIPT, tmp_path / "ledger.jsonl") as provider, Peak() as peak:
        threads = [threading.Thread(target=lambda: results.append(_status(provider.port, head, body)))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
    assert len(results) == 8 and all(s in (200, 400, 503) for s in results), results
    # old code: 493 MB here (8 x 16 MiB read and parsed at once); now 138 MB: at most BODY_BUDGET in flight
    assert peak.growth_mb < 250, f"the kit grew by {peak.growth_mb:.0f} MB for 8 concurrent 16 MiB bodies"


def test_evidence_past_the_ledger_cap_is_marked_and_no_verdict_rests_on_it(tmp_path):
    from recoverykit.conformance.provider_ledger import evidence_truncated  # new with the cap

    ledger = Ledger(tmp_path / "ledger.jsonl", max_bytes=2000)
    for seq in range(1, 40):
        ledger.append("request", seq=seq, request_id=f"r{seq}", script_id="plain", step=0)
    ledger.close()
    records = read_ledger(tmp_path / "ledger.jsonl")
    assert evidence_truncated(records) and ledger.dropped["evidence"] > 0
    assert sum(r["event"] == "truncated" for r in records) == 1  # one marker, then nothing
    assert (tmp_path / "ledger.jsonl").stat().st_size < 2500
    results = check(Evidence(History(), records))
    assert results and all(r.verdict is Verdict.UNKNOWN for r in results)
    assert any(r.clause_id == COMPLETION and "truncated" in r.text for r in results)


@pytest.mark.parametrize("header", ["X-Request-Id", "Idempotency-Key"])
def test_an_oversized_id_header_is_refused_not_recorded(tmp_path, header):
    body = b'{"messages": [{"role": "user", "content": "hi"}]}'
    data = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n{header}: {'i' * 50000}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with ScriptedProvider(SCRIPT, tmp_path / "ledger.jsonl") as provider:
        assert _status(provider.port, data) == 431
    assert (tmp_path / "ledger.jsonl").stat().st_size < 4000
