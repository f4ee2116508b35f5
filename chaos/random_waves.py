"""Random mode: seeded waves of kills at random times, Paperclip restart-chaos style, for comparison.

Each wave runs the chat scenario with no failpoint armed, sleeps a seeded random time, kills the
runtime (worker alone or the whole tree, seeded), restarts it, possibly again (one to three faults
per wave), then waits for quiescence and runs the same checker as systematic mode. A wave's id is
``random/<seed>/<wave>``; ``--replay`` reruns the same schedule, though the runtime's timing will
differ: that is the point of the comparison. Waves are where timing races hide and are missed
(seed 001: the #19759 race never showed in a wave); systematic mode is there to hit them on purpose.
"""

from __future__ import annotations

import random
import shlex
import time
from pathlib import Path
from typing import Any

from recoverykit.chaos import restarts, spares
from recoverykit.chaos.case_env import CaseEnv
from recoverykit.conformance import disk
from recoverykit.conformance.checker import Evidence, check
from recoverykit.conformance.errors import OperationFailed, ProtocolError
from recoverykit.conformance.provider_script import script_tag
from recoverykit.conformance.scenarios import scenario_named
from recoverykit.model.catalogue import RestartKind, Verdict
from recoverykit.model.errors import RecoveryKitError

WINDOW_S = 1.5  # faults land within this long after the submit: about one scenario's run time
SCENARIO = "chat_unknown_write"


def schedule(seed: int, wave: int) -> list[tuple[float, str]]:
    """The wave's faults: (delay after the previous start, kill kind); a pure function of seed and wave."""
    rng = random.Random(f"{seed}/{wave}")
    faults = rng.randint(1, 3)
    return [(round(rng.uniform(0.0, WINDOW_S), 3), rng.choice([RestartKind.WORKER_KILL.value,
                                                              RestartKind.TREE_KILL.value])) for _ in range(faults)]


def _replay(seed: int, wave: int, adapter: str | list[str] | None) -> str:
    cmd = ["recoverykit", "chaos", "--random", "1", "--seed", str(seed), "--wave", str(wave)]
    if adapter is not None:
        cmd += ["--adapter", adapter if isinstance(adapter, str) else shlex.join(adapter)]
    return shlex.join(cmd)


def run_wave(seed: int, wave: int, adapter: str | list[str] | None = None, *, base_dir: str | Path | None = None,
             timeout_s: float = 20.0, scenario_id: str = SCENARIO) -> dict[str, Any]:
    """One wave of ``scenario_id`` (the chat scenario by default; a scenario with a chaos kick starts its own
    work, as in systematic mode, so random and systematic runs of one scenario can be compared)."""
    scenario = scenario_named(scenario_id)
    plan = schedule(seed, wave)
    result: dict[str, Any] = {"id": f"random/{seed}/{wave}", "scenario": scenario_id, "point": "random", "hit": 0,
                              "kind": "+".join(k for _, k in plan), "schedule": plan, "status": "error",
                              "verdict": Verdict.UNKNOWN.value, "clauses": [], "violations": [],
                              "replay": _replay(seed, wave, adapter)}
    t0 = time.monotonic()
    env = CaseEnv(adapter, scenario.provider_script(chaos=True), base_dir=base_dir, timeout_s=timeout_s)
    try:
        init_ok = env.start()
        env.start_runtime()
        if scenario.chaos.kick is not None:
            from recoverykit.chaos.runner import kick
            kick(env, scenario.chaos.kick)
        else:
            for session in scenario.sessions:
                kind, fields = scenario.open_request(session, f"random-{session}", f"{session}-1",
                                                     f"wave {seed}/{wave} {script_tag(scenario.script_id(session))}")
                env.request_async(kind, **fields)
        for delay, kind in plan:
            time.sleep(delay)
            if kind == RestartKind.WORKER_KILL.value:
                restarts.worker_kill(env, required=False)  # a wave's kill may land when no worker runs
            else:
                restarts.tree_kill(env, required=False)
            env.release_holds(cut_provider=True)
            env.start_runtime()
        env.auto_release()
        env.wait_pending()
        quiescent = env.quiesce(30.0)
        if env.observe(quiescent).get("workspaces") is not None:  # task workspaces: the kit looks at the disk
            disk.inspect(env, "recovered")
        clauses = check(Evidence(history=env.recorder.history, ledger=env.provider.records(), witness=env.witness(),
                                 observes=frozenset(s.value for s in init_ok.observes)))
        result["clauses"] = [c.as_dict() for c in clauses]
        result["violations"] = [c.text for c in clauses if c.verdict is Verdict.INVALID]
        result["status"] = "failed" if result["violations"] else "passed"
        result["verdict"] = Verdict.INVALID.value if result["violations"] else Verdict.VALID.value
    except (ProtocolError, OperationFailed, RecoveryKitError) as exc:
        result["why"] = f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        env.close()
        result["leftovers"] = env.left
        env.remove()
        result["timings"] = {"total": round(time.monotonic() - t0, 3)}
    return result


def run_waves(count: int, seed: int, adapter: str | list[str] | None = None, *, base_dir: str | Path | None = None,
              stop_at_first: bool = False, progress=None, first_wave: int = 0,
              scenario_id: str = SCENARIO) -> list[dict[str, Any]]:
    out = []
    try:
        with spares.warm_spares():  # each wave adopts the adapter started during the one before
            for wave in range(first_wave, first_wave + count):
                result = run_wave(seed, wave, adapter, base_dir=base_dir, scenario_id=scenario_id)
                out.append(result)
                if progress is not None:
                    progress(result)
                if stop_at_first and result["status"] == "failed":
                    break
    except KeyboardInterrupt as exc:  # SIGINT / SIGTERM: the waves finished so far go with it
        exc.partial_results = list(out)  # type: ignore[attr-defined]
        raise
    return out
