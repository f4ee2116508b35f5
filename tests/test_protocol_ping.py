"""`recoverykit protocol ping` against adapters that break the protocol, each in one way.

Each case must end with exit 1 (a definite break) or 2 (silence), one paragraph on stderr naming
what went wrong, no traceback, and no process of the adapter left alive.
"""

import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from env_helpers import tagged
from recoverykit.cli import main

ROOT = Path(__file__).resolve().parent.parent
GARBAGE = ROOT / "tests" / "adapters" / "garbage_adapter.py"
DEMO = ROOT / "examples" / "demo_adapter.py"

CASES = {
    "nonjson": (1, "Why: not JSON"),
    "silent": (2, "Why: no reply within 1 s"),
    "silent_stubborn": (2, "Why: no reply within 1 s"),
    "wrong_msg_id": (1, "Why: in_reply_to 42 answers no request in flight"),
    "wrong_type": (1, "Why: a reply of type `observe_ok` cannot answer `init`"),
    "long_line": (1, "over the 1048576-byte limit"),
    "exit_mid_handshake": (1, "exited with status 3 in the middle of a line"),
    "schema": (1, "the `init_ok` message fails its schema: `profiles.0`"),
    "false_definite": (1, "error code `crashed` is indefinite by the registry"),
    "old_major": (1, "the MAJOR versions must match"),
    "invented_section": (1, "section `leases` is filled but not declared"),
}


def _ping(adapter: str, *args: str) -> subprocess.CompletedProcess:
    """The real command in a fresh interpreter: proves no traceback reaches the user."""
    return subprocess.run([sys.executable, "-m", "recoverykit", "protocol", "ping", "--adapter", adapter, *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def ping_in_process(capsys):
    """The same entry point (``recoverykit.cli.main``) in this process: seconds cheaper per case."""

    def run(adapter: str, *args: str) -> subprocess.CompletedProcess:
        with pytest.raises(SystemExit) as info:
            main(["protocol", "ping", "--adapter", adapter, *args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, info.value.code, out, err)

    return run


@pytest.mark.parametrize("mode", sorted(CASES))
def test_garbage_adapter_ends_with_one_paragraph_and_no_leftovers(mode, tmp_path, ping_in_process):
    exit_code, why = CASES[mode]
    tag = f"rk-test-{uuid.uuid4().hex}"
    adapter = shlex.join([sys.executable, str(GARBAGE), mode, tag])
    # two cases go through a fresh interpreter, the rest through the same entry point in-process
    run = _ping if mode in ("nonjson", "silent_stubborn") else ping_in_process
    try:
        result = run(adapter, "--timeout", "1", "--out", str(tmp_path))
        assert result.returncode == exit_code, result.stderr
        assert "Traceback" not in result.stderr + result.stdout
        paragraph = result.stderr.strip()
        assert "\n" not in paragraph, paragraph
        verdict = "invalid" if exit_code == 1 else "unknown"
        assert f"Adapter protocol error (verdict: {verdict})" in paragraph
        assert why in paragraph
        assert "Read docs/protocol.md" in paragraph
        assert tagged(tag) == []
        assert (tmp_path / "adapter.messages.jsonl").read_text().count('"dir": "sent"') >= 1
    finally:
        for proc in tagged(tag):
            proc.kill()


def test_refused_observe_is_unknown_not_valid(tmp_path, ping_in_process):
    result = ping_in_process(shlex.join([sys.executable, str(GARBAGE), "refuses_observe"]), "--out", str(tmp_path))
    assert result.returncode == 2
    assert "'temporarily_unavailable'" in result.stderr and "the verdict is unknown" in result.stderr


def test_demo_adapter_pings_valid():
    result = _ping(shlex.join([sys.executable, str(DEMO)]))
    assert result.returncode == 0, result.stderr
    assert "adapter: demo-adapter 0.1.0 (protocol 1.0)" in result.stdout
    assert "valid: the adapter speaks recoverykit adapter protocol 1.0" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize(("command", "why"), [
    ("", "is empty"),
    ("'unterminated", "cannot be split into arguments"),
    ("/nonexistent/adapter-program", "was not found"),
])
def test_an_adapter_command_that_cannot_start_is_a_usage_error(command, why, ping_in_process):
    result = ping_in_process(command)
    assert result.returncode == 64
    assert why in result.stderr and "Traceback" not in result.stderr
