"""A pytest plugin: a runtime's own test suite runs the conformance scenarios with one option.

    pytest --recoverykit-adapter="python -m myruntime.adapter" [--recoverykit-out=DIR] [--recoverykit-lockstep]

Installed as the ``recoverykit`` pytest11 entry point. With the option it adds one test item per
scenario of the catalogue (``recoverykit::<scenario id>``) and, with ``--recoverykit-lockstep``, one
for the lockstep machine. A scenario whose profile the adapter does not declare is SKIPPED with
the reason "profile not declared" (honest there: it was not run); an unknown verdict (missing
evidence) FAILS, because it is not a pass. ``--recoverykit-accept CLAUSE`` (repeatable) and
``--recoverykit-baseline FILE`` acknowledge known findings (``conformance.acceptance``): a case that broke
accepted clauses only is XFAIL, never a pass; a malformed baseline is a pytest usage error. Without the
option the plugin adds nothing. An empty ``--recoverykit-adapter=`` (an unset CI variable) is a usage
error (pytest exits 4), with the message the CLI gives for an empty ``--adapter``.

A SIGTERM (a CI timeout), SIGHUP or SIGINT during the session is handled as ``recoverykit certify`` handles it
(``conformance.interrupts``): every process of the session's runs is killed, whatever the pause nemesis
stopped is let go on, the case running is cut (KeyboardInterrupt: pytest reports what finished), and
pytest exits 128 + the signal number (143, 129, 130). The handlers are installed at session start in
the main thread only (each pytest-xdist worker installs its own) and restored at session finish.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
from pathlib import Path

import pytest
from recoverykit.conformance.safe_text import visible
from recoverykit.model.catalogue import Verdict

_PROFILES: dict[str, set[str]] = {}  # adapter command -> declared profiles, learned by the first run


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recoverykit", "recoverykit conformance scenarios")
    group.addoption("--recoverykit-adapter", default=None, metavar="CMD",
                    help="Run the recoverykit conformance scenarios against this adapter command.")
    group.addoption("--recoverykit-out", default=None, metavar="DIR",
                    help="Keep each scenario's run directory under DIR (default: a temp dir).")
    group.addoption("--recoverykit-lockstep", action="store_true", default=False,
                    help="Also run the lockstep machine (ci settings) as one test item.")
    group.addoption("--recoverykit-accept", action="append", default=[], metavar="CLAUSE",
                    help="A known finding: a case that broke only accepted clauses is xfail (repeatable).")
    group.addoption("--recoverykit-baseline", default=None, metavar="FILE",
                    help="Accept the findings of a baseline file written by `recoverykit certify --write-baseline`.")
    group.addoption("--recoverykit-timeout-scale", default="1", metavar="FACTOR",
                    help="Multiply every window the kit waits in for the runtime by FACTOR (0.1 to 100), as "
                         "`recoverykit certify --timeout-scale`.")
    group.addoption("--recoverykit-no-calibrate", action="store_true", default=False,
                    help="Do not time the runtime once before the first scenario (calibration may only raise the "
                         "scale).")


class ConformanceFile(pytest.File):
    def collect(self):
        from recoverykit.conformance.scenarios import all_scenarios
        for scenario in all_scenarios():
            yield ScenarioItem.from_parent(self, name=scenario.id, scenario_id=scenario.id)
        if self.config.getoption("--recoverykit-lockstep"):
            yield ScenarioItem.from_parent(self, name="lockstep", scenario_id="lockstep")


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.scenario_id = scenario_id
        self.add_marker(pytest.mark.recoverykit)

    def runtest(self) -> None:
        from recoverykit.conformance.certify import Certification, Options, _lockstep_case, _scenario_case
        from recoverykit.conformance.scenarios import required_clauses, scenario_named

        command = self.config.getoption("--recoverykit-adapter")
        base = self.config.getoption("--recoverykit-out")
        out = Path(base) if base else Path(tempfile.mkdtemp(prefix="rk-pytest-"))
        cert = Certification(command, out, 0, ("chat_core",), required_clauses())
        cert.declared = set(_PROFILES.get(command, set()))
        acceptance = self.config._recoverykit_acceptance  # type: ignore[attr-defined]
        cert.acceptance = acceptance
        cert.pacing = _pacing(self.config, command, out)
        options = Options(adapter=command, out=out, acceptance=acceptance, pacing=cert.pacing, calibrate=False)
        if self.scenario_id == "lockstep":
            case = _lockstep_case(cert, options)
        else:
            case = _scenario_case(cert, scenario_named(self.scenario_id), options)
        if cert.declared:
            _PROFILES[command] = cert.declared
        if case.verdict is Verdict.NOT_APPLICABLE:
            pytest.skip("capability not declared" if case.message.startswith("capability ") else "profile not declared")
        cert.cases.append(case)
        # certify's own fold: an aggregate clause (FA-01) whose every break here rests on accepted clauses is
        # accepted with them (``Certification.accepted``, ``acceptance.derive``)
        if case.accepted(cert.accepted):  # a known finding: reported as such, never as passed
            pytest.xfail("accepted finding: " + ", ".join(sorted(case.broken())))
        if case.verdict is not Verdict.VALID:
            raise ConformanceFailure(case)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ConformanceFailure):
            case = excinfo.value.case
            lines = [f"{case.verdict.value}: {case.message}", *case.program]
            lines += [f"run directory: {p}" for p in case.run_dirs]
            return "\n".join(visible(line) for line in lines)  # adapter text: no raw escape reaches the terminal
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"recoverykit::{self.scenario_id}"


def _pacing(config: pytest.Config, command: str | None, out: Path):
    """The session's pacing: the asked scale, calibrated once before the first scenario unless told not to."""
    pacing = config._recoverykit_pacing  # type: ignore[attr-defined]
    if pacing.calibration is None and not config.getoption("--recoverykit-no-calibrate"):
        from recoverykit.conformance.calibration import calibrate
        from recoverykit.conformance.certify import default_adapter
        pacing = calibrate(default_adapter() if command is None else command, out / "calibration", pacing)
        config._recoverykit_pacing = pacing  # type: ignore[attr-defined]
    return pacing


class ConformanceFailure(Exception):
    def __init__(self, case) -> None:
        super().__init__(case.message)
        self.case = case


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "recoverykit: a recoverykit conformance scenario")
    command = config.getoption("--recoverykit-adapter", default=None)
    if command is not None:  # `--recoverykit-adapter=` (an unset CI variable) is refused, as the CLI refuses it
        from recoverykit.conformance.acceptance import load
        from recoverykit.conformance.client_process import split_command
        from recoverykit.model.errors import InvalidArgument
        try:
            split_command(command)
            config._recoverykit_acceptance = load(config.getoption("--recoverykit-accept"),  # type: ignore[attr-defined]
                                                  config.getoption("--recoverykit-baseline"))
            from recoverykit.conformance.pacing import Pacing, check_scale
            scale = check_scale(config.getoption("--recoverykit-timeout-scale"), "--recoverykit-timeout-scale")
            config._recoverykit_pacing = Pacing(scale, scale)  # type: ignore[attr-defined]
        except InvalidArgument as exc:
            raise pytest.UsageError(str(exc)) from None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    if not config.getoption("--recoverykit-adapter") or getattr(session, "_recoverykit_added", False):
        return
    session._recoverykit_added = True
    node = ConformanceFile.from_parent(session, path=Path(str(config.rootpath)) / "recoverykit-conformance")
    items.extend(node.collect())


def _on_signal(config: pytest.Config):
    def handler(signum: int, frame: object) -> None:
        if config._recoverykit_signalled:  # type: ignore[attr-defined]
            return  # already on the way out: let the cleanup finish
        from recoverykit.conformance.interrupts import stop_everything
        from recoverykit.model.errors import Interrupted
        config._recoverykit_signalled.append(signum)  # type: ignore[attr-defined]
        stop_everything()
        raise Interrupted(signum, signal.Signals(signum).name)
    return handler


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if not config.getoption("--recoverykit-adapter", default=None):
        return
    from recoverykit.conformance.interrupts import SIGNALS, installed
    config._recoverykit_signalled = []  # type: ignore[attr-defined]
    stack = contextlib.ExitStack()
    stack.enter_context(installed(_on_signal(config), SIGNALS))
    config._recoverykit_signals = stack  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    stack = getattr(config, "_recoverykit_signals", None)
    if stack is None:
        return
    signalled = config._recoverykit_signalled  # type: ignore[attr-defined]
    if signalled:
        from recoverykit.conformance.interrupts import exit_code, stop_everything
        stop_everything(rounds=10)  # whatever a case's thread started after the first round
        session.exitstatus = exit_code(signalled[0])
        with contextlib.suppress(Exception):  # after a SIGHUP the terminal may be gone: the exit code says it
            sys.stderr.write(f"recoverykit: interrupted by {signal.Signals(signalled[0]).name}: every process of "
                             f"the run was stopped; exit {session.exitstatus}\n")
    stack.close()
    config._recoverykit_signals = None  # type: ignore[attr-defined]
