"""The pytest plugin (conformance/pytest_plugin.py) behaves as ``recoverykit certify`` does (issue 27 items 4, 7, 10).

- ``--recoverykit-adapter=`` (an unset CI variable) is a usage error (pytest exits 4) with the CLI's message,
  never a session that silently runs nothing;
- a case whose every broken clause is accepted, FA-01 derived from them included, is a known finding (xfail)
  exactly as certify folds it (``Certification.accepted``), never a failure;
- a SIGTERM (a CI timeout) reaps every process of the session's runs and exits 143.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from env_helpers import marked_by

ROOT = Path(__file__).resolve().parent.parent
MINI = f"{sys.executable} {ROOT / 'tests' / 'adapters' / 'mini_runtime.py'}"
REFERENCE = f"{sys.executable} -m recoverykit.impl"
BOUND_S = 300  # proves "no hang" only


def _pytest(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-rx", "-p", "no:cacheprovider", "-p", "no:randomly", *args]


def test_an_empty_adapter_is_a_usage_error_with_the_clis_message(tmp_path):
    (tmp_path / "test_own.py").write_text("def test_own():\n    pass\n")
    argv = _pytest("--recoverykit-adapter=", f"--recoverykit-out={tmp_path / 'out'}")
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=BOUND_S)
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]  # pytest's usage error
    cli = subprocess.run([sys.executable, "-m", "recoverykit", "certify", "--adapter", "", "--out",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=BOUND_S)
    assert cli.returncode == 64
    message = cli.stderr.split("Error: ", 1)[-1].strip()
    assert message and message in done.stderr, (cli.stderr, done.stderr)
    assert "passed" not in done.stdout and "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_case_that_broke_only_accepted_clauses_and_fa01_derived_from_them_is_xfail(tmp_path):
    """mini_runtime --bug sum_usage breaks USG-05 in chat_unknown_write, and after the kill FA-01 through it: certify
    with --accept USG-05 reports FA-01 accepted (derived from USG-05) and exits 0; the plugin failed the case."""
    adapter = f"{MINI} --bug sum_usage"
    argv = _pytest(f"--recoverykit-adapter={adapter}", "--recoverykit-accept=USG-05",
                   f"--recoverykit-out={tmp_path / 'a'}", "-k", "chat_unknown_write")
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=BOUND_S)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 xfailed" in done.stdout and "accepted finding: FA-01, USG-05" in done.stdout, done.stdout[-3000:]
    plain = subprocess.run(_pytest(f"--recoverykit-adapter={adapter}", f"--recoverykit-out={tmp_path / 'b'}",
                                   "-k", "chat_unknown_write"), cwd=tmp_path,
                           capture_output=True, text=True, timeout=BOUND_S)
    assert plain.returncode == 1 and "USG-05" in plain.stdout  # without the acceptance it still fails


def test_a_sigterm_to_the_pytest_plugin_reaps_every_process_and_exits_143(tmp_path):
    """A CI timeout SIGTERMs pytest mid-scenario: the old plugin died at once and left 11 processes of the run."""
    proc = subprocess.Popen(_pytest(f"--recoverykit-adapter={REFERENCE}", f"--recoverykit-out={tmp_path / 'out'}",
                                    "-k", "chat_long_tool or chat_unknown_write"),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + BOUND_S
        while not marked_by(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marked_by(proc.pid), "the session never started a runtime"
        time.sleep(0.5)  # the runtime's workers and tools are up
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            pytest.fail(f"no exit within {BOUND_S} s of the SIGTERM: {out[-2000:]}")
        assert proc.returncode == 143, out[-3000:]
        assert "interrupted by SIGTERM" in out
        assert marked_by(proc.pid) == [], "processes of the session's runs outlived the SIGTERM"
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        for leftover in marked_by(proc.pid):
            with contextlib.suppress(psutil.Error):
                leftover.kill()
