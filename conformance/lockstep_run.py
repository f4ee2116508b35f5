"""Running the lockstep machine: seed programs first, then Hypothesis under a settings profile.

Kept apart from the machine (``lockstep``) because this is policy, not specification: which short
programs are tried first (the track record of bugs runtimes had), how long a failure may shrink,
where failures are stored so the next run tries them first, and how the printed program is kept.
A failing run comes back as a ``LockstepOutcome`` naming the clause, with the program of rules
and the ``@reproduce_failure`` line Hypothesis printed.
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recoverykit.conformance.checker import COMPLETION, PROTOCOL, ClauseResult
from recoverykit.conformance.errors import ProtocolError
from recoverykit.conformance.lockstep import Broke, LockstepConfig, make_machine
from recoverykit.model.catalogue import RestartKind, Verdict


@dataclass
class LockstepOutcome:
    verdict: Verdict
    clause_id: str | None = None
    message: str = ""
    report: list[str] = field(default_factory=list)  # the printed program and @reproduce_failure
    results: list[ClauseResult] = field(default_factory=list)
    runs: list[Path] = field(default_factory=list)
    ended: str | None = None  # how a run that did not finish ended: PROTOCOL (a break or silence) or COMPLETION

    @property
    def program(self) -> list[str]:
        # the invariant runs after every rule anyway: the program shows the rules alone
        return [line for line in self.report if (line.startswith("state") and "refines_the_model" not in line)
                or "reproduce_failure" in line]


# Short programs tried before random exploration, like Hypothesis' explicit examples: each is a bug
# some runtime had (the track record), so a change is incomplete until every one still passes.
SEED_PROGRAMS: tuple[tuple[tuple[str, dict[str, Any]], ...], ...] = (
    (("submit", {"script": "lk-text"}), ("settle", {})),
    (("submit", {"script": "lk-hold"}), ("pause", {"i": 0}), ("kill", {"kind": RestartKind.TREE_KILL})),
    (("submit", {"script": "lk-unknown"}), ("kill", {"kind": RestartKind.TREE_KILL}), ("settle", {})),
    (("submit", {"script": "lk-read"}), ("stop_all", {}), ("kill", {"kind": RestartKind.WORKER_KILL}),
     ("settle", {})),
    # a crash at a declared failpoint (the environment's broker sees the hit): skipped by the machine's own
    # precondition when the adapter declares no failpoint or the run has no broker
    (("arm_crash", {"i": 1}), ("submit", {"script": "lk-unknown"}), ("settle", {})),
)


def _allowed(machine: Any, name: str) -> bool:
    """Do the rule's preconditions hold now? (Hypothesis keeps them on the rule it records for the method.)"""
    rule = getattr(getattr(type(machine), name, None), "hypothesis_stateful_rule", None)
    return all(check(machine) for check in getattr(rule, "preconditions", ()))


def _arg(value: Any) -> str:
    return f"{type(value).__name__}.{value.name}" if isinstance(value, RestartKind) else repr(value)


def run_program(config: LockstepConfig, steps: tuple[tuple[str, dict[str, Any]], ...]) -> LockstepOutcome:
    """Run one fixed program through the machine; a failure carries the program as Hypothesis prints it."""
    lines = ["state = Lockstep()"]
    outcome = LockstepOutcome(Verdict.VALID, report=lines)
    machine = None
    try:
        machine = make_machine(config)()  # starts the adapter: a broken handshake is a protocol break too
        machine.refines_the_model_and_keeps_history_clauses()
        for name, kwargs in steps:
            if not _allowed(machine, name):  # as Hypothesis would: a rule whose precondition fails is not a step
                lines.append(f"# state.{name}(...) skipped: its precondition does not hold")
                continue
            lines.append(f"state.{name}({', '.join(f'{k}={_arg(v)}' for k, v in kwargs.items())})")
            getattr(machine, name)(**kwargs)
            machine.refines_the_model_and_keeps_history_clauses()
    except Exception as exc:
        _ended(outcome, exc, "the program could not finish")
    finally:
        lines.append("state.teardown()")
        if machine is not None:
            machine.teardown()
    outcome.runs = config.runs[-1:]
    return outcome


def _ended(outcome: LockstepOutcome, exc: BaseException, what: str) -> None:
    """Record how a run ended: a broken clause, a protocol break (or silence), or anything else (unknown)."""
    broke = _found(exc, Broke)
    protocol = _found(exc, ProtocolError)
    if broke is not None:
        outcome.verdict, outcome.clause_id, outcome.message = Verdict.INVALID, broke.clause_id, str(broke)
    elif protocol is not None:
        outcome.verdict, outcome.message, outcome.ended = protocol.verdict, str(protocol), PROTOCOL
    else:  # the environment or the adapter could not go on: no evidence either way
        outcome.verdict, outcome.ended = Verdict.UNKNOWN, COMPLETION
        outcome.message = f"{what}: {type(exc).__name__}: {exc}"


def _found(exc: BaseException | None, kind: type[BaseException], depth: int = 0) -> Any:
    """``exc`` itself, or one inside it (an exception group, e.g. Hypothesis' FlakyFailure, or its cause)."""
    if exc is None or depth > 8:
        return None
    if isinstance(exc, kind):
        return exc
    for inner in getattr(exc, "exceptions", ()) or ():
        hit = _found(inner, kind, depth + 1)
        if hit is not None:
            return hit
    return _found(exc.__cause__, kind, depth + 1)


PROFILES: dict[str, dict[str, Any]] = {
    # bounded: seconds per adapter; what certify runs by default and the kit's CI uses
    "ci": {"max_examples": 4, "stateful_step_count": 5},
    # nightly: many more and longer programs
    "thorough": {"max_examples": 200, "stateful_step_count": 20},
}


def run_lockstep(config: LockstepConfig, *, profile: str = "ci", seed: int | None = None,
                 max_examples: int | None = None, database: Path | None = None) -> LockstepOutcome:
    """Run the machine under a settings profile; a failure comes back shrunk, with its program."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import seed as fix_seed
    from hypothesis.database import DirectoryBasedExampleDatabase
    from hypothesis.reporting import with_reporter
    from hypothesis.stateful import get_state_machine_test

    for program in SEED_PROGRAMS:
        found = run_program(config, program)
        if found.verdict is not Verdict.VALID:
            found.results = list(config.results)
            return found
    store = database / "failures.txt" if database is not None else None
    for version, blob in _stored(store):
        found = _replay(config, version, blob)
        if found is not None:
            return found
    limits = dict(PROFILES[profile])
    if max_examples is not None:
        limits["max_examples"] = max_examples
    db = DirectoryBasedExampleDatabase(str(database)) if database is not None else None
    chosen = settings(deadline=None, print_blob=True, database=db, derandomize=False,
                      suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                      phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink], **limits)
    test = get_state_machine_test(make_machine(config), settings=chosen)
    if seed is not None:
        test = fix_seed(seed)(test)
    report: list[str] = []
    outcome = LockstepOutcome(Verdict.VALID, report=report)
    from hypothesis.internal.conjecture import engine
    budget, engine.MAX_SHRINKING_SECONDS = engine.MAX_SHRINKING_SECONDS, config.shrink_budget_s  # documented knob
    try:
        with with_reporter(report.append):
            test()
    except Exception as exc:  # a broken clause, a protocol break, or a run that could not go on (unknown)
        _ended(outcome, exc, "lockstep could not finish")
        report.extend(_notes(exc))
    finally:
        engine.MAX_SHRINKING_SECONDS = budget
    if store is not None and outcome.verdict is Verdict.INVALID:
        lines = [line for line in outcome.report if "@reproduce_failure(" in line]
        if lines:
            store.parent.mkdir(parents=True, exist_ok=True)
            with store.open("a") as f:
                f.write(lines[0].strip() + "\n")
    outcome.results = list(config.results)
    outcome.runs = list(config.runs)
    if outcome.verdict is Verdict.VALID and (not config.results or not config.compared):
        outcome.verdict = Verdict.UNKNOWN
    return outcome


_BLOB = re.compile(r"@reproduce_failure\((.*?)\)")


def _stored(store: Path | None) -> list[tuple[str, bytes]]:
    """Failures an earlier run stored: (hypothesis version, blob), newest first."""
    if store is None or not store.exists():
        return []
    found = []
    for line in reversed(store.read_text().splitlines()):
        match = _BLOB.search(line)
        if match:
            try:
                version, blob = ast.literal_eval(f"({match.group(1)})")
                found.append((version, blob))
            except (ValueError, SyntaxError):
                continue
    return found


def _replay(config: LockstepConfig, version: str, blob: bytes) -> LockstepOutcome | None:
    """Try a stored failure first (the example database's job, kept here because a fixed seed disables it)."""
    from hypothesis import HealthCheck, reproduce_failure, settings
    from hypothesis.errors import DidNotReproduce
    from hypothesis.stateful import get_state_machine_test

    chosen = settings(deadline=None, print_blob=True, database=None, suppress_health_check=list(HealthCheck),
                      max_examples=1, stateful_step_count=max(p["stateful_step_count"] for p in PROFILES.values()))
    test = reproduce_failure(version, blob)(get_state_machine_test(make_machine(config), settings=chosen))
    outcome = LockstepOutcome(Verdict.INVALID)
    try:
        test()
    except Broke as exc:
        outcome.clause_id, outcome.message = exc.clause_id, str(exc)
        outcome.report = [*_notes(exc), f"@reproduce_failure({version!r}, {blob!r})"]
    except (DidNotReproduce, Exception):  # fixed since, or a different Hypothesis: explore afresh
        return None
    outcome.results, outcome.runs = list(config.results), list(config.runs)
    return outcome


def _notes(exc: BaseException) -> list[str]:
    """Hypothesis attaches the falsifying program and the reproduce blob as exception notes."""
    lines: list[str] = []
    for note in getattr(exc, "__notes__", []):
        lines += note.splitlines()
    return lines


@contextlib.contextmanager
def hypothesis_home(folder: Path) -> Iterator[None]:
    """Hypothesis' own files (its constants cache, ...) go under ``folder`` instead of ``./.hypothesis`` in the
    user's working directory; the home before is restored afterwards (a test suite calling certify keeps its own)."""
    from hypothesis import configuration

    before = getattr(configuration, "__hypothesis_home_directory", None)
    configuration.set_hypothesis_home_dir(folder)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(before)
