"""Running one chaos case: start, run to the point, interrupt, restart, recover, verify.

The pipeline of one case, in order (etcd's robustness tests read the same way):

1. environment: private run dir, scripted provider (with the case's hold), broker, probe tools, adapter;
2. start the runtime armed at the case's point (``k-1*off->1*pause`` for hit k) and submit the input;
3. wait until the runtime is held there (broker report, provider hold, live probe, held probe);
4. observe (the pre-fault state the model predicts from), take the scenario's user action if any;
5. perform the restart kind (``restarts``), release what is still held, wait for quiescence, observe;
6. verify: the history checker on the kit's own evidence, plus the model's prediction of the
   post-restart state (``prediction``); reap every process of the case and report any leftover.

A case whose point is never reached ends ``not_reached`` (unknown, never a pass); one whose kill
killed nothing ends ``error`` (unknown: ``restarts.NothingKilled``); one whose adapter listed a pid
outside the run for the kit to kill ends ``failed`` (invalid, ``refused``) with nothing signalled. A failing case keeps
its run dir and leaves a bundle with the command that replays it.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from recoverykit.chaos import bundle as bundles
from recoverykit.chaos import restarts
from recoverykit.chaos.case_env import DEFAULT_ADAPTER, CaseEnv
from recoverykit.chaos.cases import Case, not_implemented_reason
from recoverykit.chaos.prediction import check_prediction
from recoverykit.conformance import disk
from recoverykit.conformance.broker import FailpointNotHit
from recoverykit.conformance.checker import ClauseResult, Evidence, check
from recoverykit.conformance.errors import AdapterTimeout, OperationFailed, ProtocolError, RefusedProcess
from recoverykit.conformance.pacing import CHAOS_GRACE, CHAOS_POINT, CHAOS_QUIESCE, QUIET_GRACE
from recoverykit.conformance.provider import ProviderTimeout
from recoverykit.conformance.provider_script import script_tag
from recoverykit.conformance.scenarios import scenario_named
from recoverykit.model.catalogue import POINTS_BY_NAME, RECOVERY_POINTS, Reach, Verdict, combine
from recoverykit.model.errors import RecoveryKitError

QUIESCE_S = CHAOS_QUIESCE.seconds  # the windows here are bases: each case scales them (``env.pacing``)
NEVER_UP_LIMIT = 2  # consecutive cases whose adapter never answered init or start: later ones are not run
_NEVER_UP: dict[str, int] = {}  # per adapter command, in this process (the in-process run, or one xdist worker)
DURING_GRACE_S = CHAOS_GRACE.seconds  # a user action during the fault not answered by then stays in flight across it
QUIET_GRACE_S = QUIET_GRACE.seconds  # how long a quiet runtime still gets to report the point before it is unreached


def arm(case: Case) -> str:
    """The failpoint spec that pauses the case's point at its hit (runtime points; a recovery point is
    armed only for the start after the first crash, ``arm_recovery``). A scenario that counts hits per work item
    (``Chaos.item_hits``) pauses every hit, and the broker holds only the item's k-th (``hold_by_item``)."""
    if POINTS_BY_NAME[case.point].reach is not Reach.RUNTIME or case.point in RECOVERY_POINTS:
        return ""
    if scenario_named(case.scenario).chaos.item_hits:
        return f"{case.point}=pause"
    return _pause_at(case.point, case.hit)


def hold_by_item(env: CaseEnv, case: Case) -> None:
    """Under ``Chaos.item_hits`` the case's hit is the k-th pass of a work item in any process: the broker decides."""
    if scenario_named(case.scenario).chaos.item_hits and POINTS_BY_NAME[case.point].reach is Reach.RUNTIME:
        env.broker.hold_nth(case.point, case.hit)


def arm_recovery(case: Case) -> str:
    return _pause_at(case.point, case.hit)


def _pause_at(point: str, hit: int) -> str:
    return f"{point}={hit - 1}*off->1*pause" if hit > 1 else f"{point}=1*pause"


KICK_READY_S = CHAOS_GRACE.seconds  # how long a restart-kick case waits for the kick's action while held, then kills

def kick(env: CaseEnv, start: Any) -> None:
    """Run a scenario's own start (``Chaos.kick``) in a thread the case waits for like a pending submit."""
    thread = threading.Thread(target=start, args=(env,), daemon=True, name="chaos-kick")
    thread.result = {}  # type: ignore[attr-defined]
    thread.start()
    env._pending.append((None, None, thread))  # type: ignore[attr-defined]


def replay_command(case: Case, adapter: str | list[str] | None) -> str:
    cmd = ["recoverykit", "chaos", "--replay", case.id]
    if adapter is not None and list(adapter if isinstance(adapter, list) else [adapter]) != DEFAULT_ADAPTER:
        cmd += ["--adapter", adapter if isinstance(adapter, str) else shlex.join(adapter)]
    return shlex.join(cmd)


def _wait_reached(env: CaseEnv, case: Case, timeout: float) -> dict[str, Any] | None:
    """Block until the run is held at the case's point; what was seen there, or None if never."""
    point, deadline = case.point, time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if point in ("provider.request.inflight", "provider.response.midstream") and point not in RECOVERY_POINTS:
                held = env.provider.wait_for_held(0.5, step=case.hit - 1)
                return {"via": "provider hold", "request_id": held.request_id, "at_chunk": held.at_chunk}
            if point == "tool.running":
                running = [e for e in env.witness().executions if not e.done and e.alive()]
                if running:
                    return {"via": "live probe", "pid": running[0].pid, "probe_token": running[0].probe_token}
                time.sleep(0.02)
            else:
                hit = env.broker.wait_for_hit(point, timeout=0.5, held=True)
                return {"via": "failpoint", "pid": hit.pid, "hit": hit.item_pass or hit.hit, "work_id": hit.work_id,
                        **({"detail": hit.detail} if hit.detail else {})}
        except (FailpointNotHit, ProviderTimeout):
            pass
        submits_done = all("reply" in t.result or not t.is_alive() for _, _, t in env._pending)  # type: ignore
        if submits_done and env.quiesce(0.1):
            # a point after a commit (completion.commit.before_projection) is hit just after the work looks
            # finished: give the report time to arrive before calling the point unreached
            deadline = min(deadline, time.monotonic() + env.pacing(QUIET_GRACE_S))
    return None


def _not_reached_why(env: CaseEnv, case: Case, timeout: float) -> str:
    """Why a case is unknown: the point, and what the environment saw instead (for the bundle's reader)."""
    seen = [f"{h.point}#{h.hit} pid {h.pid}" + ("" if h.held else " (not held)") for h in env.broker.hits()]
    held = [f"{h.script_id} step {h.step}" for h in env.provider.held()]
    return (f"{case.point} hit {case.hit} was never reached (waited up to {timeout:g} s, or until the runtime "
            f"went quiet; {env.pacing.says(CHAOS_POINT.name, timeout)}): unknown, not a pass; failpoint reports: "
            f"{', '.join(seen) or 'none'}; provider "
            f"requests still held: {', '.join(held) or 'none'}")


def _declared_out(case: Case, init_ok: Any, result: dict[str, Any]) -> bool:
    """True (and the result says why) when the adapter's declaration rules the case out."""
    why = not_implemented_reason(case, init_ok.failpoints, [k.value for k in init_ok.restart_kinds],
                                 [p.value for p in init_ok.profiles])
    if why is not None:
        result.update(status="not_implemented", why=why)
    return why is not None


def _during(env: CaseEnv, action: str, work_ids: list[str], scenario_name: str) -> list[tuple[str, threading.Thread]]:
    """The user acts while the runtime is held at the point: Pause / End / new input must take priority.

    Each action is sent at once and gets ``DURING_GRACE_S`` to answer; one still unanswered then stays in flight
    across the restart and is joined with the other pending calls after it. The hold can block a control no real
    crash would: a runtime held before a commit keeps the store's write lock (a durable-write point), which only
    the kill releases, as a real crash releases it within milliseconds. Returns (work_id, call) per action."""
    sent: list[tuple[str, threading.Thread]] = []
    for work_id in work_ids:
        if action in ("pause", "end"):
            sent.append((work_id, env.request_async(action, work_id=work_id)))
    if action == "input":  # into the first session, tagged with its script, as the first input was
        session = scenario_named(scenario_name).sessions[0]
        sent.append(("", env.request_async("submit", session_id=f"{scenario_name}-{session}",
                                           client_msg_id="during-1",
                                           text="new input during recovery " + script_tag(session))))
    deadline = time.monotonic() + env.pacing(DURING_GRACE_S)
    for _, call in sent:
        call.join(max(0.0, deadline - time.monotonic()))
    return sent


def _during_outcome(sent: list[tuple[str, threading.Thread]], before: dict[str, Any]) -> None:
    """Raise what makes the case unknown: a user action still unanswered after the restart, or one the runtime
    refused. The only refusal that proves nothing wrong is ``precondition_failed`` for work that was already over
    (done or cancelled) when the user acted: the point held lay after the work's last step."""
    over = {i["work_id"] for i in before.get("work_items") or [] if i.get("desired_state") in ("done", "cancelled")}
    for work_id, call in sent:
        if not work_id:  # new input: the checker judges an input refused or cut by the fault from the history
            continue
        error = call.result.get("error")  # type: ignore[attr-defined]
        if error is None and "reply" not in call.result:  # type: ignore[attr-defined]
            raise AdapterTimeout("the user's action during the fault had no reply after the restart; its outcome "
                                 "is unknown", doc="docs/protocol.md#transport")
        if isinstance(error, OperationFailed) and error.definite and error.code == "precondition_failed" \
                and work_id in over:
            continue
        if error is not None:
            raise error


def run_case(case: Case, adapter: str | list[str] | None = None, *, base_dir: str | Path | None = None,
             bundle_dir: str | Path | None = None, timeout_s: float = 20.0, keep: bool = False,
             seed: int = 0) -> dict[str, Any]:
    """Run one case; a JSON-ready result (status, verdict, clause results, timings, leftovers)."""
    scenario = scenario_named(case.scenario)
    result: dict[str, Any] = {**case.as_dict(), "status": "error", "verdict": Verdict.UNKNOWN.value,
                              "clauses": [], "violations": [], "reached": None, "replay": replay_command(case, adapter)}
    key = repr(adapter)
    if _NEVER_UP.get(key, 0) >= NEVER_UP_LIMIT:  # the adapter's runtime never came up: do not wait for it again
        result.update(why=f"not run: the adapter's runtime did not come up (no reply to init or start) in the last "
                          f"{_NEVER_UP[key]} cases of this process; the case is unknown", leftovers=[], timings={})
        return result
    t0 = time.monotonic()
    env = CaseEnv(adapter, scenario.provider_script(case.point, case.hit, chaos=True), base_dir=base_dir,
                  timeout_s=timeout_s)
    timeout_s, quiesce_s = env.timeout_s, env.pacing(QUIESCE_S)  # the case's windows, scaled
    timings: dict[str, float] = {}
    try:
        try:
            init_ok = env.start()
            result["adapter"] = {"name": init_ok.name, "version": init_ok.version, "warm_spare": env.warm}
            if _declared_out(case, init_ok, result):
                return result
            late = case.point in scenario.chaos.restart_points  # reached only after the kit's own restart
            hold_by_item(env, case)
            env.start_runtime(failpoints=scenario.chaos.restart_first if late else arm(case))
        except AdapterTimeout:  # silence on init or start: count it, so a runtime that never starts ends the run soon
            _NEVER_UP[key] = _NEVER_UP.get(key, 0) + 1
            raise
        _NEVER_UP[key] = 0
        timings["started"] = time.monotonic() - t0
        if late and scenario.chaos.restart_kick is not None:
            restart_kick = scenario.chaos.restart_kick
            kick(env, lambda e: restart_kick(e, arm(case)))
        elif scenario.chaos.kick is not None:  # the scenario starts its own work (Paperclip tasks)
            kick(env, scenario.chaos.kick)
        else:
            for session in scenario.sessions:
                kind, fields = scenario.open_request(session, f"{case.scenario}-{session}", f"{session}-1",
                                                     f"chaos {case.id} {script_tag(scenario.script_id(session))}")
                env.request_async(kind, **fields)
        if case.point in RECOVERY_POINTS:  # the first crash, so that there is something to recover
            env.provider.wait_for_held(timeout_s)
            restarts.tree_kill(env, "tree_kill")
            env.release_holds(cut_provider=True)
            # The hold was only there to crash with a request in flight. Every session's script holds its
            # first request, so a session not served before the crash would be held now, keeping a worker
            # busy while the recovering item waits for one: answer the provider at once from here on.
            env.auto_release(broker=False)
            env.start_runtime(failpoints=arm_recovery(case))
        reached = _wait_reached(env, case, timeout_s)
        timings["reached"] = time.monotonic() - t0
        result["reached"] = reached
        if reached is None:
            result.update(status="not_reached", why=_not_reached_why(env, case, timeout_s))
            env.auto_release()
            return result
        before = env.observe()
        during: list[tuple[str, threading.Thread]] = []
        if scenario.during:
            acked = [d.value["work_id"] for i, d in env.recorder.history.completions()
                     if i.f in ("submit", "goal_create") and d is not None and d.type == "ok"]
            during = _during(env, scenario.during, acked, case.scenario)
        if late and scenario.chaos.restart_kick is not None:
            env.kick_ready.wait(env.pacing(KICK_READY_S))  # the kick's action while held first: the kill finds it
        outcome = restarts.perform(env, case, scenario.double_start)
        result["second_reached"] = outcome.second_reached
        result["killed"] = outcome.killed
        env.auto_release()
        timings["restarted"] = time.monotonic() - t0
        env.wait_pending()  # a submit released by the restart must land before quiescence means anything
        _during_outcome(during, before)
        quiescent = env.quiesce(quiesce_s)
        with_suppress_timeout(env)
        if env.observe(quiescent).get("workspaces") is not None:  # task workspaces: the kit looks at the disk
            disk.inspect(env, "recovered")
        timings["recovered"] = time.monotonic() - t0
        evidence = Evidence(history=env.recorder.history, ledger=env.provider.records(), witness=env.witness(),
                            observes=frozenset(s.value for s in init_ok.observes))
        clauses: list[ClauseResult] = check(evidence)
        clauses += check_prediction(before, env.recorder.history, case, scenario.during)
        verdict = combine([c.verdict for c in clauses])
        result["clauses"] = [_compact(c) for c in clauses]
        result["violations"] = [c.text for c in clauses if c.verdict is Verdict.INVALID]
        result["verdict"] = Verdict.INVALID.value if result["violations"] else Verdict.VALID.value
        result["status"] = "failed" if verdict is Verdict.INVALID else "passed"
        if not quiescent:
            result["why"] = (f"not quiescent within {quiesce_s:g} s after the restart "
                             f"({env.pacing.says(CHAOS_QUIESCE.name, quiesce_s)})")
        timings["verified"] = time.monotonic() - t0
    except RefusedProcess as exc:  # the adapter named a pid outside the run: a protocol break, so invalid
        result.update(status="failed", verdict=Verdict.INVALID.value, refused=True, why=f"{exc}"[:2000])
        result["violations"].append(f"{exc}"[:2000])
    except (ProtocolError, OperationFailed, RecoveryKitError) as exc:
        result.update(status="error", why=f"{type(exc).__name__}: {exc}"[:2000])
    except Exception as exc:  # a defect in the kit: keep the case's evidence and say so, never crash the run
        result.update(status="error", why=f"kit defect: {type(exc).__name__}: {exc}",
                      traceback=traceback.format_exc()[-4000:])
    finally:
        env.close()
        result["leftovers"] = env.left
        result["reaped"] = env.reaped
        timings["total"] = time.monotonic() - t0
        result["timings"] = {k: round(v, 3) for k, v in timings.items()}
        if env.left:
            result["violations"].append(f"processes {env.left} outlived the case (run marker {env.marker})")
            result["status"] = "error" if result["status"] != "failed" else "failed"
        if env.strays:  # found by session, process group or the run's open files, not by the marker: killed
            result["strays"] = env.strays
            result["violations"].append(f"processes {env.strays} of the case dropped the run marker "
                                        f"(RECOVERYKIT_RUN_MARKER={env.marker}) and left the adapter's process tree; "
                                        "the kit found them by the adapter's session or the run's open files and "
                                        "killed them")
            result["status"] = "error" if result["status"] != "failed" else "failed"
            result.setdefault("why", result["violations"][-1])
        if result["status"] in ("failed", "error", "not_reached") and bundle_dir is not None:
            try:
                result["bundle"] = str(bundles.write(Path(bundle_dir), case, result, env, adapter, seed))
            except OSError as exc:  # a full disk under --out: no bundle (a partial one is removed); the run goes on
                result["bundle_unwritten"] = f"{exc.strerror or exc}"
                shutil.rmtree(Path(bundle_dir) / bundles.safe_name(case.id), ignore_errors=True)
        if not keep:
            env.remove()
        else:
            result["run_dir"] = str(env.run_dir)
    return result


def _compact(result: ClauseResult) -> dict[str, Any]:
    """A clause result for results.json: a held clause needs no text (its statement is in the contract)."""
    if result.verdict is Verdict.VALID:
        return {"clause": result.clause_id, "verdict": result.verdict.value, "text": f"held {result.clause_id}"}
    return {**result.as_dict(), "evidence": list(result.evidence)[:5]}


def with_suppress_timeout(env: CaseEnv) -> None:
    """Give the provider a moment to write the last response records (the ledger is the usage truth)."""
    with contextlib.suppress(ProviderTimeout):
        env.provider.wait_settled(timeout=env.pacing(CHAOS_GRACE))
