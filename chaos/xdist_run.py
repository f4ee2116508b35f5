"""``recoverykit chaos --workers N``: run the case list through pytest-xdist and read the results back.

The chaos command spawns ``python -m pytest -p recoverykit.chaos.xdist_plugin -n N`` (an argv list, its
own session and process group, an isolated pytest configuration: no ini, conftest or auto-loaded plugin
of the directory it runs in), follows the per-case result files as they appear (the CLI's progress
lines), and returns the results in case order; ``systematic`` builds the same results document from
them as from an in-process run.

Hygiene: the pytest controller and its workers carry a run marker owned by the chaos command. On
every way out (normal end, error, KeyboardInterrupt, SIGTERM, SIGHUP) the process group is killed and
everything carrying the marker is reaped, then the case processes of dead workers (``reap_stale``).
If the chaos command is SIGKILLed, the controller notices its owner is gone and reaps its workers and
their cases (``xdist_plugin._watch_owner``); failing that, the next run's ``reap_stale`` does.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from recoverykit.chaos import xdist_plugin as plugin
from recoverykit.chaos.case_env import private_dir
from recoverykit.chaos.cases import Case
from recoverykit.conformance import subreaper
from recoverykit.conformance.errors import EnvironmentFault
from recoverykit.conformance.interrupts import SIGNALS, installed
from recoverykit.conformance.pacing import current
from recoverykit.conformance.reaper import leftovers, marked_env, new_marker, reap, reap_stale
from recoverykit.model.errors import Interrupted

POLL_S = 0.25
SETTLE_S = 1.0  # after the last pass, how long to keep looking for a process that turned up late
WORKER_EXIT_S = 10.0  # after the controller's own end, how long its workers get to exit before being killed
# pytest exits: 0 all passed, 1 some failed; anything else means the run itself did not complete
PYTEST_RAN = (0, 1)
DROP_ENV_PREFIX = "PYTEST_"  # the caller's pytest settings (addopts, plugins, its own xdist worker) are not this run's


def pytest_argv(workers: int, work: Path, adapter: str | list[str] | None, *, base_dir: Path | None,
                bundle_dir: Path | None, timeout_s: float, keep: bool, seed: int) -> list[str]:
    argv = [sys.executable, "-m", "pytest", "-c", str(work / "pytest.ini"), "--rootdir", str(work),
            "--basetemp", str(work / "tmp"), "--noconftest", "-p", "no:cacheprovider", "-p", "xdist.plugin",
            "-p", plugin.__name__, "-q", "-rfE", "-n", str(workers), "--dist", "worksteal",
            "--chaos-results", str(work), "--chaos-cases", str(work / "cases.txt"),
            "--chaos-declared", str(work / plugin.DECLARED_FILE), "--chaos-timeout", repr(timeout_s),
            "--chaos-timeout-scale", repr(current().scale),  # this run's pacing, for every worker's cases
            "--chaos-seed", str(seed), *plugin.adapter_option(adapter)]
    argv += ["--chaos-keep"] if keep else []
    argv += ["--chaos-runs", str(base_dir)] if base_dir is not None else []
    argv += ["--chaos-bundles", str(bundle_dir)] if bundle_dir is not None else []
    return argv


def missing_result(case: Case, why: str) -> dict[str, Any]:
    return {**case.as_dict(), "status": "error", "why": why, "verdict": "unknown", "clauses": [],
            "violations": [], "leftovers": [], "timings": {}}


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """A SIGTERM or SIGHUP while the run is out of process becomes KeyboardInterrupt, so the cleanup below runs
    (a signal someone above already handles, as the CLI does through ``recoverykit.signals``, is left to them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise Interrupted(signum, signal.Signals(signum).name)

    free = tuple(sig for sig in SIGNALS if sig != signal.SIGINT and signal.getsignal(sig) is signal.SIG_DFL)
    with installed(interrupt, free):
        yield


def _stop(proc: subprocess.Popen, marker: str) -> None:
    """Nothing of this run may outlive it: the pytest group, anything marked, the cases of dead workers."""
    if proc.poll() is None:  # not yet reaped, so its pid (the group id) cannot have been reused
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:  # a controller that ended by itself: its workers are finishing their own cleanup (idle spares)
        deadline = time.monotonic() + WORKER_EXIT_S
        while leftovers(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
    proc.wait()
    reap(marker)
    reap_stale()
    # A process can still turn up after the last pass: a fork or an exec in flight when its parent was killed
    # shows its marker a moment later (a spare adapter mid-exec, a standby mid-fork). Look again until two
    # looks in a row find nothing, for at most SETTLE_S.
    deadline, quiet = time.monotonic() + SETTLE_S, 0
    while quiet < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
        found = reap(marker).targets + reap_stale().targets
        quiet = 0 if found else quiet + 1


def run_cases(cases: Sequence[Case], adapter: str | list[str] | None, *, workers: int,
              declared: dict[str, Any], base_dir: str | Path | None = None, bundle_dir: str | Path | None = None,
              work_parent: str | Path | None = None, timeout_s: float = 20.0, keep: bool = False, seed: int = 0,
              progress: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``cases`` in ``workers`` pytest-xdist workers; results in case order."""
    if not cases:
        return []
    work = private_dir(work_parent, "xdist-")
    (work / "pytest.ini").write_text("[pytest]\n")
    (work / "cases.txt").write_text("".join(f"{c.id}\n" for c in cases))
    (work / plugin.DECLARED_FILE).write_text(json.dumps(declared))
    log_path = work / "pytest.log"
    marker = new_marker()
    env = marked_env(marker, {k: v for k, v in os.environ.items() if not k.startswith(DROP_ENV_PREFIX)})
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    argv = pytest_argv(min(workers, len(cases)), work, adapter,  # a worker without a case would only start and exit
                       base_dir=Path(base_dir) if base_dir is not None else None,
                       bundle_dir=Path(bundle_dir) if bundle_dir is not None else None, timeout_s=timeout_s,
                       keep=keep, seed=seed)
    by_id: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    with _sigterm_as_interrupt(), log_path.open("wb") as log:
        with subreaper.spawning():
            proc = subreaper.own(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                                  stderr=subprocess.STDOUT, start_new_session=True))
        try:
            while True:
                rc = proc.poll()
                for result in plugin.read_new_results(work, seen):
                    by_id[result["id"]] = result
                    if progress is not None:
                        progress(result)
                if rc is not None:
                    break
                time.sleep(POLL_S)
        except KeyboardInterrupt as exc:  # SIGINT / SIGTERM: stop everything, keep what had reported
            _stop(proc, marker)
            for result in plugin.read_new_results(work, seen):
                by_id[result["id"]] = result
            exc.partial_results = [by_id[c.id] for c in cases if c.id in by_id]  # type: ignore[attr-defined]
            raise
        finally:
            _stop(proc, marker)
    if not by_id and rc not in PYTEST_RAN:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise EnvironmentFault(f"the pytest-xdist run of {len(cases)} chaos cases exited {rc} before any case "
                               f"reported (log: {log_path}):\n{tail}")
    complete = True
    for case in cases:
        if case.id not in by_id:
            complete = False
            by_id[case.id] = missing_result(case, f"no result: the pytest-xdist run (exit {rc}) ended before this "
                                                  f"case reported; see {log_path}")
            if progress is not None:
                progress(by_id[case.id])
    if complete and rc in PYTEST_RAN:
        shutil.rmtree(work, ignore_errors=True)  # every result is in the caller's document; keep the log otherwise
    return [by_id[c.id] for c in cases]
