"""Where one chaos cycle's time goes: the calls ``runner.run_case`` makes, timed one by one.

Runs one case (default: the cycle benchmark's) N times on warm spare adapters, as a systematic run
does, and prints the median of every phase and whose time it is (kit or runtime). Prints figures,
asserts nothing.

    python benchmarks/chaos_phases.py [--case ID] [--runs 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from recoverykit.chaos import restarts, runner, spares
from recoverykit.chaos.case_env import CaseEnv
from recoverykit.chaos.cases import parse_case_id
from recoverykit.chaos.prediction import check_prediction
from recoverykit.conformance.checker import Evidence, check
from recoverykit.conformance.provider_script import script_tag
from recoverykit.conformance.scenarios import scenario_named

DEFAULT_CASE = "chat_unknown_write/tool.result.commit.before/1/tree_kill"
# "recover" is the runtime's recovery until it reports quiescence (its repaired turn, the provider and the
# tool included); the kit only waits there. It used to be counted with "verify" as the kit's.
WHOSE = {"environment + init": "kit", "start": "runtime", "run to the point": "runtime + probe",
         "observe + kill": "kit", "start again": "runtime", "recover": "runtime", "verify": "kit",
         "teardown": "kit + runtime"}


def one(case, base: Path) -> dict[str, float]:
    scenario = scenario_named(case.scenario)
    marks = [time.monotonic()]
    env = CaseEnv(None, scenario.provider_script(case.point, case.hit, chaos=True), base_dir=base)
    init_ok = env.start()
    marks.append(time.monotonic())
    env.start_runtime(failpoints=runner.arm(case))
    marks.append(time.monotonic())
    for session in scenario.sessions:
        env.request_async("submit", session_id=f"{case.scenario}-{session}", client_msg_id=f"{session}-1",
                          text=f"chaos {case.id} {script_tag(scenario.script_id(session))}")
    if runner._wait_reached(env, case, 20) is None:
        raise SystemExit(f"{case.id}: the point was never reached")
    marks.append(time.monotonic())
    before = env.observe()
    restarts.tree_kill(env, "tree_kill")  # the runner's own path: vetted pids (proc_guard), frozen, killed, verified
    env.release_holds(cut_provider=True)
    marks.append(time.monotonic())
    env.start_runtime()
    marks.append(time.monotonic())
    env.auto_release()
    env.wait_pending()
    quiescent = env.quiesce(30)
    marks.append(time.monotonic())
    env.observe(quiescent)
    runner.with_suppress_timeout(env)
    check(Evidence(history=env.recorder.history, ledger=env.provider.records(), witness=env.witness(),
                   observes=frozenset(s.value for s in init_ok.observes)))
    check_prediction(before, env.recorder.history, case, scenario.during)
    marks.append(time.monotonic())
    env.close()
    env.remove()
    marks.append(time.monotonic())
    return {name: marks[i + 1] - marks[i] for i, name in enumerate(WHOSE)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", default=DEFAULT_CASE)
    parser.add_argument("--runs", type=int, default=8)
    ns = parser.parse_args()
    case = parse_case_id(ns.case)
    base = Path(tempfile.mkdtemp(prefix="rk-bench-phases-"))
    with spares.warm_spares():
        one(case, base)  # starts the pool; not counted
        rows = [one(case, base) for _ in range(ns.runs)]
    print(f"{ns.case}, median of {ns.runs} warm cycles:")
    total = 0.0
    for name, whose in WHOSE.items():
        value = statistics.median(r[name] for r in rows)
        total += value
        print(f"  {name:<20} {value * 1000:6.0f} ms  ({whose})")
    kit = sum(statistics.median(r[n] for r in rows) for n, w in WHOSE.items() if w == "kit")
    print(f"  sum of medians       {total * 1000:6.0f} ms; the kit's own phases {kit * 1000:.0f} ms "
          f"= {100 * kit / total:.0f} % of the cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
