"""A probe tool: an executable a runtime runs as a tool, leaving a witness of every real execution.

Standard library only and free of kit imports, so it starts fast and can be run as a file
(``python .../probe.py``) or as ``python -m recoverykit.conformance.probe``. The runtime runs the
tool's declared argv with ONE extra argument, the tool call's arguments as a JSON object::

    <argv...> '{"probe_token": "t1.0.1.0", "sleep_s": 2, "hold": false, "exit_code": 0}'

argv (fixed by the kit, passed in ``init``): ``--witness PATH --name NAME --effect-class CLASS
[--tool-version V] [--broker SOCKET]``. Arguments (all optional; unknown keys are ignored):

- ``probe_token``: the scripted provider puts a unique one in every tool call it emits;
- ``sleep_s``: the effect takes this long (a long-running child that can outlive its parent);
- ``hold``: after the effect, report ``tool.finished.uncommitted`` to the failpoint broker (or, with
  no broker, wait for the file ``<witness>.release/<probe_token>``) and wait until released, so
  "tool done, result not yet committed" is reachable from outside;
- ``exit_code``: finish with this exit code (outcome ``failed`` when not 0);
- ``detach``: start a new session first (survives a kill of the caller's process group);
- ``output``: text echoed in the result.

A probe declared with ``--external DIR`` is the scripted external operation a runtime waits on (profile
``waits``): run as a call, it starts operation ``op-<probe_token>`` (version 1, state ``running``, in
``DIR/<handle>.json``) and its result carries ``"wait": {"handle", "version"}``; run with the argument
``{"query": HANDLE}`` it records one ``query`` line in the witness log (never an execution) and prints the
operation's state as the kit set it (``running``, ``completed``, ``failed``); state ``hang`` makes the query
never answer (the runtime's query times out; the operation has not stopped). With the argument
``complete_after_s`` the operation completes by itself that long after it started (every query line carries
``complete_at``), so a run needs no move of the kit's to end it (chaos's cases).

Witness: one JSON line per phase (``start`` when the effect begins, with the directory the tool runs in
and its declared version; ``finish`` when it is done; ``emitted`` once its result is out),
each one ``os.write`` on an ``O_APPEND`` descriptor, so concurrent probes never interleave. The
result is one JSON line on stdout: ``{"probe_token", "tool", "pid", "outcome", "output"}``.
"""

from __future__ import annotations

import os
import sys
import time

HOLD_POINT = "tool.finished.uncommitted"
# name -> required; parsed by hand: every tool call pays this process's start, and argparse, socket and
# uuid cost ~25 ms to import (socket is imported only to hold)
OPTIONS = {"--witness": True, "--name": True, "--effect-class": True, "--tool-version": False, "--broker": False,
           "--external": False}
USAGE = ("usage: probe --witness PATH --name NAME --effect-class CLASS [--tool-version V] [--broker SOCKET] "
         "[--external DIR] [ARGUMENTS_JSON]")


class Args:
    def __init__(self, values: dict[str, str | None], arguments: str) -> None:
        self.witness, self.name = values["--witness"], values["--name"]
        self.effect_class, self.tool_version = values["--effect-class"], values.get("--tool-version") or "1"
        self.broker, self.arguments = values.get("--broker"), arguments
        self.external = values.get("--external")


def parse_args(argv: list[str]) -> Args:
    """The probe's argv, or exit 2 with the usage line and what was wrong (argparse's convention)."""
    values: dict[str, str | None] = {}
    positional: list[str] = []
    items = iter(argv)
    for item in items:
        if item in ("-h", "--help"):
            sys.stdout.write(USAGE + "\n\n" + (__doc__ or "").split("\n\n")[0] + "\n")
            sys.exit(0)
        if item.startswith("--"):
            name, eq, value = item.partition("=")
            if name not in OPTIONS:
                _usage_error(f"unknown option {name}")
            values[name] = value if eq else next(items, None)
            if values[name] is None:
                _usage_error(f"{name} needs a value")
        else:
            positional.append(item)
    missing = [name for name, required in OPTIONS.items() if required and name not in values]
    if missing:
        _usage_error(f"the following arguments are required: {', '.join(missing)}")
    if len(positional) > 1:
        _usage_error(f"one ARGUMENTS_JSON at most, got {len(positional)}")
    return Args(values, positional[0] if positional else "{}")


def loads(text: str):
    """``json.loads`` through the C scanner ``json`` itself uses: importing ``json`` pulls in ``re``, ~10 ms
    of every tool call's start. Falls back to ``json`` where there is no ``_json`` (not CPython)."""
    try:
        import _json
    except ImportError:  # pragma: no cover - CPython always has it
        import json
        return json.loads(text)

    class _Context:
        strict, object_hook, object_pairs_hook = True, None, None
        parse_float, parse_int, parse_constant = float, int, float
        memo: dict = {}

    blank = " \t\n\r"
    start = len(text) - len(text.lstrip(blank))
    try:
        value, end = _json.make_scanner(_Context())(text, start)
    except StopIteration as exc:
        raise ValueError(f"Expecting value: char {exc.value}") from None
    if text[end:].strip(blank):
        raise ValueError(f"Extra data: char {end}")
    return value


def dumps(value) -> str:
    """``json.dumps(value, sort_keys=True)`` for what the probe writes (dicts of strings, numbers, booleans
    and None), without importing ``json``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_quote(str(k))}: {dumps(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, str):
        return _quote(value)
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return repr(value)
    return _quote(str(value))


def _quote(text: str) -> str:
    try:
        from _json import encode_basestring_ascii
    except ImportError:  # pragma: no cover
        from json.encoder import py_encode_basestring_ascii as encode_basestring_ascii
    return encode_basestring_ascii(text)


def _usage_error(text: str) -> None:
    sys.stderr.write(f"{USAGE}\nprobe: error: {text}\n")
    sys.exit(2)


def process_create_time(pid: int | None = None) -> float:
    """This process's start time, computed exactly as psutil does on Linux (identity with pid)."""
    pid = os.getpid() if pid is None else pid
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith(b"btime"))
        return int(fields[19]) / os.sysconf("SC_CLK_TCK") + boot
    except (OSError, IndexError, ValueError, StopIteration):
        return time.time()  # not Linux: the witness still has pid and times


def witness(path: str, record: dict) -> None:
    # No fsync: the kit's faults are process kills, and a killed process's write is already in the page
    # cache, where the kit reads it. A machine crash would take the kit's own run with it.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def hold(broker: str | None, witness_path: str, token: str, work_id: str) -> None:
    """Block until the kit releases this probe (the failpoint wire protocol, in a few lines)."""
    if broker:
        import socket

        report = {"v": 1, "type": "hit", "point": HOLD_POINT, "pid": os.getpid(), "hit": 1, "work_id": work_id,
                  "action": "pause", "time": time.time()}
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(broker)
                conn.sendall((dumps(report) + "\n").encode())
                answer = b""
                while not answer.endswith(b"\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    answer += chunk
        except OSError as exc:
            sys.stderr.write(f"probe: broker {broker} unreachable ({exc}); not holding\n")
        return
    release = os.path.join(witness_path + ".release", token)
    while not os.path.exists(release) and not os.path.exists(os.path.join(witness_path + ".release", "ALL")):
        time.sleep(0.02)


def write_state(path: str, state: dict) -> None:
    """An external operation's state, replaced atomically (the kit and the probe both write it this way)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(dumps(state))
    os.replace(tmp, path)


def query(ns: Args, handle: str) -> int:
    """One reconciliation query: a witness line, then the operation's state (``hang``: no answer, ever)."""
    try:
        with open(os.path.join(ns.external, os.path.basename(handle) + ".json")) as fh:
            state = loads(fh.read())
    except (OSError, ValueError):
        state = {"handle": handle, "state": "unknown", "version": None}
    if state.get("state") == "running" and state.get("complete_at") is not None and time.time() >= state["complete_at"]:
        state["state"] = "completed"  # it completed by itself (``complete_after_s``); the witness line says when
    witness(ns.witness, {"phase": "query", "tool": ns.name, "handle": handle, "state": state.get("state"),
                         "version": state.get("version"), "complete_at": state.get("complete_at"),
                         "pid": os.getpid(), "time": time.time(),
                         "marker": os.environ.get("RECOVERYKIT_RUN_MARKER")})
    while state.get("state") == "hang":  # the query never answers; the runtime must time it out
        time.sleep(3600)
    sys.stdout.write(dumps({"handle": handle, "state": state.get("state"), "version": state.get("version")}) + "\n")
    return 0


def _cwd() -> str | None:
    """The directory the runtime ran this tool in (None if it was removed under it)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        args = loads(ns.arguments)
        if not isinstance(args, dict):
            raise ValueError("the arguments must be a JSON object")
    except ValueError as exc:
        sys.stdout.write(dumps({"tool": ns.name, "outcome": "bad_arguments", "error": str(exc)}) + "\n")
        return 64
    if ns.external and "query" in args:
        return query(ns, str(args["query"]))
    if args.get("detach"):
        os.setsid()
    token = str(args.get("probe_token") or f"untracked-{os.urandom(16).hex()}")
    exit_code = int(args.get("exit_code", 0))
    base = {"probe_token": token, "tool": ns.name, "effect_class": ns.effect_class, "tool_version": ns.tool_version,
            "pid": os.getpid(), "ppid": os.getppid(), "create_time": process_create_time(),
            "marker": os.environ.get("RECOVERYKIT_RUN_MARKER")}
    witness(ns.witness, {**base, "phase": "start", "time": time.time(), "sleep_s": args.get("sleep_s", 0),
                         "hold": bool(args.get("hold")), "emits": True, "cwd": _cwd()})
    if ns.external:  # start the operation: it completes when the kit says, or by itself after complete_after_s
        path = os.path.join(ns.external, f"op-{token}.json")
        if not os.path.exists(path):
            after = args.get("complete_after_s")
            write_state(path, {"handle": f"op-{token}", "state": "running", "version": "1",
                               "complete_at": None if after is None else time.time() + float(after)})
    if args.get("sleep_s"):
        time.sleep(float(args["sleep_s"]))
    outcome = "ok" if exit_code == 0 else "failed"
    witness(ns.witness, {**base, "phase": "finish", "time": time.time(), "outcome": outcome, "exit_code": exit_code})
    if args.get("hold"):
        hold(ns.broker, ns.witness, token, work_id=token)
    result = {"probe_token": token, "tool": ns.name, "pid": os.getpid(), "outcome": outcome,
              "output": args.get("output", f"{ns.name} ran")}
    if ns.external:  # the scripted external operation started; the runtime waits on it by handle and version
        result["wait"] = {"handle": f"op-{token}", "version": "1"}
    try:
        sys.stdout.write(dumps(result) + "\n")
        sys.stdout.flush()
    except OSError:  # nobody reads it any more (the runtime died): no result left this process
        return exit_code
    # Only now could anyone have read a result: a runtime reporting one before this line fabricated it.
    witness(ns.witness, {**base, "phase": "emitted", "time": time.time()})
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
