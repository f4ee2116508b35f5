"""Finding processes by the run marker in their environment, fast enough to do after every case.

Hygiene scans every process on the machine several times per chaos case (after the adapter exits,
when the case is reaped, to prove nothing is left). psutil's ``environ()`` parses each environment
into a dict (about 0.1 ms per process, most of a case's kit-side CPU on a busy machine); here the
raw ``/proc/<pid>/environ`` bytes are searched for the one variable instead. Other platforms fall
back to psutil.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

import psutil

_PROC = "/proc"


def _linux() -> bool:
    return sys.platform.startswith("linux") and os.path.isdir(_PROC)


def _value(block: bytes, key: bytes) -> str | None:
    if block.startswith(key):
        start = len(key)
    else:
        at = block.find(b"\0" + key)
        if at < 0:
            return None
        start = at + 1 + len(key)
    end = block.find(b"\0", start)
    return block[start:end if end >= 0 else len(block)].decode("utf-8", "replace")


def values(name: str) -> dict[int, str]:
    """pid -> value of the environment variable ``name``, for every process we may read that has it."""
    found: dict[int, str] = {}
    if not _linux():
        for proc in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.Error, OSError):
                value = proc.environ().get(name)
                if value is not None:
                    found[proc.pid] = value
        return found
    key = name.encode() + b"="
    for entry in os.listdir(_PROC):
        if not entry.isdigit():
            continue
        try:
            with open(f"{_PROC}/{entry}/environ", "rb") as fh:
                block = fh.read()
        except OSError:  # gone, or not ours to read
            continue
        if key in block:
            value = _value(block, key)
            if value is not None:
                found[int(entry)] = value
    return found


def carrying(name: str, value: str) -> list[int]:
    """Pids of the processes whose ``name`` is exactly ``value``."""
    return sorted(pid for pid, v in values(name).items() if v == value)


EXEC_SETTLE_S = 0.2  # how long an empty environment may be an exec still setting the new one up


def _environ(pid: int) -> bytes:
    with open(f"{_PROC}/{pid}/environ", "rb") as fh:
        return fh.read()


def value_of(pid: int, name: str) -> str | None:
    """The value of ``name`` in one process's environment, or None (unset, gone, or not ours to read).

    An exec closes the parent's close-on-exec pipe (so ``subprocess.Popen`` returns) before the kernel has set up
    the new program's environment, and ``/proc/<pid>/environ`` reads empty in that window: an empty environment is
    read again for up to ``EXEC_SETTLE_S`` before it counts (the guard refused a fresh child of the run for it)."""
    if not _linux():
        with contextlib.suppress(psutil.Error, OSError):
            return psutil.Process(pid).environ().get(name)
        return None
    deadline = time.monotonic() + EXEC_SETTLE_S
    try:
        block = _environ(pid)
        while not block and time.monotonic() < deadline:
            time.sleep(0.005)
            block = _environ(pid)
    except OSError:
        return None
    return _value(block, name.encode() + b"=")




def has_memory(pid: int) -> bool:
    """Whether the process still has its memory (its executable link). One that is exiting (memory released,
    not yet a zombie) shows no environment: the absence of a marker there proves nothing, while a live
    process started with an empty environment still has its executable."""
    if not _linux():
        with contextlib.suppress(psutil.Error, OSError):
            return bool(psutil.Process(pid).exe())
        return False
    try:
        return bool(os.readlink(f"{_PROC}/{pid}/exe"))
    except OSError:
        return False
