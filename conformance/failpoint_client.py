"""Failpoints, the runtime's side: one self-contained, standard-library-only file to copy.

A runtime calls ``failpoint("tool.result.commit.before", work_id)`` at each interruption point it
implements. The points armed by ``RECOVERYKIT_FAILPOINTS`` are parsed once, at import; an unarmed
point then costs one dictionary lookup. Hits are counted per process (a forked child starts again
from the spec, as an exec'd one does). When a point fires:

- ``off``: nothing happens (the hit is still counted);
- ``sleep(ms)``: report the hit to the broker (no answer awaited), then sleep;
- ``crash``: report the hit, then SIGKILL this process (the kit judges the crash by the exit);
- ``pause``: report the hit and block the calling thread until the broker answers. The answer is
  ``{"resume": "continue"}`` or ``{"resume": "crash"}``; if the broker's socket is gone (the kit
  died) the thread continues; with no socket configured it blocks until killed from outside.

Wire format (docs/failpoints.md): connect to the Unix stream socket ``RECOVERYKIT_FAILPOINT_SOCKET``,
write one line of JSON ``{"v": 1, "type": "hit", "point", "pid", "hit", "work_id", "action",
"time"}`` (and an optional ``"detail"`` object) and, for ``pause`` only, read one line of JSON back. One
connection per hit.

Do not import anything from recoverykit here: runtimes vendor this file as it is.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time

ENV_FAILPOINTS = "RECOVERYKIT_FAILPOINTS"
ENV_FAILPOINT_SOCKET = "RECOVERYKIT_FAILPOINT_SOCKET"
ACTIONS = ("off", "pause", "crash", "sleep")
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")


class _Point:
    __slots__ = ("hits", "name", "terms")

    def __init__(self, name: str, terms: list[list]) -> None:
        self.name = name
        self.terms = terms  # [action, remaining count or None for "forever", millis]
        self.hits = 0


def parse(text: str) -> dict[str, list[tuple[str, int | None, int | None]]]:
    """``point=[N*]action[->...];...`` to {point: [(action, count, millis), ...]}; ValueError if bad."""
    armed: dict[str, list[tuple[str, int | None, int | None]]] = {}
    for entry in text.split(";"):
        if not entry.strip():
            continue
        point, sep, chain = entry.partition("=")
        point = point.strip()
        if not sep or point in armed or not all(w and set(w) <= _NAME_CHARS for w in point.split(".")):
            raise ValueError(f"bad failpoint entry {entry!r} in {ENV_FAILPOINTS}={text!r}")
        terms = []
        for raw in chain.split("->"):
            count_text, star, action = raw.strip().rpartition("*")
            if star and not _digits(count_text):
                raise ValueError(f"bad failpoint count in {raw!r} in {ENV_FAILPOINTS}={text!r}")
            count = int(count_text) if star else None
            millis = None
            if action.startswith("sleep(") and action.endswith(")") and _digits(action[6:-1]):
                action, millis = "sleep", int(action[6:-1])
            bad_count = count is not None and count < 1
            if action not in ACTIONS or (action == "sleep") != (millis is not None) or bad_count:
                raise ValueError(f"bad failpoint term {raw!r} in {ENV_FAILPOINTS}={text!r}")
            if terms and terms[-1][1] is None:
                raise ValueError(f"failpoint term {raw!r} follows a term without a count")
            terms.append((action, count, millis))
        armed[point] = terms
    return armed


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _load(text: str) -> dict[str, _Point]:
    return {name: _Point(name, [list(t) for t in terms]) for name, terms in parse(text).items()}


_SPEC: str = os.environ.get(ENV_FAILPOINTS, "")
_SOCKET: str | None = os.environ.get(ENV_FAILPOINT_SOCKET) or None
_ARMED: dict[str, _Point] = _load(_SPEC)
_LOCK = threading.Lock()


def reload(environ=os.environ) -> None:
    """Re-read both variables (for tests, and for runtimes that set them after import)."""
    global _SPEC, _SOCKET, _ARMED
    _SPEC, _SOCKET = environ.get(ENV_FAILPOINTS, ""), environ.get(ENV_FAILPOINT_SOCKET) or None
    _ARMED = _load(_SPEC)


def _after_fork() -> None:
    # Hits are counted per process: a forked child starts from the spec, like an exec'd one, and gets
    # a fresh lock (another thread may have held the parent's at fork time).
    global _ARMED, _LOCK
    _ARMED, _LOCK = _load(_SPEC), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def failpoint(point: str, work_id: str | None = None, detail: dict | None = None) -> None:
    """Call at an interruption point. Unarmed: one dict lookup, nothing more. ``detail``: an optional JSON
    object sent with the report (the durable-write hook sends the file and the operation)."""
    armed = _ARMED.get(point)
    if armed is None:
        return
    _fire(armed, work_id, detail)


def armed_points() -> list[str]:
    return sorted(_ARMED)


def _step(armed: _Point) -> tuple[int, str, int | None]:
    """Count one hit and use up one count of the current term: (hit, action, millis)."""
    with _LOCK:
        armed.hits += 1
        for term in armed.terms:
            if term[1] is None or term[1] > 0:
                if term[1] is not None:
                    term[1] -= 1
                return armed.hits, term[0], term[2]
        return armed.hits, "off", None


def _fire(armed: _Point, work_id: str | None, detail: dict | None = None) -> None:
    hit, action, millis = _step(armed)
    if action == "off":
        return
    report = {"v": 1, "type": "hit", "point": armed.name, "pid": os.getpid(), "hit": hit,
              "work_id": work_id, "action": action, "time": time.time()}
    if detail is not None:
        report["detail"] = detail
    if action == "pause":
        if _report(report, wait=True) == "crash":
            action = "crash"
    else:
        _report(report, wait=False)
    if action == "sleep":
        time.sleep(millis / 1000.0)
    elif action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # SIGKILL is delivered before this returns; never fall through


def _report(report: dict, wait: bool) -> str:
    """Send one hit; for a pause, block for the broker's answer. Returns the resume action."""
    path = _SOCKET
    line = (json.dumps(report) + "\n").encode()
    if not path:
        sys.stderr.write(f"failpoint hit with no {ENV_FAILPOINT_SOCKET}: {line.decode()}")
        sys.stderr.flush()
        while wait:  # nobody can release us: hold until killed from outside
            time.sleep(3600)
        return "continue"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            conn.sendall(line)
            if not wait:
                return "continue"
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    return "continue"  # the broker went away: do not hang a runtime forever
                answer += chunk
            return json.loads(answer).get("resume", "continue")
    except OSError as exc:
        sys.stderr.write(f"failpoint {report['point']}: broker at {path} unreachable ({exc}); continuing\n")
        return "continue"
