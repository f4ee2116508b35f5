"""The tool shim runs a tool like subprocess.call would, and leaves its outcome on disk."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from recoverykit.impl.tools import SHIM_FILE


def shim(tmp_path: Path, argv: list[str], cwd: str | None = None) -> tuple[dict, str, str]:
    call = tmp_path / "call"
    call.mkdir()
    subprocess.run([sys.executable, "-I", "-S", SHIM_FILE, str(call), cwd or "", "--", *argv], check=True, timeout=60)
    started = json.loads((call / "started.json").read_text())
    assert started["pid"] > 0
    return json.loads((call / "exit.json").read_text()), (call / "stdout").read_text(), (call / "stderr").read_text()


def test_output_exit_code_and_working_directory(tmp_path):
    code = "import os, sys; print(os.getcwd()); sys.stdin.read(); sys.exit(3)"
    done, out, _ = shim(tmp_path, [sys.executable, "-c", code], cwd=str(tmp_path))
    assert done["exit_code"] == 3 and out.strip() == str(tmp_path)


def test_a_tool_that_cannot_start_exits_127_and_says_why(tmp_path):
    done, _, err = shim(tmp_path, [str(tmp_path / "no-such-tool")])
    assert done["exit_code"] == 127 and "cannot start tool" in err


def test_a_tool_killed_by_a_signal_reports_it_negative(tmp_path):
    done, _, _ = shim(tmp_path, [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert done["exit_code"] == -9
