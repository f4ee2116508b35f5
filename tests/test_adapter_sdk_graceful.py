"""A graceful restart through the SDK is graceful: ``Supervisor.stop(tools=True)`` gives the supervised worker
its SIGTERM and grace period before strays are swept (the adapter is a child subreaper, so its descendants
include the worker; sweeping them first was a SIGKILL of the worker under every graceful kind)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ADAPTER = Path(__file__).resolve().parent / "adapters" / "sdk_graceful_adapter.py"
GRACEFUL = ("stop", "normal_exit", "stop_all_exit")


class Wire:
    def __init__(self, tmp_path: Path) -> None:
        self.err = (tmp_path / "adapter.err").open("w")
        self.proc = subprocess.Popen([sys.executable, str(ADAPTER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True)
        self.n = 0

    def ask(self, rpc: str, **fields) -> dict:
        self.n += 1
        self.proc.stdin.write(json.dumps({"type": rpc, "msg_id": self.n, **fields}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        assert reply["in_reply_to"] == self.n and reply["type"] == f"{rpc}_ok", reply
        return reply

    def worker(self) -> int:
        return next(p["pid"] for p in self.ask("processes")["processes"] if p["role"] == "worker")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers are a Linux feature")
@pytest.mark.parametrize("kind", GRACEFUL)
def test_a_worker_with_a_sigterm_handler_exits_0_under_every_graceful_kind(tmp_path, kind):
    data = tmp_path / "data"
    data.mkdir()
    wire = Wire(tmp_path)
    tools: list[int] = []
    try:
        wire.ask("init", protocol_version="1.2", data_dir=str(data), provider_base_url="http://127.0.0.1:9/v1",
                 probe_tools=[], failpoint_socket=str(tmp_path / "fp.sock"), run_marker="rk-graceful-test")
        wire.ask("start")
        pid = wire.worker()
        tools.append(int((data / f"tool-{pid}").read_text()))
        if kind == "stop":
            wire.ask("stop")
        else:
            wire.ask("restart", kind=kind)
            tools.append(int((data / f"tool-{wire.worker()}").read_text()))
        assert (data / f"term-{pid}").read_text() == "saved", "the worker never ran its SIGTERM handler"
        assert not psutil.pid_exists(tools[0]) or psutil.Process(tools[0]).status() == psutil.STATUS_ZOMBIE
        wire.ask("shutdown")
        assert wire.proc.wait(30) == 0
    finally:
        if wire.proc.poll() is None:
            wire.proc.kill()
            wire.proc.wait()
        wire.err.close()
        workers = [int(f.name.split("-", 1)[1]) for f in data.glob("tool-*")]  # the file names carry the workers
        for left in [*workers, *tools]:  # nothing of the test left behind, even when an assertion failed
            try:
                proc = psutil.Process(left)
                if str(ADAPTER) in " ".join(proc.cmdline()) or left in tools:
                    proc.kill()
            except psutil.Error:
                pass
    err = (tmp_path / "adapter.err").read_text()
    assert f"worker {pid} exited with status 0" in err, err
    assert "Traceback" not in err, err
    assert not [t for t in tools if psutil.pid_exists(t) and psutil.Process(t).status() != psutil.STATUS_ZOMBIE]
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(data) in " ".join(p.info["cmdline"] or [])
                or (str(ADAPTER) in " ".join(p.info["cmdline"] or []) and p.pid in workers)]
