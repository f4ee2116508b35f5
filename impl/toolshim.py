"""The tool shim: the process a worker starts for each tool call, in its own session.

It exists so that a tool's outcome survives the worker that started it. It first writes
``started.json`` (so "never started" is certain when that file is absent and no shim is alive),
then runs the tool with its output going to files, then writes ``exit.json`` atomically. A
restarted worker that finds the shim alive waits for it; one that finds ``exit.json`` commits the
real result instead of running the tool again.

It runs as a file under ``python -I -S`` and imports only ``os``, ``sys`` and ``time``: every tool
call pays its start, ``subprocess`` and ``pathlib`` cost ~40 ms to import and ``json`` (through ``re``)
~10 ms. So the call is given on the command line (``toolshim.py CALL_DIR CWD -- TOOL_ARGV...``, an
empty CWD meaning "inherit") and the two records it writes hold only numbers, formatted by hand.
"""

from __future__ import annotations

import os
import sys
import time


def write_atomic(path: str, data: dict[str, int | float]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        # JSON of int and finite float values: repr() of either is already a JSON number
        fh.write("{" + ", ".join(f'"{k}": {v!r}' for k, v in data.items()) + "}")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def run(argv: list[str], cwd: str | None, out_fd: int, err_fd: int) -> int:
    """What ``subprocess.call`` does here: stdin from /dev/null, output to the files; the exit status,
    negative for a signal, 127 when the tool cannot be started."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child execs or exits
        try:
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(out_fd, 1)
            os.dup2(err_fd, 2)
            if cwd:
                os.chdir(cwd)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"cannot start tool: {exc}\n".encode())
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 4 or args[2] != "--":
        sys.stderr.write("usage: toolshim.py CALL_DIR CWD -- TOOL_ARGV...\n")
        return 2
    call_dir, cwd, tool_argv = args[0], args[1], args[3:]
    write_atomic(os.path.join(call_dir, "started.json"), {"pid": os.getpid(), "at": time.time()})
    with open(os.path.join(call_dir, "stdout"), "wb") as out, open(os.path.join(call_dir, "stderr"), "wb") as err:
        code = run(tool_argv, cwd or None, out.fileno(), err.fileno())
    write_atomic(os.path.join(call_dir, "exit.json"), {"exit_code": code, "at": time.time()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
