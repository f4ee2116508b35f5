"""A reused or shared ``--out``: every run in a fresh layout, one run at a time, nothing left outside it.

Issue 11, defects 4, 15a, 15b: certify twice into one --out gave a false invalid (a short path) or
exit 70 (a long one, FileExistsError on the data-dir link); two runs at once both failed; every run
with a long --out left ~15 ``rkd-*`` data dirs in the temp dir, and ``.hypothesis/`` in the working
directory. Each test runs the real CLI against the reference runtime with ``--only`` (a few cases),
asserts the exit code, no traceback, a generous bound, and that no process of the run is left.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from env_helpers import marked_by

pytestmark = pytest.mark.slow

QUICK = ("--only", "chat_read_tool", "--only", "lockstep", "--examples", "1", "--seed", "1", "--json")
BOUND_S = 240  # "no hang", never a timing claim
CHAOS_CASE = "chat_unknown_write/tool.result.commit.before/1/tree_kill"


def kit(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``recoverykit ARGS``; no process it marked may outlive it."""
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert marked_by(proc.pid) == [], "a process of the run outlived it"
    assert "Traceback" not in err, err[-3000:]
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def case_verdicts(done: subprocess.CompletedProcess) -> dict[str, str]:
    return {c["name"]: c["verdict"] for c in json.loads(done.stdout)["cases"]}


@pytest.fixture(scope="module")
def long_out_twice(tmp_path_factory):
    """certify twice into one long absolute --out, with a private TMPDIR and working directory."""
    base = tmp_path_factory.mktemp("reused")
    out = base / ("a-long-results-directory-name-" * 2) / "out"
    tmp, cwd = base / "tmp", base / "cwd"
    tmp.mkdir()
    cwd.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    first = kit("certify", *QUICK, "--out", str(out), env=env, cwd=cwd)
    second = kit("certify", *QUICK, "--out", str(out), env=env, cwd=cwd)
    return out, tmp, cwd, first, second


def test_a_second_run_into_a_long_out_gives_the_same_verdicts(long_out_twice):
    _, _, _, first, second = long_out_twice
    assert first.returncode == 2, first.stderr[-3000:]  # --only leaves required clauses unjudged: unknown
    assert second.returncode == first.returncode, second.stderr[-3000:]
    assert case_verdicts(first) == case_verdicts(second) == {"chat_read_tool": "valid", "lockstep": "valid"}


def test_the_earlier_run_moves_whole_to_previous(long_out_twice):
    out = long_out_twice[0]
    moved = out / "previous" / "001"
    earlier = json.loads((moved / "results.json").read_text())
    assert earlier["seed"] == 1 and (moved / "junit.xml").exists()
    run_dirs = [Path(d) for c in earlier["cases"] for d in c["run_dirs"]]
    assert run_dirs and all(d.is_relative_to(moved / "runs") and d.is_dir() for d in run_dirs)
    latest = json.loads((out / "results.json").read_text())
    assert all(Path(d).is_relative_to(out / "runs") for c in latest["cases"] for d in c["run_dirs"])
    assert (out / "hypothesis-db").is_dir() and not (moved / "hypothesis-db").exists()  # stays for replays
    assert not (out / "runs" / "chat_read_tool-2").exists()  # fresh: no suffix was needed


def test_no_data_dir_is_left_in_the_temp_dir(long_out_twice):
    out, tmp, _, _, _ = long_out_twice
    assert sorted(p.name for p in tmp.glob("rkd-*")) == []
    data = out / "runs" / "chat_read_tool" / "data"
    assert data.is_dir() and not data.is_symlink() and (data / "runtime.db").exists()  # brought home


def test_no_hypothesis_dir_in_the_working_directory(long_out_twice):
    out, _, cwd, _, _ = long_out_twice
    assert list(cwd.iterdir()) == []
    assert (out / "hypothesis-db").is_dir()


def test_results_are_private(long_out_twice):
    out = long_out_twice[0]
    for name in ("results.json", "junit.xml"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name
    for folder in (out, out / "runs", out / "hypothesis-db", out / "previous", out / "previous" / "001"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


@pytest.fixture
def short_out():
    """An --out short enough that no data dir needs a link to the temp dir (the reused-data-dir path)."""
    folder = Path(tempfile.mkdtemp(prefix="rko-", dir="/tmp" if os.path.isdir("/tmp") else None))
    yield folder / "o"
    shutil.rmtree(folder, ignore_errors=True)


def test_a_short_out_reused_gives_no_false_invalid(short_out):
    args = ("certify", "--only", "lockstep", "--examples", "1", "--seed", "2", "--json", "--out", str(short_out))
    first = kit(*args)
    second = kit(*args)
    assert first.returncode == second.returncode == 2, second.stderr[-3000:]
    assert case_verdicts(second) == {"lockstep": "valid"}, json.loads(second.stdout)["cases"][0]["message"]


@contextlib.contextmanager
def held_lock(out: Path):
    """Hold --out's lock the way a running certify or chaos does."""
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / ".recoverykit.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.pwrite(fd, b"4242\n", 0)
        yield
    finally:
        os.close(fd)


@pytest.mark.parametrize("command", [
    ("certify", "--only", "chat_read_tool"),
    ("chaos", "--replay", CHAOS_CASE, "--quiet"),
])
def test_a_run_into_an_out_in_use_is_refused_with_64(tmp_path, command):
    out = tmp_path / "out"
    with held_lock(out):
        began = time.monotonic()
        done = kit(*command, "--out", str(out))
        assert time.monotonic() - began < 60  # refused at once, not after a run
    assert done.returncode == 64, done.stderr[-3000:]
    assert "in use by another recoverykit run (pid 4242)" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [".recoverykit.lock"]  # nothing written, nothing moved


def _locked(out: Path) -> bool:
    try:
        fd = os.open(out / ".recoverykit.lock", os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_two_concurrent_certify_runs_one_is_refused_the_other_valid(tmp_path):
    out = tmp_path / "out"
    args = [sys.executable, "-m", "recoverykit", "certify", "--only", "lockstep", "--examples", "2", "--seed", "3",
            "--json", "--out", str(out)]
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _locked(out) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _locked(out), "the first run never held its --out"
        second = kit("certify", "--only", "chat_read_tool", "--out", str(out))
        stdout, stderr = first.communicate(timeout=BOUND_S)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert second.returncode == 64 and "in use by another recoverykit run" in second.stderr, second.stderr
    assert first.returncode == 2 and "Traceback" not in stderr, stderr[-3000:]
    assert {c["name"]: c["verdict"] for c in json.loads(stdout)["cases"]} == {"lockstep": "valid"}
    assert marked_by(first.pid) == []


def test_chaos_into_a_reused_out_moves_the_earlier_run(tmp_path):
    out = tmp_path / "out"
    for _ in range(2):
        done = kit("chaos", "--replay", CHAOS_CASE, "--quiet", "--out", str(out))
        assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "previous" / "001" / "results.json").exists() and (out / "results.json").exists()
    for name in ("results.json", "report.json", "report.md", "report.html", "junit.xml", "results.db"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name
