"""Tool execution as real child processes whose outcome outlives the worker.

Each call gets a directory ``tools/<call_id>/`` and a shim process (``toolshim``) in its own session.
What recovery can know about a call comes from that directory and from psutil, never from memory:

- ``exit.json`` present: the tool finished; its real result is committed (real results win);
- the shim alive (pid from ``started.json`` or, before that file exists, found by the call id in
  its environment): reattach and wait, never start it again;
- ``started.json`` absent and no shim alive: the tool never started (the shim writes the file
  before it starts the tool);
- otherwise the tool started and its outcome is unknown.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from .config import ToolSpec

CALL_ENV = "RK_IMPL_CALL_ID"
SHIM_FILE = str(Path(__file__).with_name("toolshim.py"))
MAX_OUTPUT = 16_000


@dataclass
class Outcome:
    exit_code: int
    text: str


def call_dir(data_dir: Path, call_id: str) -> Path:
    return data_dir / "tools" / call_id.replace("/", "_")


def spawn(data_dir: Path, call_id: str, spec: ToolSpec, arguments: str, cwd: str | None) -> subprocess.Popen:
    """Start the shim for one call; the caller records pid + create_time before going on."""
    folder = call_dir(data_dir, call_id)
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, CALL_ENV: call_id, "RECOVERYKIT_TOOL_CALL_ID": call_id}
    # Run as a file without site: the shim is standard library only, and this saves ~30 ms per tool call
    # (no site-packages scan, no import of this package). The call travels on its command line.
    argv = [sys.executable, "-I", "-S", SHIM_FILE, str(folder), cwd or "", "--", *spec.argv, arguments]
    return subprocess.Popen(argv,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, start_new_session=True, close_fds=True)


def create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def result(data_dir: Path, call_id: str) -> Outcome | None:
    folder = call_dir(data_dir, call_id)
    try:
        done = json.loads((folder / "exit.json").read_text())
    except (OSError, ValueError):
        return None
    out = _read(folder / "stdout")
    err = _read(folder / "stderr")
    code = int(done.get("exit_code", -1))
    text = out if code == 0 else f"tool exited with status {code}\n{out}{err}"
    return Outcome(code, text[:MAX_OUTPUT])


def _read(path: Path) -> str:
    try:
        return path.read_bytes()[:MAX_OUTPUT].decode("utf-8", "replace")
    except OSError:
        return ""


def started(data_dir: Path, call_id: str) -> bool:
    return (call_dir(data_dir, call_id) / "started.json").exists()


def live_shim(data_dir: Path, call_id: str, pid: int | None, ctime: float | None) -> psutil.Process | None:
    """The call's shim if it is alive, identified by pid + start time or by the call id in its env."""
    candidates: list[int] = []
    if pid:
        candidates.append(pid)
    try:
        marker = json.loads((call_dir(data_dir, call_id) / "started.json").read_text())
        candidates.append(int(marker["pid"]))
    except (OSError, ValueError, KeyError):
        pass
    for cand in candidates:
        proc = _alive(cand)
        same = proc is not None and (cand != pid or ctime is None or abs(proc.create_time() - ctime) < 0.01)
        if same and _has_call(proc, call_id):
            return proc
    if not call_dir(data_dir, call_id).exists():
        return None  # the worker never got as far as preparing the call
    for proc in psutil.process_iter(["pid"]):  # spawned, but died before we recorded its pid
        if _has_call(proc, call_id) and _alive(proc.pid) is not None:
            return proc
    return None


def _alive(pid: int) -> psutil.Process | None:
    try:
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _has_call(proc: psutil.Process, call_id: str) -> bool:
    try:
        return proc.environ().get(CALL_ENV) == call_id and "toolshim" in " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def wait_live(data_dir: Path, call_id: str, proc: psutil.Process) -> None:
    """Wait for a shim that is not our child until it exits (or turns zombie) or its outcome is on disk.

    psutil cannot wait() on another process's child, and an orphaned zombie still "exists", so this
    polls with a growing interval; it runs only while a reattached tool is really running.
    """
    delay = 0.02
    done = call_dir(data_dir, call_id) / "exit.json"
    while not done.exists() and _alive(proc.pid) is not None:
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def tool_pids(data_dir: Path) -> list[psutil.Process]:
    """Every live shim or tool process started by this runtime (for `processes`)."""
    found = []
    want = f"\0RK_IMPL_DATA_DIR={data_dir}\0".encode()
    call = f"{CALL_ENV}=".encode()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        # raw /proc bytes, not psutil's parsed environ(): this runs on every `processes` and every stop
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                block = b"\0" + fh.read() + b"\0"
        except OSError:
            continue
        if want in block and b"\0" + call in block:
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(int(entry)))
    if not os.path.isdir("/proc"):  # not Linux: parse every environment
        for proc in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.Error):
                env = proc.environ()
                if CALL_ENV in env and env.get("RK_IMPL_DATA_DIR") == str(data_dir):
                    found.append(proc)
    return found
