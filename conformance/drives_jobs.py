"""The drive of the background-Job scenario (profile ``jobs``), declared in ``scenarios.SCENARIOS``.

A caller's request starts a Job from another session (``job_start``): two authorized subtasks under a quota of
one. Each subtask's model first calls a read-only probe, then answers with a text of its own (the kit's script),
which the runtime must deliver to the Job once; the Job then asks the model once. The first subtask's second
request is held, the whole runtime killed there, and the recovered request held again for a while, so a runtime
that forgot the quota or authorized the subtask anew across the restart shows it on the provider's wire. What
followed is judged by ``checks_jobs``.
"""

from __future__ import annotations

import time
from typing import Any

from recoverykit.conformance import scenarios as sc
from recoverykit.conformance.checker import ClauseResult, _result
from recoverykit.conformance.environment import Run
from recoverykit.conformance.provider_script import script_tag
from recoverykit.model.catalogue import Verdict

CALLER, JOB, SUBTASKS = "jc", "jp", ("jb1", "jb2")
JOB_SESSION = "s-job"
QUOTA_WATCH_S = 1.0  # while the recovered subtask is held: a runtime that lost the quota starts the next one now
# chaos kills while a result is delivered to the Job, and while a subtask's or the Job's model answers
CHAOS_POINTS = ("child.delivery.before", "child.delivery.after", "provider.request.inflight")
HOLD_1_2 = [{"kind": "hold", "at_chunk": 0, "attempts": [1, 2]}]


def result_text(script_id: str) -> str:
    """What the kit's model answers a subtask: the text the Job must be given once."""
    return f"result of subtask {script_id}"


def scripts() -> tuple[dict, ...]:
    def subtask(sid: str, faults: list | None = None) -> dict:
        return sc.script(sid, sc.tool_step("probe_read"), sc.text_step(result_text(sid), faults), usage="final")
    return (sc.script(CALLER, sc.text_step("started a background job"), sc.text_step("something else"),
                      usage="final"),
            sc.script(JOB, sc.text_step("the job is done"), usage="final"),
            subtask(SUBTASKS[0], HOLD_1_2), subtask(SUBTASKS[1]))


def drive_job_restart(run: Run) -> list[ClauseResult]:
    """The caller's request, then another in its session (the Job must keep the first one's provenance), the Job
    from another session; a tree kill while the first subtask's answer is in flight; after the start its recovered
    request is held a second: the second subtask must not start meanwhile (quota one), nor the first again."""
    run.start()
    caller = sc.submit(run, CALLER)
    sc.submit(run, CALLER, n=2)  # the caller's session goes on: its newest request is not the Job's caller
    if caller is None:
        return [_result("JOB-02", Verdict.UNKNOWN, "the caller's request was not acknowledged")]
    out = run.op("job_start", caller_work_id=caller, session_id=JOB_SESSION, text=f"{script_tag(JOB)} collect",
                 subtasks=[f"{script_tag(s)} subtask" for s in SUBTASKS], concurrency=1, client_job_id="job-1")
    if not out.ok:
        return [_result("JOB-01", Verdict.UNKNOWN, f"job_start was not acknowledged ({out.error})")]
    run.wait_held(sc.SETTLE_S, script_id=SUBTASKS[0], step=1)
    run.observe()
    run.kill("tree_kill")
    run.provider.release(cut=True)
    run.start()
    again = run.wait_held(sc.SETTLE_S, script_id=SUBTASKS[0], step=1)
    time.sleep(QUOTA_WATCH_S)
    run.provider.release(again)
    quiet, final = run.settle(sc.SETTLE_S)
    return [sc.expect_desired(final, [out.reply.job_id], {"done"}, "RI-02", "after the Job's subtasks finished",
                              quiet)]


def chaos_kick(env: Any) -> None:
    """How a chaos case starts the Job: the caller's request, then the Job from another session (its scripts
    without the drive's holds). Stops at the first failed step: the kill ends the drive, the recovery is judged."""
    try:
        caller = env.request("submit", session_id=f"s-{CALLER}", text=f"{script_tag(CALLER)} request 1",
                             client_msg_id=f"c-{CALLER}-1")
        env.request("job_start", caller_work_id=caller.work_id, session_id=JOB_SESSION,
                    text=f"{script_tag(JOB)} collect", subtasks=[f"{script_tag(s)} subtask" for s in SUBTASKS],
                    concurrency=1, client_job_id="job-1")
        env.request("submit", session_id=f"s-{CALLER}", text=f"{script_tag(CALLER)} request 2",
                    client_msg_id=f"c-{CALLER}-2")
    except Exception:
        return
