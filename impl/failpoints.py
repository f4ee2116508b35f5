"""Failpoints, the runtime's side: a vendored copy of the kit's standard-library client.

impl/ may import nothing of recoverykit, so, like any third-party runtime, it carries its own copy of
the client described in docs/failpoints.md (copied from conformance/failpoint_client.py). The points it
calls are listed in POINTS and declared in init_ok.

A runtime calls ``failpoint("tool.result.commit.before", work_id)`` at each interruption point it
implements. The points armed by ``RECOVERYKIT_FAILPOINTS`` are parsed once, at import; an unarmed
point then costs one dictionary lookup. When a point fires:

- ``off``: nothing happens (the hit is still counted);
- ``sleep(ms)``: report the hit to the broker (no answer awaited), then sleep;
- ``crash``: report the hit, then SIGKILL this process (the kit judges the crash by the exit);
- ``pause``: report the hit and block the calling thread until the broker answers. The answer is
  ``{"resume": "continue"}`` or ``{"resume": "crash"}``; if the broker's socket is gone (the kit
  died) the thread continues; with no socket configured it blocks until killed from outside.

Wire format (docs/failpoints.md): connect to the Unix stream socket ``RECOVERYKIT_FAILPOINT_SOCKET``,
write one line of JSON ``{"v": 1, "type": "hit", "point", "pid", "hit", "work_id", "action",
"time"}`` and, for ``pause`` only, read one line of JSON back. One connection per hit.

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
        if not sep or not point or point in armed:
            raise ValueError(f"bad failpoint entry {entry!r} in {ENV_FAILPOINTS}={text!r}")
        terms = []
        for raw in chain.split("->"):
            count_text, star, action = raw.strip().rpartition("*")
            count = int(count_text) if star else None
            millis = None
            if action.startswith("sleep(") and action.endswith(")"):
                action, millis = "sleep", int(action[6:-1])
            bad_sleep = (action == "sleep") != (millis is not None)
            if action not in ACTIONS or bad_sleep or (count is not None and count < 1):
                raise ValueError(f"bad failpoint term {raw!r} in {ENV_FAILPOINTS}={text!r}")
            if terms and terms[-1][1] is None:
                raise ValueError(f"failpoint term {raw!r} follows a term without a count")
            terms.append((action, count, millis))
        armed[point] = terms
    return armed


def _load(environ=os.environ) -> dict[str, _Point]:
    return {name: _Point(name, [list(t) for t in terms])
            for name, terms in parse(environ.get(ENV_FAILPOINTS, "")).items()}


_ARMED: dict[str, _Point] = _load()
_LOCK = threading.Lock()


def reload(environ=os.environ) -> None:
    """Re-read the environment (for tests and for runtimes that set it after import)."""
    global _ARMED
    _ARMED = _load(environ)


def failpoint(point: str, work_id: str | None = None) -> None:
    """Call at an interruption point. Unarmed: one dict lookup, nothing more."""
    armed = _ARMED.get(point)
    if armed is None:
        return
    _fire(armed, work_id)


def armed_points() -> list[str]:
    return sorted(_ARMED)


def _fire(armed: _Point, work_id: str | None) -> None:
    with _LOCK:
        armed.hits += 1
        hit = armed.hits
        action, millis = "off", None
        for term in armed.terms:
            if term[1] is None or term[1] > 0:
                if term[1] is not None:
                    term[1] -= 1
                action, millis = term[0], term[2]
                break
    if action == "off":
        return
    report = {"v": 1, "type": "hit", "point": armed.name, "pid": os.getpid(), "hit": hit,
              "work_id": work_id, "action": action, "time": time.time()}
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
    path = os.environ.get(ENV_FAILPOINT_SOCKET)
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


# The interruption points this runtime calls (names copied from the kit's catalogue).
POINTS: tuple[str, ...] = (
    "input.accept.before", "input.accept.after",
    "provider.request.before", "provider.request.after",
    "usage.persist.before", "usage.persist.after",
    "tool.dispatch.before", "tool.dispatch.after",
    "tool.result.commit.before", "tool.result.commit.after",
    "completion.commit.before_projection",
    "recovery.claim.after", "recovery.repair.after", "recovery.decide.after",
    "approval.consume.before", "approval.consume.after",
    "wait.notify.before_admit", "wait.notify.after",
    "child.delivery.before", "child.delivery.after",  # background Jobs (impl/jobs.py)
    # Goals (impl/goals.py, impl/acceptance.py)
    "todo.complete.before_acceptance", "acceptance.verifier.before", "acceptance.verifier.after",
    "acceptance.achieve.before",
    # the Paperclip task layer (tasks.py, task_runner.py)
    "retry.receipt.before", "retry.receipt.after", "workspace.prepare.before", "workspace.prepare.after",
    "bootstrap.before_dispatch", "coordinator.settle.before", "coordinator.settle.after",
    "run.finalize.before",
)
