"""The kit kills only processes of its run, and a kill that killed nothing proves nothing.

Adversarial adapters: ``tests/adapters/procs_proxy.py`` wraps the reference runtime and lies in its
``processes`` replies (nothing at all, pid 1, the kit's own pid, a stranger's pid), hangs on ``start``,
or leaves a double-forked child that dropped the run marker. Every test asserts the exit code, no
traceback, a bound that proves "no hang", and that nothing of the run is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from bundle_agreement import bundles_under, disagreements
from env_helpers import cli_in_process, marked_by
from recoverykit.conformance import proc_guard
from recoverykit.conformance.errors import RefusedProcess
from recoverykit.conformance.reaper import ENV_RUN_MARKER, new_marker

PROXY = Path(__file__).resolve().parent / "adapters" / "procs_proxy.py"
BOUND_S = 150  # generous: proves "no hang", not speed
# one kit-side kill per case and one adapter restart (frontend_reload) whose clause results keep the run judged
KILL_CELLS = ("--scenarios", "chat_unknown_write", "--points", "tool.result.commit.before",
              "--kinds", "tree_kill,worker_kill,frontend_reload")


def adapter(*mode: str) -> str:
    return " ".join([sys.executable, str(PROXY), *mode])


def recoverykit(*args: str, timeout: float = BOUND_S) -> tuple[int, str, str, int, float]:
    """Run the CLI; (exit code, stdout, stderr, pid, seconds). A hang fails the test and is cleaned up."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # a kit that SIGSTOPped itself needs SIGKILL
        out, err = proc.communicate()
        for p in marked_by(proc.pid):
            with contextlib.suppress(psutil.Error):
                p.kill()
        pytest.fail(f"recoverykit {' '.join(args[:3])} ... hung past {timeout} s: {err[-2000:]}")
    return proc.returncode, out, err, proc.pid, time.monotonic() - t0


def assert_clean(rc_pid: int, out: str, err: str) -> None:
    assert "Traceback" not in out + err, err[-3000:]
    assert marked_by(rc_pid) == [], "processes of the run outlived it"


@pytest.fixture
def stranger():
    """A sleeping process that belongs to nobody's run: the kit must never touch it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def _cases(out: str) -> dict[str, dict]:
    return {c["kind"]: c for c in json.loads(out)["cases"]}


# --- chaos -----------------------------------------------------------------------------------------------


def test_a_chaos_kill_that_killed_nothing_is_unknown_and_covers_nothing(tmp_path):
    rc, out, err, pid, seconds = recoverykit("chaos", *KILL_CELLS, "--json", "--quiet", "--out", str(tmp_path / "o"),
                                             "--adapter", adapter("empty"))
    assert rc == 2, err[-3000:]
    cases = _cases(out)
    for kind in ("tree_kill", "worker_kill"):
        assert cases[kind]["status"] == "error" and "killed nothing" in cases[kind]["why"], cases[kind]
        assert not cases[kind].get("killed")
    cells = {c["kind"]: c for c in json.loads(out)["coverage"]["cells"] if c["point"] == "tool.result.commit.before"}
    assert cells["tree_kill"]["status"] != "exercised" and cells["worker_kill"]["status"] != "exercised"
    assert seconds < BOUND_S
    assert_clean(pid, out, err)


@pytest.mark.parametrize("mode", ["pid1", "kit", "foreign"])
def test_chaos_refuses_to_kill_a_pid_outside_the_run(tmp_path, stranger, mode):
    args = ("foreign", str(stranger.pid)) if mode == "foreign" else (mode,)
    rc, out, err, pid, seconds = recoverykit("chaos", *KILL_CELLS, "--json", "--quiet", "--out", str(tmp_path / "o"),
                                             "--adapter", adapter(*args))
    assert rc == 1, err[-3000:]
    refused = [c for c in json.loads(out)["cases"] if c.get("refused")]
    assert refused, "no case was refused"
    named = {"pid1": "pid 1", "kit": "pid ", "foreign": f"pid {stranger.pid}"}[mode]
    for case in refused:
        assert case["status"] == "failed" and case["verdict"] == "invalid"
        assert named in case["why"] and "refused" in case["why"]
    cells = {c["kind"]: c for c in json.loads(out)["coverage"]["cells"] if c["point"] == "tool.result.commit.before"}
    assert cells["tree_kill"]["status"] != "exercised"
    assert bundles_under(tmp_path / "o") and disagreements(tmp_path / "o") == []  # the refusal is in each history
    assert stranger.poll() is None, "the kit killed a process outside its run"
    assert psutil.Process(stranger.pid).status() != psutil.STATUS_STOPPED
    assert seconds < BOUND_S
    assert_clean(pid, out, err)


def test_chaos_with_a_missing_adapter_program_is_a_usage_error(tmp_path):
    rc, out, err, pid, _ = recoverykit("chaos", "--replay", "chat_unknown_write/input.accept.after/1/tree_kill",
                                       "--out", str(tmp_path / "o"), "--adapter", "/nonexistent/adapter")
    assert rc == 64, err
    assert "not found" in err
    assert_clean(pid, out, err)


def test_a_double_forked_child_without_the_marker_is_killed_and_reported(tmp_path):
    tag = f"rk-stray-{os.getpid()}-{time.monotonic_ns()}"
    rc, out, err, pid, seconds = recoverykit("chaos", "--scenarios", "chat_unknown_write", "--points",
                                             "tool.result.commit.before", "--kinds", "tree_kill", "--json", "--quiet",
                                             "--out", str(tmp_path / "o"), "--adapter", adapter("unmarked_child", tag))
    left = [p for p in psutil.process_iter(["cmdline"]) if tag in (p.info["cmdline"] or [])]
    for p in left:
        with contextlib.suppress(psutil.Error):
            p.kill()
    assert not left, "a child that dropped the run marker outlived the run"
    (case,) = json.loads(out)["cases"]
    assert case["strays"] and "dropped the run marker" in " ".join(case["violations"])
    assert rc == 2, err[-3000:]  # the case is not a pass
    assert seconds < BOUND_S
    assert_clean(pid, out, err)


# --- certify -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["kit", "foreign"])
def test_certify_never_stops_itself_nor_kills_a_stranger(tmp_path, stranger, mode):
    args = ("foreign", str(stranger.pid)) if mode == "foreign" else (mode,)
    rc, out, err, pid, seconds = recoverykit("certify", "--only", "chat_unknown_write", "--out", str(tmp_path / "o"),
                                             "--adapter", adapter(*args))
    assert rc in (1, 2), err[-3000:]  # never valid; invalid once protocol breaks in scenarios count (issue 11.1)
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert results["verdict"] != "valid"
    (case,) = results["cases"]
    assert "refused to kill pid" in case["message"]
    # the refusal is in the bundle's history, so a re-check judges it as certify did (issue 27 item 6: check said
    # valid, exit 0, while bundle.json said invalid)
    assert bundles_under(tmp_path / "o"), "no bundle was written"
    assert disagreements(tmp_path / "o") == []
    code, text = cli_in_process("check", str(tmp_path / "o" / "bundles" / "chat_unknown_write"))
    assert code == 1 and "kill_refused" in text and "refused to kill pid" in text, text
    assert stranger.poll() is None
    assert seconds < BOUND_S
    assert_clean(pid, out, err)


def test_certify_with_an_adapter_that_lists_no_process_is_unknown_not_a_runtime_break(tmp_path):
    """Issue 27 item 17: certify blamed OWN-03 ("a silent cross-host takeover"), RI-06 and REC-02 on a runtime whose
    adapter lists no process, though its kills killed nothing; chaos names the cause. Now each such case ends
    unknown with that reason, and its bundle re-checks unknown (the history holds a ``nothing_killed`` fault)."""
    out = tmp_path / "o"
    rc, stdout, err, pid, seconds = recoverykit("certify", "--seed", "1", "--only", "host_change", "--only",
                                                "stop_before_resource", "--only", "recovery_disabled", "--out",
                                                str(out), "--adapter", adapter("empty"))
    assert rc == 2, err[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert {c["name"]: c["verdict"] for c in results["cases"]} == dict.fromkeys(
        ("host_change", "stop_before_resource", "recovery_disabled"), "unknown")
    for case in results["cases"]:
        assert "killed nothing" in case["message"] and "listed no process" in case["message"], case["message"]
        assert [r["clause"] for r in case["results"] if r["verdict"] == "invalid"] == []
    assert disagreements(out) == []
    code, text = cli_in_process("check", str(out / "bundles" / "host_change"))
    assert code == 2 and "killed nothing" in text, text
    assert seconds < BOUND_S
    assert_clean(pid, stdout, err)


# --- the guard itself ------------------------------------------------------------------------------------


def _sleeper(env: dict[str, str] | None = None) -> subprocess.Popen:
    """A sleeping child, returned once it runs: until its exec has finished, /proc/<pid>/environ can still
    read empty (the parent resumes from vfork before the new image's environment is set up), and a process
    caught mid-exec is not what a runtime lists."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; print(flush=True); time.sleep(60)"], env=env,
                            stdout=subprocess.PIPE)
    proc.stdout.readline()
    return proc


def test_vet_accepts_a_marked_process_with_its_create_time_and_skips_a_gone_one():
    marker = new_marker()
    proc = _sleeper({**os.environ, ENV_RUN_MARKER: marker})
    try:
        ct = psutil.Process(proc.pid).create_time()
        assert proc_guard.vet([{"pid": proc.pid, "create_time": ct}], marker) == [(proc.pid, pytest.approx(ct))]
    finally:
        proc.kill()
        proc.wait()
    assert proc_guard.vet([{"pid": proc.pid, "create_time": ct}], marker) == []  # gone: nothing to kill


@pytest.mark.parametrize("who", ["init", "self", "parent", "unmarked", "wrong_create_time", "adapter"])
def test_vet_refuses_what_is_not_of_the_run(who):
    marker = new_marker()
    proc = _sleeper({**os.environ, ENV_RUN_MARKER: marker} if who in ("wrong_create_time", "adapter") else None)
    try:
        pid = {"init": 1, "self": os.getpid(), "parent": os.getppid()}.get(who, proc.pid)
        ct = psutil.Process(pid).create_time() + (5 if who == "wrong_create_time" else 0)
        adapter_pid = proc.pid if who == "adapter" else None
        with pytest.raises(RefusedProcess, match=f"pid {pid}"):
            proc_guard.vet([{"pid": pid, "create_time": ct}], marker, adapter_pid=adapter_pid)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


# --- an adapter whose runtime never starts -------------------------------------------------------------


def test_chaos_with_an_adapter_that_hangs_on_start_ends_unknown_in_bounded_time(tmp_path, monkeypatch):
    # the dry run meets the silence first: two dry runs wait out the start timeout, the rest are not tried
    monkeypatch.setenv("RECOVERYKIT_START_TIMEOUT_S", "10")
    rc, out, err, pid, seconds = recoverykit("chaos", "--workers", "2", "--json", "--quiet", "--timeout", "4",
                                             "--out", str(tmp_path / "o"), "--adapter", adapter("hang_start"),
                                             timeout=420)
    assert seconds < 100  # two start timeouts (12 s each: 3 x --timeout), not one per scenario (over 11 x 12 s)
    assert_clean(pid, out, err)
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert rc == 2, err[-3000:]
    doc = json.loads(out)
    assert doc["cases"] == []  # nothing was traced, so nothing was enumerated: unknown, never a pass
    failed = doc["dry_run"]["failed"]
    assert sum("went silent" in why for why in failed.values()) == len(failed) - 2
    assert any("dry run of" in r and "no reply" in r for r in doc["reasons"]), doc["reasons"]


def test_certify_with_an_adapter_that_hangs_on_start_leaves_no_adapter(tmp_path, monkeypatch):
    monkeypatch.setenv("RECOVERYKIT_START_TIMEOUT_S", "10")
    rc, out, err, pid, seconds = recoverykit("certify", "--only", "chat_read_tool", "--out", str(tmp_path / "o"),
                                             "--adapter", adapter("hang_start"), timeout=240)
    assert rc == 2, err[-3000:]
    assert seconds < 240
    assert_clean(pid, out, err)  # the adapter carries the run marker: no orphan adapter either
