"""A daemon that escapes every trace of the run is still reaped: the kit is its subreaper (issue 27 item 17).

``tests/adapters/procs_proxy.py daemon TAG`` double-forks, on every ``start``, a process that leaves the
adapter's session, closes every descriptor and drops the whole environment (the run marker with it): the
marker, the session and the run's files (``client_process.kin``) cannot find it. The old kit left one such
process per start alive after ``certify`` and after a ``chaos`` run that exited 0. With
``PR_SET_CHILD_SUBREAPER`` (``conformance.subreaper``) it is adopted by the kit and killed at the run's end.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from env_helpers import marked_by

PROXY = Path(__file__).resolve().parent / "adapters" / "procs_proxy.py"
BOUND_S = 300  # proves "no hang" only

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's")


def _tagged(tag: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if tag in (p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
    return found


@pytest.mark.parametrize("command", ["certify", "chaos"])
def test_a_daemon_that_drops_every_trace_of_the_run_is_reaped_at_its_end(tmp_path, command):
    tag = f"rk-daemon-{os.getpid()}-{time.monotonic_ns()}"
    adapter = f"{sys.executable} {PROXY} daemon {tag}"
    args = (["--only", "chat_unknown_write"] if command == "certify" else
            ["--scenarios", "chat_unknown_write", "--points", "tool.result.commit.before", "--kinds", "tree_kill",
             "--quiet"])
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", command, *args, "--out", str(tmp_path / "o"),
                             "--adapter", adapter], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=BOUND_S)
        left = _tagged(tag)
        assert not left, f"{len(left)} daemon(s) of the run outlived {command}"
        assert marked_by(proc.pid) == []
        assert "Traceback" not in err
        assert proc.returncode in (0, 1, 2), err[-3000:]  # a verdict; the daemon decides none of it
        assert (tmp_path / "o" / "results.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for p in _tagged(tag):
            with contextlib.suppress(psutil.Error):
                p.kill()
