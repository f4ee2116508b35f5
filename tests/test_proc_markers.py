"""The fast marker scan finds exactly what psutil's parsed environments find."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import psutil
from recoverykit.conformance import proc_markers
from recoverykit.conformance.proc_markers import _value


def test_value_is_read_at_the_start_in_the_middle_and_at_the_end_of_a_block():
    assert _value(b"K=first\0A=1\0", b"K=") == "first"
    assert _value(b"A=1\0K=mid\0B=2\0", b"K=") == "mid"
    assert _value(b"A=1\0K=last", b"K=") == "last"
    assert _value(b"A=1\0XK=no\0", b"K=") is None  # a longer name that ends in K is not K
    assert _value(b"A=K=no\0", b"K=") is None  # nor is a value that contains K=


def test_scan_agrees_with_psutil_for_live_processes():
    name = f"RK_TEST_{uuid.uuid4().hex[:8].upper()}"
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                              env={**os.environ, name: f"v{i}"}) for i in range(3)]
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={**os.environ, f"X{name}": "v0"})
    try:
        found = proc_markers.values(name)
        expected = {p.pid: psutil.Process(p.pid).environ()[name] for p in procs}
        assert found == expected
        assert proc_markers.carrying(name, "v1") == [procs[1].pid]
    finally:
        for p in [*procs, decoy]:
            p.kill()
            p.wait()


def test_an_environment_read_mid_exec_is_read_again(monkeypatch):
    """Popen returns once the exec closed its error pipe, before the kernel set up the new environment, and
    /proc/<pid>/environ reads empty in that window: the guard then refused a fresh child of the run (CI,
    test_killer_clock_step). An empty read is retried while the exec settles."""
    reads = iter([b"", b"", b"A=1\0RECOVERYKIT_RUN_MARKER=m-1\0"])
    monkeypatch.setattr(proc_markers, "_environ", lambda pid: next(reads))
    assert proc_markers.value_of(os.getpid(), "RECOVERYKIT_RUN_MARKER") == "m-1"
    monkeypatch.setattr(proc_markers, "_environ", lambda pid: b"")  # really empty (env -i): None, after the wait
    assert proc_markers.value_of(os.getpid(), "RECOVERYKIT_RUN_MARKER") is None
