"""Running the lockstep machine: seed programs first, then Hypothesis under a settings profile.

Kept apart from the machine (``lockstep``) because this is policy, not specification: which short
programs are tried first (the track record of bugs runtimes had), how long a failure may shrink,
where failures are stored so the next run tries them first, and how the printed program is kept.

A finding does not end the search (docs/decisions.md D19): every seed program runs, every stored
failure is replayed, and after each Hypothesis search that found a clause the search runs again with
that clause known (``LockstepConfig.known``: noted, never raised again), until a search finds nothing
new or the profile's ``max_findings`` is reached. Accepted clauses are known from the start, so a
known finding cannot use up the search. Each finding is the first failure of its clause, shrunk by
Hypothesis on its own (Hypothesis' ``report_multiple_bugs`` would stop generating ten seconds after the
first bug, a handful of lockstep programs, and tell bugs apart by the line that raised them, not by
clause). A run comes back as a ``LockstepOutcome`` holding every ``Finding``: its clause, the program
of rules, the ``@reproduce_failure`` line Hypothesis printed, and how many programs broke it.
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
from recoverykit.conformance.lockstep import Broke, Diverged, LockstepConfig, NotSettled, make_machine
from recoverykit.model.catalogue import RestartKind, Verdict


def _program(report: list[str]) -> list[str]:
    # the invariant runs after every rule anyway: the program shows the rules alone
    return [line for line in report if (line.startswith("state") and "refines_the_model" not in line)
            or "reproduce_failure" in line]


@dataclass
class Finding:
    """The first failure of one clause in this search, shrunk, and how often the search ran into it."""

    clause_id: str
    message: str
    report: list[str]  # the printed program and @reproduce_failure
    source: str  # seed program / stored failure / search
    run: Path | None = None
    count: int = 1  # programs that broke it: the first, plus those that ran into it once it was known

    @property
    def program(self) -> list[str]:
        return _program(self.report)

    @property
    def steps(self) -> int:
        return sum(1 for line in self.program if line.startswith("state.") and line != "state.teardown()")

    def as_dict(self) -> dict[str, Any]:
        return {"clause": self.clause_id, "message": self.message, "program": self.program, "steps": self.steps,
                "source": self.source, "count": self.count, "run_dir": str(self.run) if self.run else None}


@dataclass
class LockstepOutcome:
    verdict: Verdict
    clause_id: str | None = None  # the first finding's (kept for callers of one failure)
    message: str = ""
    report: list[str] = field(default_factory=list)  # the printed program and @reproduce_failure
    results: list[ClauseResult] = field(default_factory=list)
    runs: list[Path] = field(default_factory=list)
    ended: str | None = None  # how a run that did not finish ended: PROTOCOL (a break or silence) or COMPLETION
    ended_verdict: Verdict | None = None  # that end's own verdict (the outcome's is invalid once anything was found)
    findings: list[Finding] = field(default_factory=list)
    searches: int = 0  # Hypothesis searches run (one more after each new finding)
    repeats: dict[str, int] = field(default_factory=dict)  # known (accepted) clauses broken again: programs
    repeat_texts: dict[str, str] = field(default_factory=dict)  # ... and the first text of each
    stopped: str = ""  # why the search ended before finding nothing new, if it did

    @property
    def program(self) -> list[str]:
        return _program(self.report)


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
    except Diverged:  # a known clause broke where the model cannot follow: the program is over, nothing new
        lines.append("# discarded: a known clause broke")
    except NotSettled as exc:  # the runtime was still at work when the kit stopped waiting: no verdict
        lines.append("# discarded: the work had not settled")
        outcome.verdict, outcome.message = Verdict.UNKNOWN, str(exc)
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


def _nondeterministic(outcome: LockstepOutcome, exc: BaseException, seed: int | None) -> None:
    """Hypothesis' ``Flaky`` errors (``FlakyStrategyDefinition``, ``FlakyReplay``, a ``FlakyFailure`` with no broken
    clause inside) mean the runtime answered the same program differently on two runs; a newcomer shown the raw
    Hypothesis text had no hint of that. Still unknown, never valid: the search proved nothing either way."""
    from hypothesis.errors import Flaky

    if outcome.verdict is not Verdict.UNKNOWN or _found(exc, Flaky) is None:
        return  # a broken clause seen once is a broken clause (invalid); a protocol break keeps its own verdict
    again = f"replay with --seed {seed}" if seed is not None else "replay with the --seed certify printed"
    outcome.message = (
        "the runtime answered the same program differently on two runs: it is nondeterministic under the same "
        "operations (timing, a race, state kept across runs, randomness), so the lockstep search cannot shrink "
        f"or confirm what it saw; no verdict. {again} and compare the runs' histories, or run the failing "
        f"program alone (Hypothesis said: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")


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
MAX_FINDINGS = {"ci": 5, "thorough": 20}  # distinct clauses one lockstep run reports before it stops searching


def run_lockstep(config: LockstepConfig, *, profile: str = "ci", seed: int | None = None,
                 max_examples: int | None = None, database: Path | None = None,
                 accepted: frozenset[str] | set[str] = frozenset()) -> LockstepOutcome:
    """Seed programs, stored failures, then Hypothesis searches under a settings profile until one finds
    nothing new; every clause found comes back shrunk, with its program. ``accepted`` clauses are known
    from the start: noted when broken again, never a finding, never the end of a program's judging."""
    config.known |= set(accepted)
    outcome = LockstepOutcome(Verdict.VALID)
    store = database / "failures.txt" if database is not None else None
    limit = MAX_FINDINGS.get(profile, MAX_FINDINGS["ci"])
    try:
        for program in SEED_PROGRAMS:
            if not _absorb(config, outcome, run_program(config, program), "seed program"):
                return outcome  # finished below
        for version, blob in _stored(store):
            found = _replay(config, version, blob)
            if found is not None:
                _absorb(config, outcome, found, "stored failure")
        while len(outcome.findings) < limit:
            found = _search(config, profile, seed, max_examples, database)
            outcome.searches += 1
            before = len(outcome.findings)
            if not _absorb(config, outcome, found, "search") or len(outcome.findings) == before:
                break
            _store(store, outcome.findings[-1])
        else:
            outcome.stopped = (f"the search stopped after {limit} distinct findings (the {profile} profile's "
                               "limit); other clauses may be broken too")
    finally:
        _finish(config, outcome)
    return outcome


def _absorb(config: LockstepConfig, outcome: LockstepOutcome, found: LockstepOutcome, source: str) -> bool:
    """Take one program's or search's result into the whole outcome; False when the search must stop (a
    protocol break, silence, or an environment that could not go on: nothing after it would be evidence)."""
    if found.clause_id is not None:
        if found.clause_id not in config.known:
            config.known.add(found.clause_id)
            outcome.findings.append(Finding(found.clause_id, found.message, found.report, source,
                                            config.runs[-1] if config.runs else None))
        return True
    if found.verdict is Verdict.VALID or (found.verdict is Verdict.UNKNOWN and found.ended is None):
        return True  # valid, or a program whose work had not settled (``config.unsettled``): search on
    outcome.verdict, outcome.message, outcome.ended = found.verdict, found.message, found.ended
    outcome.ended_verdict, outcome.report = found.verdict, found.report
    return False


def _finish(config: LockstepConfig, outcome: LockstepOutcome) -> LockstepOutcome:
    """The outcome's verdict and its first finding's fields, from everything the search found."""
    for f in outcome.findings:
        f.count += config.repeats.get(f.clause_id, 0)
    if outcome.findings:  # what was found stands; a run's end after it is recorded beside it (``ended``)
        first = outcome.findings[0]
        if outcome.ended is None:
            outcome.message, outcome.report = first.message, first.report
        outcome.verdict, outcome.clause_id = Verdict.INVALID, first.clause_id
    found = {f.clause_id for f in outcome.findings}
    outcome.repeats = {c: n for c, n in sorted(config.repeats.items()) if c not in found}
    outcome.repeat_texts = {c: config.first_text[c] for c in outcome.repeats if c in config.first_text}
    outcome.results = list(config.results)
    outcome.runs = list(config.runs)
    if outcome.verdict is Verdict.VALID and (not config.results or not config.compared):
        outcome.verdict = Verdict.UNKNOWN
    if config.unsettled:  # RI-02 unjudged there: unknown from these programs, never valid from them
        more = f" (and {len(config.unsettled) - 1} more program(s))" if len(config.unsettled) > 1 else ""
        text = f"not settled: {config.unsettled[0]}{more}"
        outcome.results.append(ClauseResult("RI-02", Verdict.UNKNOWN, text))
        if outcome.verdict is Verdict.VALID or (outcome.verdict is Verdict.UNKNOWN and not outcome.message):
            outcome.verdict, outcome.message = Verdict.UNKNOWN, text
    return outcome


def _search(config: LockstepConfig, profile: str, seed: int | None, max_examples: int | None,
            database: Path | None) -> LockstepOutcome:
    """One Hypothesis search of the machine; its first failure shrunk (within ``shrink_budget_s``)."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import seed as fix_seed
    from hypothesis.database import DirectoryBasedExampleDatabase
    from hypothesis.reporting import with_reporter
    from hypothesis.stateful import get_state_machine_test

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
        _nondeterministic(outcome, exc, seed)
        report.extend(_notes(exc))
    finally:
        engine.MAX_SHRINKING_SECONDS = budget
    return outcome


def _store(store: Path | None, finding: Finding) -> None:
    """Keep a found failure's blob: the next run replays it first (``_stored``)."""
    lines = [line for line in finding.report if "@reproduce_failure(" in line]
    if store is not None and lines:
        store.parent.mkdir(parents=True, exist_ok=True)
        with store.open("a") as f:
            f.write(lines[0].strip() + "\n")


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
    except (DidNotReproduce, Exception):  # fixed since, known by now, or a different Hypothesis: explore afresh
        return None
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
