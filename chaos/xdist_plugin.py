"""Chaos cases as pytest items, so pytest-xdist can spread a systematic run over worker processes.

Cases are independent, so a chaos run scales out the way a test suite does: one pytest item per case
(node id = the case's stable id), distributed by pytest-xdist (``-n N``), or run one after another
(``-n 0`` or no xdist). Each item runs ``runner.run_case`` and writes the case's JSON result, atomically
and one file per case, into the results directory, where ``recoverykit chaos --workers N`` (or anyone)
reads them back to build the results document. An item fails when its case failed or errored, and is
skipped, with the reason, when the case was not implemented by the adapter or its point never reached:
missing evidence is never a pass.

    python -m pytest -p recoverykit.chaos.xdist_plugin -n 2 --chaos-results DIR --chaos-trace TRACE \\
        [--chaos-adapter CMD] [--chaos-scenarios ..] [--chaos-points ..] [--chaos-kinds ..] [--chaos-shard K/N]

Every xdist worker collects the same list, so the list comes from a stored dry-run trace
(``--chaos-trace``, the ``trace.json`` that ``recoverykit chaos --list --out DIR`` writes) or from an
explicit id file (``--chaos-cases``), never from a dry run of each worker's own.

The plugin is loaded only with ``-p`` (it is not a pytest11 entry point); once loaded it replaces
collection entirely, so it needs ``--chaos-results`` and collects nothing but chaos cases.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from recoverykit.chaos.cases import Case, enumerate_cases, parse_case_id
from recoverykit.chaos.dry_run import Trace
from recoverykit.chaos.shard import parse_shard, select
from recoverykit.conformance.pacing import Pacing, using
from recoverykit.conformance.reaper import ENV_RUN_MARKER, new_marker, owner_alive, reap_stale
from recoverykit.model.errors import InvalidArgument

CASES_DIR = "cases"  # results/<quoted case id>.json
DECLARED_FILE = "declared.json"
SKIPPED = ("not_implemented", "not_reached")
PASSED = "passed"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recoverykit chaos", "chaos cases as pytest items (recoverykit.chaos.xdist_plugin)")
    group.addoption("--chaos-results", metavar="DIR", help="Write one JSON result per case here (required).")
    group.addoption("--chaos-adapter", metavar="CMD", help="Adapter command (shlex-split). Default: reference runtime.")
    group.addoption("--chaos-cases", metavar="FILE", help="Run exactly these case ids (one per line).")
    group.addoption("--chaos-scenarios", default="all", help="Scenarios: all or a comma list.")
    group.addoption("--chaos-points", default="all", help="Interruption points: all or a comma list.")
    group.addoption("--chaos-kinds", default="all", help="Restart kinds: all or a comma list.")
    group.addoption("--chaos-shard", default=None, metavar="K/N", help="Only the K-th of N parts of the case list.")
    group.addoption("--chaos-timeout", type=float, default=20.0, help="Seconds to wait for a point or a reply.")
    group.addoption("--chaos-timeout-scale", type=float, default=1.0,
                    help="Scale every window of the cases (``recoverykit.conformance.pacing``).")
    group.addoption("--chaos-keep", action="store_true", help="Keep every case's run directory.")
    group.addoption("--chaos-seed", type=int, default=0, help="Seed recorded in bundles.")
    group.addoption("--chaos-runs", metavar="DIR", help="Case run directories go here (default: the temp dir).")
    group.addoption("--chaos-bundles", metavar="DIR", help="Write a bundle per failing case here (default: none).")
    group.addoption("--chaos-trace", metavar="FILE",
                    help="The dry-run trace the case list is enumerated from (required without --chaos-cases).")
    group.addoption("--chaos-declared", metavar="FILE",
                    help="The adapter's declaration as `recoverykit chaos` made it; without it the plugin "
                         "declares once (and reaps stale runs) before the cases start.")


@dataclass(frozen=True)
class Settings:
    results: Path
    adapter: str | None
    timeout_s: float
    scale: float  # the run's pacing (``pacing.Pacing.scale``)
    keep: bool
    seed: int
    runs: Path | None  # None: private dirs in the system's temp dir, as in the Python API
    bundles: Path | None  # None: no bundles
    declared_path: Path

    def declared(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.declared_path.read_text())
        except FileNotFoundError:
            return None


def _path(value: str | None) -> Path | None:
    return Path(value).resolve() if value else None


def _settings(config: pytest.Config) -> Settings:
    results = Path(config.getoption("chaos_results")).resolve()
    declared = config.getoption("chaos_declared")
    return Settings(results=results, adapter=config.getoption("chaos_adapter"),
                    timeout_s=config.getoption("chaos_timeout"), scale=config.getoption("chaos_timeout_scale"),
                    keep=config.getoption("chaos_keep"),
                    seed=config.getoption("chaos_seed"), runs=_path(config.getoption("chaos_runs")),
                    bundles=_path(config.getoption("chaos_bundles")),
                    declared_path=Path(declared) if declared else results / DECLARED_FILE)


def selected_cases(config: pytest.Config) -> list[Case]:
    """The case list: an explicit id file, or the scenarios x points x kinds selection of one shard."""
    path = config.getoption("chaos_cases")
    if path:
        flags = [f"--chaos-{n}" for n in ("scenarios", "points", "kinds") if config.getoption(f"chaos_{n}") != "all"]
        if flags or config.getoption("chaos_shard"):
            raise pytest.UsageError(f"--chaos-cases {path} names the cases; drop {flags or ['--chaos-shard']}")
        lines = Path(path).read_text().splitlines()
        return [parse_case_id(line) for line in lines if line.strip() and not line.lstrip().startswith("#")]
    trace_path = config.getoption("chaos_trace")
    if not trace_path:
        raise pytest.UsageError("the case list comes from a dry-run trace: pass --chaos-trace FILE (the trace.json "
                                "of `recoverykit chaos --list --out DIR`) or --chaos-cases FILE")
    trace = Trace.read(trace_path)
    return select(enumerate_cases(trace, config.getoption("chaos_scenarios"), config.getoption("chaos_points"),
                                  config.getoption("chaos_kinds")), parse_shard(config.getoption("chaos_shard")))


def result_path(results: Path, case_id: str) -> Path:
    return results / CASES_DIR / f"{quote(case_id, safe='')}.json"


def write_result(results: Path, result: dict[str, Any]) -> Path:
    """Atomically: a reader polling the directory sees a whole result or none."""
    path = result_path(results, result["id"])
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result, sort_keys=True, default=str))
    os.replace(tmp, path)
    return path


def read_new_results(results: Path, seen: set[str]) -> list[dict[str, Any]]:
    """The results written since the last call (``seen`` holds the file names already read)."""
    out = []
    for path in sorted((results / CASES_DIR).glob("*.json")):
        if path.name not in seen:
            seen.add(path.name)
            out.append(json.loads(path.read_text()))
    return out


class CaseNotPassed(Exception):
    """A case failed (a clause broken) or errored; the item fails with the case's own account."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result["status"])
        self.result = result


class ChaosCase(pytest.Item):
    def __init__(self, *, case: Case, settings: Settings, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.settings = settings

    def runtest(self) -> None:
        from recoverykit.chaos.systematic import run_one  # systematic imports the runner: only when a case runs

        s = self.settings
        try:
            with using(Pacing(s.scale, s.scale)):
                result = run_one(self.case, s.adapter, declared=s.declared(), base_dir=s.runs, bundle_dir=s.bundles,
                                 timeout_s=s.timeout_s, keep=s.keep, seed=s.seed)
        except Exception as exc:  # a kit defect: still leave a result, so the run reads as error, not missing
            result = {**self.case.as_dict(), "status": "error", "verdict": "unknown", "clauses": [], "violations": [],
                      "leftovers": [], "timings": {}, "why": f"kit defect: {type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc()[-4000:]}
        write_result(s.results, result)
        self.user_properties.append(("status", result["status"]))
        if result["status"] in SKIPPED:
            pytest.skip(f"{result['status']}: {result.get('why', '')}")
        if result["status"] != PASSED:
            raise CaseNotPassed(result)

    def repr_failure(self, excinfo, style=None):  # type: ignore[override]
        if isinstance(excinfo.value, CaseNotPassed):
            r = excinfo.value.result
            account = [*r.get("violations", [])[:10], *([r["why"]] if r.get("why") else [])]
            lines = [f"{r['status']}: {account[0] if account else 'no account given'}", f"  case: {r['id']}"]
            lines += [f"  {line}" for line in account[1:]]
            lines += [f"  bundle: {r['bundle']}"] if r.get("bundle") else []
            lines += [f"  replay: {r['replay']}"] if r.get("replay") else []
            return "\n".join(lines)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        # the failure heading; not a suffix of the node id, or pytest would print the id's dots as '::'
        return self.path, None, f"chaos case {self.case.id}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A skipped case is reported under its case id, not under the line of this plugin that skipped it."""
    report = yield
    if isinstance(item, ChaosCase) and report.skipped and isinstance(report.longrepr, tuple):
        report.longrepr = (item.case.id, None, report.longrepr[2])
    return report


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("chaos_results"):
        raise pytest.UsageError("recoverykit.chaos.xdist_plugin runs chaos cases only: pass --chaos-results DIR "
                                "(where each case's JSON result goes)")
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller has prepared everything
    settings = _settings(config)
    settings.results.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not os.environ.get(ENV_RUN_MARKER):
        # run from pytest directly: this controller owns the workers it starts (they inherit the marker), so a
        # later reap_stale kills them if it dies
        os.environ[ENV_RUN_MARKER] = new_marker()
    else:
        _watch_owner(os.environ[ENV_RUN_MARKER])
    if config.getoption("chaos_declared") is None:
        from recoverykit.chaos.systematic import declare

        reap_stale()  # as `recoverykit chaos` does before its run
        declared = declare(settings.adapter, settings.runs)
        tmp = settings.declared_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(declared))
        os.replace(tmp, settings.declared_path)


def _watch_owner(marker: str, period_s: float = 1.0) -> None:
    """Spawned by `recoverykit chaos`: if that command dies (SIGKILL), end this run and what it started now.

    The killed command's marker, carried by this controller and its xdist workers, is stale from then on:
    ``reap_stale`` kills the workers, then (next pass) the case processes their markers name.
    """
    def watch() -> None:
        stop = threading.Event()
        while not stop.wait(period_s):
            if not owner_alive(marker):
                reap_stale()
                os._exit(3)

    threading.Thread(target=watch, name="chaos-owner-watch", daemon=True).start()


def pytest_collection(session: pytest.Session) -> bool:
    """Collect the chaos cases, and nothing else (not the tests of whatever directory pytest runs in)."""
    config = session.config
    try:
        cases = selected_cases(config)
    except InvalidArgument as exc:
        raise pytest.UsageError(str(exc)) from None
    settings = _settings(config)
    hook = config.hook
    hook.pytest_collectstart(collector=session)
    items = [ChaosCase.from_parent(session, name=c.id, nodeid=c.id, case=c, settings=settings) for c in cases]
    session.items = list(items)
    hook.pytest_collectreport(report=pytest.CollectReport("", "passed", None, list(items)))
    for item in items:
        hook.pytest_itemcollected(item=item)
    hook.pytest_collection_modifyitems(session=session, config=config, items=session.items)
    hook.pytest_collection_finish(session=session)
    session.testscollected = len(session.items)
    return True


def adapter_option(adapter: str | list[str] | None) -> list[str]:
    """The ``--chaos-adapter`` argument for an API adapter value (None: the bundled reference runtime)."""
    if adapter is None:
        return []
    return ["--chaos-adapter", adapter if isinstance(adapter, str) else shlex.join(adapter)]


_warm = contextlib.ExitStack()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Each process that runs cases pools warm spare adapters for them (``spares``); none outlive the session."""
    from recoverykit.chaos import spares

    _warm.enter_context(spares.warm_spares())


def pytest_sessionfinish(session: pytest.Session) -> None:
    _warm.close()
