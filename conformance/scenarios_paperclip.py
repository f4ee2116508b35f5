"""The Paperclip task-retry scenarios (profile ``paperclip_retry``, seed 001 with pull request #19759).

Part of the one catalogue: ``scenarios.py`` declares these scenarios with the drives below, so certify runs them and
the checks judge them like every other scenario. This module imports nothing of ``scenarios``
(``scenarios`` imports it).

- ``paperclip_19759``: the pull request's steps, as a named case. A task with no project fails after a restart
  (``native_session_interrupted``); the user clicks Retry; the run starts in its fresh task directory under
  ``isolated-workspace-attempts``; a restart hits it during bootstrap. Expected: re-preparation reuses that
  directory as a task directory. A second task takes the same steps, but its re-preparation fails before
  dispatch: the coordinator settles, and a later Retry creates a run.
- ``paperclip_retry``: admission. A click without board authority, a double click with one key (concurrently),
  the same key after the run completed and after it failed, and a stale observed run refused while a saved
  message waits, then another deliberate click whose run must carry it.
- ``paperclip_schedule``: the maintenance schedule, driven by the kit's clock (a restart with a larger clock
  offset), never by waiting: retries at their due times, a restart in the middle (budget and jitter kept), the
  30-minute window, exhaustion, then a new deliberate click, whose run's accepted result is held before its
  finalization while the kit restarts the runtime (RTY-25).

The kit records what it sees on disk itself (``disk.inspect``): the ``isolated-workspace-attempts`` tree and
``git worktree list`` of every repository in the data dir.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from recoverykit.conformance import disk, pacing
from recoverykit.conformance.checker import ClauseResult
from recoverykit.conformance.environment import Run
from recoverykit.conformance.pacing import TASK
from recoverykit.conformance.provider_script import script_tag

WAIT_S = TASK.seconds  # the task window (``pacing``): scaled by the run's pacing
HELD = [{"kind": "hold", "at_chunk": 0, "attempts": [1]}]
HELD2 = [{"kind": "hold", "at_chunk": 0, "attempts": [1, 2]}]  # the first run and the first Retry run
BOOTSTRAP_PAUSE = "bootstrap.before_dispatch=pause"


def _step(text: str = "done", faults: list | None = None) -> dict:
    return {"text": text, "usage": {"prompt_tokens": 20, "completion_tokens": 5}, "faults": faults or []}


def task_script(script_id: str, faults: list | None = None) -> dict:
    # one answer per run: every run of a task sends the same request (the same script step, the next attempt)
    return {"id": script_id, "usage_style": "final", "steps": [_step(f"done {script_id}", faults)],
            "when_exhausted": "repeat_last"}


def task_of(snapshot: dict[str, Any], task_id: str | None) -> dict[str, Any] | None:
    return next((t for t in snapshot.get("tasks") or [] if t["task_id"] == task_id), None)


def wait_task(run: Run, task_id: str | None, statuses: set[str], timeout_s: float = WAIT_S,
              stop: Callable[[], bool] | None = None) -> dict[str, Any] | None:
    """Observe until the task is in one of ``statuses``; the last snapshot's task (None if never).

    The wait ends early, with the task as it is, once waiting longer can change nothing the checks judge: the task
    has shown a working state for ``STUCK_S`` with its current run ended and no retry scheduled (seed 001 forbids
    that state; RTY-01 judges it, and nothing is left to move it on), its scheduled retry is due only after the wait
    would end, or ``stop()`` (a drive's own evidence that the runtime already went its own way) is true. A mutant
    runtime then costs seconds, not the whole timeout. ``timeout_s`` and ``STUCK_S`` are windows: scaled."""
    if task_id is None:  # its task_create was not acknowledged: nothing to wait for (the drive ends, unknown)
        return None
    deadline = time.monotonic() + run.window(timeout_s)
    stuck = _Stuck()
    while True:
        snap = run.observe()
        task = task_of(snap, task_id)
        now = time.monotonic()
        if (task is not None and task["status"] in statuses) or now >= deadline or (stop is not None and stop()):
            return task
        if stuck.over(snap, task) or _due_after(run, snap, task, deadline - now):
            return task
        time.sleep(0.05)


STUCK_S = 4.0  # how long a task may show a working state over an ended run before the drive stops waiting for it


class _Stuck:
    """How long, across one wait's polls, a task has shown a working state over an ended run with nothing scheduled."""

    def __init__(self) -> None:
        self.since: float | None = None

    def over(self, snap: dict[str, Any], task: dict[str, Any] | None) -> bool:
        """True once the task has shown that state for ``STUCK_S`` without a break."""
        now = time.monotonic()
        self.since = (self.since or now) if _working_with_nothing_running(snap, task) else None
        return self.since is not None and now - self.since >= pacing.current()(STUCK_S)


def _holds(run: Run, point: str) -> Callable[[], bool] | None:
    """A ``stop`` for the waits: whether the kit's broker holds a process at ``point`` now (None without a broker)."""
    if run.broker is None:
        return None
    broker = run.broker
    return lambda: any(h.point == point for h in broker.held())


def _due_after(run: Run, snap: dict[str, Any], task: dict[str, Any] | None, left_s: float) -> bool:
    """The task waits for a scheduled retry that is due (on the runtime's clock: now plus the kit's offset) only
    after the wait would end: nothing moves it before then, since the kit's clock moves only when the drive says."""
    if task is None or task["status"] != "retry_scheduled":
        return False
    due = [e["due_at"] for e in snap.get("retry_schedule") or []
           if e["task_id"] == task["task_id"] and e["state"] == "scheduled"]
    return bool(due) and min(due) > time.time() + run.clock_offset_s + left_s + 1.0


def _working_with_nothing_running(snap: dict[str, Any], task: dict[str, Any] | None) -> bool:
    if task is None or task["status"] != "working" or _scheduled(snap, task["task_id"]):
        return False
    current = next((r for r in snap.get("runs") or [] if r["run_id"] == task.get("current_run")), None)
    return current is not None and current["status"] in ("succeeded", "failed", "cancelled")


def wait_run(run: Run, run_id: str, statuses: set[str], timeout_s: float = WAIT_S) -> None:
    """Observe until the run is in one of ``statuses`` (or the window ``timeout_s``, scaled, is up)."""
    deadline = time.monotonic() + run.window(timeout_s)
    while time.monotonic() < deadline:
        if any(r["run_id"] == run_id and r["status"] in statuses for r in run.observe().get("runs") or []):
            return
        time.sleep(0.05)


def create(run: Run, script_id: str, project: str | None = None,
           retry_limit: int | None = None) -> tuple[str | None, str | None]:
    out = run.op("task_create", project=project, text=f"{script_tag(script_id)} work on the task",
                 retry_limit=retry_limit)
    return (out.reply.task_id, out.reply.run_id) if out.ok else (None, None)


def retry(run: Run, task_id: str | None, key: str, observed: str | None, authority: str = "board"):
    return run.op("retry", work_id=task_id, idempotency_key=key, observed_run_id=observed or "none",
                  authority=authority)


def fail_after_restart(run: Run, *scripts: str, failpoints: str = "",
                       release: bool = True) -> list[tuple[str | None, str | None]]:
    """Tasks with no project whose first runs are in flight at the provider when the runtime is killed: after
    the restart each has failed (``native_session_interrupted``) and offers Retry. ``release``: later holds of
    the scripts are released as soon as they are reached (else the drive releases them itself)."""
    made = [create(run, s) for s in scripts]
    if any(task_id is None for task_id, _ in made):
        return made  # a task_create not acknowledged (refused, or its reply lost): the drive ends, unknown
    for s in scripts:
        run.wait_held(WAIT_S, script_id=s)
    run.kill("tree_kill")
    run.provider.release(cut=True)
    if release:
        run.provider.auto_release()
    run.start(failpoints=failpoints)
    # (succeeded, or a run held at bootstrap before any click: a runtime that went on without a Retry, which
    # RTY-34 and RTY-39 judge; waiting longer shows nothing more)
    went_on = _holds(run, "bootstrap.before_dispatch")
    for task_id, _ in made:
        wait_task(run, task_id, {"retry_offered", "retry_scheduled", "succeeded"}, stop=went_on)
    return made


def drive_19759(run: Run) -> list[ClauseResult]:
    run.start()
    (ta, ra), (tb, rb) = fail_after_restart(run, "p19a", "p19b", failpoints=f"{BOOTSTRAP_PAUSE};{LOST_REPLY}")
    if None in (ta, tb):
        return []  # a task the kit has no id of cannot be driven: its clauses stay unknown
    # task b's click is held after its receipt (LOST_REPLY) and its reply is lost to the restart below: the kit
    # sends the same key again after it, and the runtime must reconcile it (RTY-37)
    cut = threading.Thread(target=_quiet, args=(retry, run, tb, "k19759-b1", rb), daemon=True)
    cut.start()
    if run.broker is None:
        return []
    try:
        run.wait_hit("retry.receipt.after", WAIT_S, held=True)
    except Exception:
        return []  # the checks judge what happened
    click = retry(run, ta, "k19759-a1", ra)  # (its answer also wakes the workers for task b's run)
    if not (click.ok and click.reply.run_id):
        return []  # a refused click leaves the clauses unknown
    deadline = time.monotonic() + run.window(WAIT_S)  # both Retry runs bootstrap (two workers), held before dispatch
    while time.monotonic() < deadline and len([h for h in run.broker.held()
                                               if h.point == "bootstrap.before_dispatch"]) < 2:
        time.sleep(0.02)
    run.op("task_fault", task_id=tb, fault="prepare_fails", error_code="workspace_validation_failed", count=1)
    # messages saved while both runs bootstrap: each is for its task's next execution start, task b's after its
    # failed re-preparation (a claim or a preparation is no execution start; RTY-23)
    run.op("task_message", task_id=ta, text=saved_text("p19a"))
    run.op("task_message", task_id=tb, text=saved_text("p19b"))
    run.observe()
    disk.inspect(run, "bootstrap")
    run.kill("tree_kill")  # the restart during bootstrap
    cut.join(run.window(WAIT_S))
    run.start(failpoints=SETTLE_PAUSE)
    retry(run, tb, "k19759-b1", rb)  # the click whose reply was lost, sent again with its key
    wait_task(run, ta, {"succeeded", "retry_offered", "retry_scheduled"})
    task_b = wait_task(run, tb, {"retry_offered", "retry_scheduled", "succeeded"})
    disk.inspect(run, "recovered")
    failed_run = next((r for r in run.observe().get("runs") or [] if r["run_id"] == (task_b or {}).get("current_run")),
                      None)
    disk.plant(run, (failed_run or {}).get("workspace"), "agent work")  # the failed run's uncommitted work (RTY-08)
    # the later Retry comes while the claim is still settling (held at coordinator.settle.before): the run's
    # execution is not known yet, so the click is held (deferred, RTY-24); the settlement must then wake it into a
    # run (RTY-14). Not waited for long: a runtime that never settles never reaches the point
    settling = _held(run, "coordinator.settle.before", 5.0)
    later = retry(run, tb, "k19759-b2", (task_b or {}).get("current_run"))
    run.observe()
    if settling and run.broker is not None:
        run.broker.release(point="coordinator.settle.before")
    if later.ok:
        wait_task(run, tb, {"succeeded"}, timeout_s=5.0)
    run.settle(WAIT_S)
    disk.inspect(run, "end")
    return []


LOST_REPLY = "retry.receipt.after=1*pause"  # the first click is held after its receipt
SETTLE_PAUSE = "coordinator.settle.before=1*pause"  # the failed re-preparation's settlement waits for the kit


def saved_text(tag: str) -> str:
    """A message the user saves on a task: short (the ledger keeps a message's first 160 characters) and unique."""
    return f"saved follow-up {tag}: keep the notes"


def _held(run: Run, point: str, timeout_s: float) -> bool:
    try:
        return run.broker is not None and bool(run.wait_hit(point, timeout_s, held=True))
    except Exception:
        return False


def _quiet(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:  # a request cut by the kill: its completion is already recorded as unknown
        return


def drive_retry_admission(run: Run) -> list[ClauseResult]:
    run.start()
    # both tasks' first runs fail after a restart; the Retry run of "prb" fails too (the kit's environment fault);
    # the Retry run of "pra" is held at the provider while the clicks arrive (accepted work, still running)
    (ta, ra), (tb, rb) = fail_after_restart(run, "pra", "prb", release=False)
    if None in (ta, tb):
        return []
    run.op("task_fault", task_id=tb, fault="run_fails", error_code="native_session_interrupted", count=1)
    # a click that would be admitted but for its caller, who lacks board task-mutation authority (RTY-03)
    retry(run, tb, "kpb-0", rb, authority="none")
    run.observe()
    # a double click with one key and a click with another key, concurrently
    replies: list[Any] = []
    threads = [threading.Thread(target=lambda k=k: replies.append(retry(run, ta, k, ra)))
               for k in ("kpa-1", "kpa-1", "kpa-1b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.observe()
    run.wait_held(WAIT_S, script_id="pra")
    run.provider.auto_release()
    run.provider.release()
    wait_task(run, ta, {"succeeded", "retry_offered"})
    first = next((r.reply.run_id for r in replies if r.ok), None)
    retry(run, ta, "kpa-1", first)  # the same key after its run completed
    run.op("task_message", task_id=ta, text=saved_text("pra"))  # saved, then a refused click (RTY-17)
    retry(run, ta, "kpa-2", ra)  # a stale observed run: the task's current run is the Retry's
    again = retry(run, ta, "kpa-3", first)  # another deliberate Retry: its run must carry the saved message
    if again.ok and again.reply.run_id:
        wait_run(run, again.reply.run_id, {"succeeded", "failed"})
    second = retry(run, tb, "kpb-1", rb)  # its run fails (the fault's second hit)
    wait_task(run, tb, {"retry_offered"})
    retry(run, tb, "kpb-1", second.reply.run_id if second.ok else rb)  # the same key after its run failed
    run.settle(WAIT_S)
    return []


STRICTER_LIMIT = 1  # one retry, where the maintenance policy allows five
SCHEDULE_JUMPS_S = (40.0, 80.0, 160.0, 1600.0)  # past retries 1, 2 and 3; the last beyond the 30-minute window


def _scheduled(snap: dict[str, Any], task_id: str | None) -> set[tuple[int, int, float]]:
    return {(e["generation"], e["attempt"], e["due_at"]) for e in snap.get("retry_schedule") or []
            if e["task_id"] == task_id and e["state"] == "scheduled"}


def wait_rescheduled(run: Run, task_id: str | None, before: set, timeout_s: float = WAIT_S,
                     stop: Callable[[], bool] | None = None) -> None:
    """Observe until the task has a scheduled retry it did not have before, or offers Retry (or, as in
    ``wait_task``, waiting longer can show nothing more)."""
    if task_id is None:
        return
    deadline = time.monotonic() + run.window(timeout_s)
    stuck = _Stuck()
    while time.monotonic() < deadline:
        snap = run.observe()
        task = task_of(snap, task_id)
        if (task or {}).get("status") == "retry_offered" or _scheduled(snap, task_id) - before or (stop and stop()):
            return
        if stuck.over(snap, task):
            return  # (as in wait_task)
        time.sleep(0.05)


def drive_schedule(run: Run) -> list[ClauseResult]:
    """The provider answers 503 (a temporary fault the maintenance policy retries) to every run until the
    deliberate click after exhaustion."""
    run.start()
    task_id, _ = create(run, "psc")
    limited, _ = create(run, "psl", retry_limit=STRICTER_LIMIT)  # beside it: a stricter limit of its own (RTY-31)
    if None in (task_id, limited):
        return []
    wait_rescheduled(run, task_id, set())
    wait_rescheduled(run, limited, set())  # (its first failure, not a kill, must end its first run)
    run.kill("tree_kill")  # a restart in the middle of the schedule: budget and jitter must stay
    run.start()
    before = _scheduled(run.observe(), task_id)
    # a run held at its finalization before the click below: one the runtime started by itself and the provider
    # answered (every scheduled run gets a 503), so waiting longer shows nothing more
    finalizing = _holds(run, "run.finalize.before")
    for n, jump in enumerate(SCHEDULE_JUMPS_S):  # the kit's clock moves; the runtime reads it at its next start
        before_limited = _scheduled(run.observe(), limited)
        run.clock_jump(jump)
        run.kill("tree_kill")
        run.start(failpoints=FINALIZE_PAUSE if n == len(SCHEDULE_JUMPS_S) - 1 else None)  # (armed for the click)
        wait_rescheduled(run, task_id, before, stop=finalizing)
        wait_rescheduled(run, limited, before_limited, stop=finalizing)  # its fired retry ends before the next kill
        before = _scheduled(run.observe(), task_id)
    task = wait_task(run, task_id, {"retry_offered"}, stop=finalizing)
    click = retry(run, task_id, "kps-1", (task or {}).get("current_run"))  # a new deliberate click after exhaustion
    if click.ok and click.reply.run_id:
        # its run's result is accepted and held before its finalization: a restart there; the restarted runtime
        # must hand that result to its finalizer, never ask the provider again (RTY-25, RTY-15)
        if _held(run, "run.finalize.before", WAIT_S):
            run.observe()
            run.kill("tree_kill")
            run.start(failpoints="")
        wait_task(run, task_id, {"succeeded", "retry_offered", "retry_scheduled"})
    run.kill("tree_kill")  # a restart after the task completed: its old failed runs reopen nothing (RTY-35)
    run.start()
    run.settle(WAIT_S)
    return []


FINALIZE_PAUSE = "run.finalize.before=1*pause"  # the first accepted result waits for the kit before its finalizer


COOLDOWN_S = 900.0  # longer than the second retry's 60 s (±20 %)


def drive_cooldown(run: Run) -> list[ClauseResult]:
    """A provider cooldown longer than the backoff: the first run's stream is cut (a temporary fault: retry 1 in
    30 s); retry 1 fails with a 900 s cooldown (the kit's environment fault); retry 2 must wait for it. Then the
    user clicks Retry while retry 2 waits: the click attaches to the automatic recovery."""
    run.start()
    task_id, _ = create(run, "pcd")
    if task_id is None:
        return []
    run.wait_held(WAIT_S, script_id="pcd")
    run.op("task_fault", task_id=task_id, fault="run_fails", error_code="provider_rate_limited",
           cooldown_s=COOLDOWN_S, count=1)
    run.provider.release(cut=True)  # no auto_release here: a release racing it could undo the cut
    wait_rescheduled(run, task_id, set())
    before = _scheduled(run.observe(), task_id)
    run.clock_jump(40.0)
    run.kill("tree_kill")
    run.start()
    wait_rescheduled(run, task_id, before)
    # the user clicks Retry while the cooldown's retry is scheduled: the click attaches to automatic recovery
    task = task_of(run.observe(), task_id)
    click = retry(run, task_id, "kpc-1", (task or {}).get("current_run"))
    if click.ok and click.reply.run_id:
        wait_task(run, task_id, {"succeeded", "retry_offered", "retry_scheduled"})
    run.settle(WAIT_S)
    return []


CHAOS_POINTS = ("retry.receipt.before", "retry.receipt.after", "workspace.prepare.before", "workspace.prepare.after",
                "bootstrap.before_dispatch", "run.finalize.before")
SETTLE_POINTS = ("coordinator.settle.before", "coordinator.settle.after")  # reached only after the kit's restart


def _env_wait(env: Any, task_id: str, statuses: set[str], timeout_s: float = 10.0) -> dict[str, Any] | None:
    """The task once in one of ``statuses`` (None after the window ``timeout_s``, scaled by the current pacing)."""
    deadline = time.monotonic() + pacing.current()(timeout_s)
    while time.monotonic() < deadline:
        try:
            task = task_of(env.observe(), task_id)
        except Exception:  # the runtime is down between a kill and its restart: look again
            task = None
        if task is not None and task["status"] in statuses:
            return task
        time.sleep(0.05)
    return None


def _env_click(env: Any, task_id: str, key: str, observed: str | None, timeout_s: float = 10.0) -> Any:
    """A click that a failpoint may hold: sent asynchronously, its reply awaited (None if cut by the kill)."""
    pending = env.request_async("retry", work_id=task_id, idempotency_key=key, observed_run_id=observed or "none")
    pending.join(pacing.current()(timeout_s))
    return pending.result.get("reply")


def chaos_kick_19759(env: Any) -> None:
    """How a chaos case starts the #19759 case: a task with no project whose first run completes; its first
    Retry run fails at dispatch (the kit's fault), so its second Retry reuses that run's task directory. The
    points of the Retry path (receipt, preparation: a fresh attempt, then a reuse; bootstrap) are reached, and the
    case's kill at any of them is followed by a restart that must re-prepare in the bound directory. Stops at the
    first failed step: the kill ends the drive, the recovery is what is judged."""
    try:
        made = env.request("task_create", project=None, text=f"chaos {script_tag('p19a')} work on the task")
        task = _env_wait(env, made.task_id, {"succeeded", "retry_offered"})
        if task is None:
            return
        env.request("task_fault", task_id=made.task_id, fault="run_fails", error_code="native_session_interrupted",
                    count=1)
        first = _env_click(env, made.task_id, "kc-1", task["current_run"])
        if first is None or not first.run_id:
            return
        task = _env_wait(env, made.task_id, {"retry_offered"})
        if task is not None:
            _env_click(env, made.task_id, "kc-2", task["current_run"])
    except Exception:
        return


def chaos_restart_19759(env: Any, spec: str) -> None:
    """How a chaos case reaches #19759's settlement (``SETTLE_POINTS``), with the runtime started with the bootstrap
    pause armed: a task with no project whose first run is held at bootstrap; its preparation made to fail once (the
    kit's environment fault); a restart by the kit during bootstrap; the runtime started again with ``spec`` (the
    case's pause) armed. The restarted runtime claims the run (``bootstrap_incomplete``), its re-preparation fails,
    and the claimed coordinator settles: the case's point. After the case's own kill and restart, a Retry of the
    failed run must create a run (RTY-14). Stops at the first failed step."""
    try:
        made = env.request("task_create", project=None, text=f"chaos {script_tag('p19b')} work on the task")
        env.broker.wait_for_hit("bootstrap.before_dispatch", timeout=pacing.current()(10.0), held=True)
        env.request("task_fault", task_id=made.task_id, fault="prepare_fails", error_code="workspace_validation_failed",
                    count=1)
        env.observe()  # the kit sees the run bootstrapping, its workspace bound, just before the restart
        env.kit_restart(spec)  # the restart during bootstrap
        task = _env_wait(env, made.task_id, {"retry_offered", "retry_scheduled"}, timeout_s=WAIT_S * 2)
        if task is None:
            return
        failed = task["current_run"]
        # a click held by the paused runtime is cut by the case's kill: the same key is sent again once the runtime
        # is back (the same click, RTY-04: it creates the run if the first never landed, else attaches to it)
        cut = _env_click(env, made.task_id, "kc-s1", failed, timeout_s=4.0) is None
        env.kick_ready.set()  # the click made while the settlement is held: the case may kill now
        for _ in range(5):  # sent while the runtime is still down, it is refused (not running): send it again
            if not cut or _env_wait(env, made.task_id, {"retry_offered", "retry_scheduled", "working", "succeeded"},
                                    timeout_s=WAIT_S) is None:
                break
            cut = _env_click(env, made.task_id, "kc-s1", failed, timeout_s=WAIT_S) is None
            time.sleep(0.5 if cut else 0)
        _env_wait(env, made.task_id, {"succeeded", "retry_offered"}, timeout_s=WAIT_S)
    except Exception:
        return
    finally:
        env.kick_ready.set()  # never leave the case waiting for a kick that stopped early
