"""Bundles keep to the run: links stay links, nothing from outside is read, every file private, logs bounded.

Issue 11, defects 10, 15c, 15d. ``tests/adapters/planting_proxy.py`` wraps the reference runtime and
declares no usage section (so the case is unknown and certify writes its bundle); it plants a symlink
loop and a link to a directory outside the run in the runtime's data dir, or writes 50 MiB to stderr.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from env_helpers import marked_by
from recoverykit.chaos import bundle as chaos_bundle
from recoverykit.conformance.client import AdapterClient
from recoverykit.conformance.stderr_log import HEAD_BYTES, TAIL_BYTES

PROXY = Path(__file__).resolve().parent / "adapters" / "planting_proxy.py"
SECRET = "a foreign 0600 file that no bundle may copy"
BOUND_S = 180
LOG_LIMIT = HEAD_BYTES + TAIL_BYTES + 300  # head, tail and the marker line


def certify(out: Path, *proxy_args: str) -> subprocess.CompletedProcess:
    adapter = f"{sys.executable} {PROXY} {' '.join(proxy_args)}"
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", "certify", "--adapter", adapter, "--only",
                             "chat_read_tool", "--seed", "1", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert marked_by(proc.pid) == [], "a process of the run outlived it"
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "outside"
    folder.mkdir()
    secret = folder / "secret.txt"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    (folder / "big.bin").write_bytes(os.urandom(1 << 20))
    return folder


def assert_private(tree: Path) -> None:
    assert stat.S_IMODE(tree.stat().st_mode) == 0o700, tree
    for root, dirs, files in os.walk(tree):
        for name in dirs + files:
            path = Path(root, name)
            if path.is_symlink():
                continue
            want = 0o700 if path.is_dir() else 0o600
            assert stat.S_IMODE(path.lstat().st_mode) == want, path


def assert_links_kept(data: Path, outside: Path) -> None:
    assert (data / "loop").is_symlink() and (data / "outside").is_symlink()
    assert Path(os.readlink(data / "outside")) == outside
    for root, _dirs, files in os.walk(data.parent):  # os.walk does not follow links: what was really copied
        for name in files:
            path = Path(root, name)
            assert path.is_symlink() or SECRET.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_a_certify_bundle_copies_links_as_links_and_is_private(tmp_path, outside):
    out = tmp_path / "out"
    done = certify(out, "--plant", str(outside))
    assert done.returncode == 2, done.stderr[-3000:]  # unknown: the proxy hides the usage section
    bundle = out / "bundles" / "chat_read_tool"
    assert (bundle / "bundle.json").exists() and (bundle / "data" / "runtime.db").exists()
    assert_links_kept(bundle / "data", outside)
    assert sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file() and not p.is_symlink()) < 50 << 20
    assert_private(out / "bundles")
    for name in ("results.json", "junit.xml"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name


@pytest.mark.slow
def test_a_flood_on_stderr_is_kept_bounded_in_the_run_and_its_bundle(tmp_path):
    out = tmp_path / "out"
    done = certify(out, "--stderr-mb", "50")
    assert done.returncode == 2, done.stderr[-3000:]
    for log in (out / "runs" / "chat_read_tool" / "adapter.stderr.log",
                out / "bundles" / "chat_read_tool" / "adapter.stderr.log"):
        text = log.read_bytes()
        assert len(text) <= LOG_LIMIT, (log, len(text))
        assert b"bytes of adapter stderr dropped here" in text
        assert text.startswith(b"x" * 1023 + b"\n") and b"LAST-LINE-OF-THE-FLOOD\n" in text[-TAIL_BYTES:]


def test_a_chaos_bundle_copies_links_as_links_and_is_private(tmp_path, outside):
    run_dir = tmp_path / "run"
    data = run_dir / "data"
    data.mkdir(parents=True)
    (data / "state.db").write_bytes(b"state")
    os.symlink(data, data / "loop")
    os.symlink(outside, data / "outside")
    os.mkfifo(data / "pipe")  # opening a FIFO to copy it would block forever
    (run_dir / "history.jsonl").write_text("")
    case = SimpleNamespace(id="chat_unknown_write/tool.running/1/tree_kill", as_dict=lambda: {})
    env = SimpleNamespace(run_dir=run_dir, marker="recoverykit-1-2-abc", init_ok=None)
    target = chaos_bundle.write(tmp_path / "bundles", case, {"verdict": "invalid", "replay": "x"}, env, "adapter", 0)
    assert (target / "data" / "state.db").read_bytes() == b"state"
    assert not (target / "data" / "pipe").exists()
    assert_links_kept(target / "data", outside)
    assert_private(tmp_path / "bundles")


def test_the_stderr_log_keeps_head_and_tail_exactly(tmp_path):
    """The client's stderr pump: the first bytes verbatim, a marker with the count dropped, the last bytes."""
    total = HEAD_BYTES + TAIL_BYTES + 3_000_001
    code = ("import sys\n"
            f"data = bytes(i % 251 for i in range({total}))\n"
            "sys.stderr.buffer.write(data); sys.stderr.flush()\n"
            "sys.stdin.read()\n")
    client = AdapterClient([sys.executable, "-c", code], tmp_path, timeout_s=1, slow_timeout_s=1, grace_s=0.5)
    client.start()
    try:
        log = tmp_path / "adapter.stderr.log"
        for _ in range(600):  # the head is written as it comes
            if log.stat().st_size >= HEAD_BYTES:
                break
            time.sleep(0.05)
    finally:
        client.close()
    data = bytes(i % 251 for i in range(total))
    text = log.read_bytes()
    head, rest = text[:HEAD_BYTES], text[HEAD_BYTES:]
    assert head == data[:HEAD_BYTES]
    marker, tail = rest.split(b"]\n", 1)
    assert f"{total - HEAD_BYTES - TAIL_BYTES} bytes of adapter stderr dropped".encode() in marker
    assert tail == data[-TAIL_BYTES:]


def test_a_short_stderr_log_is_kept_whole(tmp_path):
    client = AdapterClient([sys.executable, "-c", "import sys; sys.stderr.write('hello\\n'); sys.stdin.read()"],
                           tmp_path, timeout_s=1, slow_timeout_s=1, grace_s=0.5)
    client.start()
    client.close()
    assert (tmp_path / "adapter.stderr.log").read_bytes() == b"hello\n"
