"""The drives of the durable-wait scenarios (profile ``waits``), declared in ``scenarios.SCENARIOS``.

The model's first answer calls the scripted external operation (``probe_external``, one of the standard probes:
``probe --external``, declared ``external_operation`` since protocol 1.3), and the runtime must wait on the operation it
started (handle ``op-<probe_token>``, version 1). The kit then completes it, fails it or makes its queries
hang (``Run.external``, recorded in the history) and delivers notifications (``notify``), around restarts and
the user's Pause. What followed is judged by ``checks_waits`` from the provider's ledger (when the runtime
asked the model for its continuation, how often), the witness log (every reconciliation query) and the kit's
own history.
"""

from __future__ import annotations

import time
from typing import Any

from recoverykit.conformance import scenarios as sc
from recoverykit.conformance.checker import ClauseResult, _result
from recoverykit.conformance.environment import Run
from recoverykit.conformance.pacing import SETTLE, current
from recoverykit.model.catalogue import Verdict

EXTERNAL = "probe_external"


def start_with_external(run: Run, **start: Any) -> None:
    """Start; ``probe_external`` is one of the standard probes, registered at ``init``."""
    run.start(**start)


def started(run: Run, script_id: str) -> tuple[str | None, str | None]:
    """Submit ``script_id`` and wait until its external operation started: (work_id, handle)."""
    work_id = sc.submit(run, script_id)
    found = run.wait_witness(lambda e: e.tool == EXTERNAL and e.done and e.emitted, timeout_s=sc.SETTLE_S)
    if not found:
        return work_id, None
    from recoverykit.conformance.witness import read_witness
    token = next(e.probe_token for e in read_witness(run.witness_path).executions if e.tool == EXTERNAL)
    return work_id, f"op-{token}"


def waiting(run: Run, timeout_s: float = sc.SETTLE_S) -> dict[str, Any]:
    """Observe until some work item waits on a dependency (a wait is not quiescent: reconciliation polls it), for
    at most the window ``timeout_s`` (scaled)."""
    deadline = time.monotonic() + run.window(timeout_s)
    while True:
        snap = run.observe()
        if any(w.get("reason_code") == "waiting_dependency" for w in snap.get("work_items") or []) \
                or time.monotonic() >= deadline:
            return snap
        time.sleep(0.1)


def notify(run: Run, handle: str, n: int = 1, outcome: str = "completed", version: str = "1") -> None:
    run.op("notify", notification_id=f"{handle}.n{n}", handle=handle, version=version, outcome=outcome)


def _none(clause_id: str) -> list[ClauseResult]:
    given = current()(sc.SETTLE_S)
    return [_result(clause_id, Verdict.UNKNOWN, f"the external operation never started within {given:g} s (no "
                    f"probe_external ran; {current().says(SETTLE.name, given)})")]


def drive_notify_during_restart(run: Run) -> list[ClauseResult]:
    """Waiting, the operation's status queries stop answering, a tree kill; it completes and its notification
    arrives while the runtime is down; a start: the saved result is admitted once and the work goes on."""
    start_with_external(run)
    _, handle = started(run, "wr")
    if handle is None:
        return _none("WAIT-04")
    waiting(run)
    run.external(handle, "hang")  # its status queries stop answering: only the notification can tell
    run.kill("tree_kill")
    notify(run, handle)
    run.start()
    run.settle(sc.SETTLE_S)
    return []


def drive_duplicate_notification(run: Run) -> list[ClauseResult]:
    """Waiting; a notification for an older version of the operation (stale), then the operation completes
    and its notification arrives three times (twice with one id, once with another): one continuation."""
    start_with_external(run)
    _, handle = started(run, "wd")
    if handle is None:
        return _none("WAIT-02")
    waiting(run)
    notify(run, handle, n=0, version="0")
    time.sleep(0.5)  # a runtime that takes the stale version for this one goes on now
    run.external(handle, "completed")
    for n in (1, 1, 2):
        notify(run, handle, n=n)
    run.settle(sc.SETTLE_S)
    return []


def drive_pause_then_notify(run: Run) -> list[ClauseResult]:
    """Waiting, the user pauses; the notification arrives: no model turn while paused, the result kept; the user
    resumes: the work goes on with it."""
    start_with_external(run)
    work_id, handle = started(run, "wp")
    if handle is None:
        return _none("WAIT-05")
    waiting(run)
    run.op("pause", work_id=work_id)
    run.external(handle, "completed")
    notify(run, handle)
    time.sleep(1.0)  # a stale wakeup has time to start a turn
    run.settle(sc.SETTLE_S)  # a paused item is quiescent
    run.op("resume", work_id=work_id)
    quiet, final = run.settle(sc.SETTLE_S)
    return [sc.expect_desired(final, [work_id], {"done"}, "RI-02", "after the resume of a work item whose "
                                                                   "notification arrived while it was paused", quiet)]


def drive_self_completing(run: Run) -> list[ClauseResult]:
    """No move of the kit's: the operation completes by itself a second after it started, and no notification
    comes; the runtime, waiting, finds it by reconciliation and goes on once (what chaos interrupts)."""
    start_with_external(run)
    _, handle = started(run, "ws")
    if handle is None:
        return _none("WAIT-02")
    waiting(run, timeout_s=1.0)  # while it waits (if it still does)
    run.settle(sc.SETTLE_S)
    return []


QUERIES_WANTED = 3


def drive_lost_notification(run: Run) -> list[ClauseResult]:
    """Waiting, no notification ever comes; the operation's queries hang (each times out) for a while, then it
    completes: the runtime finds it by polling with backoff, never takes a timed-out query for a stop, and
    asks the model nothing while it waits."""
    start_with_external(run)
    _, handle = started(run, "wl")
    if handle is None:
        return _none("WAIT-03")
    run.external(handle, "hang")
    deadline = time.monotonic() + run.window(sc.SETTLE_S)
    while time.monotonic() < deadline and _queries(run, handle) < QUERIES_WANTED:
        time.sleep(0.1)
    run.observe()
    run.external(handle, "completed")
    run.settle(sc.SETTLE_S)
    return []


def _queries(run: Run, handle: str) -> int:
    from recoverykit.conformance.witness import read_witness
    if not run.witness_path.exists():
        return 0
    return sum(1 for r in read_witness(run.witness_path).records if r.get("phase") == "query"
               and r.get("handle") == handle)


def needs_external(run: Run) -> str | None:
    """The scripted external operation is registered with ``start.probe_tools`` and declared with protocol 1.3."""
    if sc._speaks(run, (1, 3)):
        return None
    return f"the adapter speaks protocol {run.init_ok.protocol_version}; the external operation is protocol 1.3"
