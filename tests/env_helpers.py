"""Helpers for the environment tests: spawn Python children and never leave one behind."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from recoverykit.conformance.killer import kill_tree
from recoverykit.conformance.reaper import ENV_RUN_MARKER, new_marker, reap

SRC = str(Path(__file__).resolve().parent.parent)


class Spawner:
    """Starts ``python -c code`` children carrying a private run marker; ``cleanup`` reaps them all."""

    def __init__(self) -> None:
        self.marker = new_marker()
        self.procs: list[subprocess.Popen] = []

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, ENV_RUN_MARKER: self.marker, **extra}

    def python(self, code: str, *, env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", code], env=env or self.env(), **kwargs)
        self.procs.append(proc)
        return proc

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                kill_tree(proc.pid)
        reap(self.marker)
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream:
                    stream.close()


@pytest.fixture
def spawner():
    s = Spawner()
    yield s
    s.cleanup()
    assert not [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE], \
        "a test left a child process running"


@pytest.fixture
def short_dir():
    """A private directory with a short path, for Unix sockets (sun_path is about 100 bytes)."""
    with tempfile.TemporaryDirectory(prefix="rk-") as d:
        yield Path(d)


def marked_by(owner_pid: int) -> list[psutil.Process]:
    """Live processes carrying a run marker owned by ``owner_pid`` (psutil's own parse of each environment,
    independent of the kit's raw /proc scan that the tests check)."""
    prefix = f"recoverykit-{owner_pid}-"
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(ENV_RUN_MARKER, "").startswith(prefix) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def cli_in_process(*args: str) -> tuple[int, str]:
    """``recoverykit ARGS`` in this process: (exit code, stdout and stderr together). For commands that start
    no adapter, where a subprocess would only add its interpreter start."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from recoverykit.cli import main

    buf = io.StringIO()
    with redirect_stdout(buf), redirect_stderr(buf):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
        else:
            code = 0
    return int(code or 0), buf.getvalue()


def tagged(tag: str) -> list[psutil.Process]:
    """Live processes with ``tag`` among their command-line words (adapters put it on every child)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if tag in (proc.info["cmdline"] or []) and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def leftovers(path: Path) -> list[str]:
    """Live processes whose command line mentions ``path`` (workers, probes: all carry run-dir paths)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and str(path) in " ".join(proc.info["cmdline"] or []):
                found.append(" ".join(proc.info["cmdline"]))
        except psutil.Error:
            continue
    return found


def run_kit(*args: str, bound_s: float = 150.0, cwd: Path | None = None) -> tuple[int, str]:
    """``recoverykit ARGS`` in a subprocess: (exit code, stdout + stderr); asserts the bound, no traceback and that
    no process of its run outlived it."""
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=cwd or SRC)
    try:
        out, _ = proc.communicate(timeout=bound_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"recoverykit {shlex.join(args)} hung past {bound_s} s") from None
    assert time.monotonic() - began < bound_s
    assert "Traceback" not in out, out
    left = marked_by(proc.pid)
    assert not left, [p.cmdline() for p in left]
    return proc.returncode, out
