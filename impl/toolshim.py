"""The tool shim: the process a worker starts for each tool call, in its own session.

It exists so that a tool's outcome survives the worker that started it. It first writes
``started.json`` (so "never started" is certain when that file is absent and no shim is alive),
then runs the tool with its output going to files, then writes ``exit.json`` atomically. A
restarted worker that finds the shim alive waits for it; one that finds ``exit.json`` commits the
real result instead of running the tool again. Standard library only: it starts fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def write_atomic(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def main(argv: list[str] | None = None) -> int:
    call_dir = Path((argv or sys.argv[1:])[0])
    spec = json.loads((call_dir / "spec.json").read_text())
    write_atomic(call_dir / "started.json", {"pid": os.getpid(), "at": time.time()})
    with open(call_dir / "stdout", "wb") as out, open(call_dir / "stderr", "wb") as err:
        try:
            code = subprocess.call(spec["argv"], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                   cwd=spec.get("cwd") or None)
        except OSError as exc:
            err.write(f"cannot start tool: {exc}\n".encode())
            code = 127
    write_atomic(call_dir / "exit.json", {"exit_code": code, "at": time.time()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
