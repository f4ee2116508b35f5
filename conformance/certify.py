"""``certify``: the pipeline, in one short function, and the verdict it ends in.

    scenarios (one run each) -> lockstep machine (bounded examples) -> history checker on every run
    -> per-clause verdicts -> results.json, junit.xml, a bundle per failing case -> exit code

A clause nobody exercised is unknown; a clause of a profile the adapter did not declare is not
applicable; a REQUIRED clause (one the chat-core scenarios exercise, ``scenarios.required_clauses``)
that ends unknown makes the whole verdict unknown: missing evidence is never a pass.

Known findings (``--accept CLAUSE``, ``--baseline FILE``: ``acceptance``) are reported ``accepted``,
never valid: an accepted clause neither fails the run nor holds it at unknown, and one that held is
reported as a stale acceptance. ``findings`` groups every broken clause with how often it broke and
its shortest replay.
"""

from __future__ import annotations

import contextlib
import json
import random
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from recoverykit.conformance.acceptance import (
    Acceptance,
    baseline_document,
    classify,
    derive,
    grown,
    grown_text,
    write_baseline,
)
from recoverykit.conformance.broker import FailpointBroker
from recoverykit.conformance.bundle import write_bundle
from recoverykit.conformance.checker import (
    COMPLETION,
    KIT,
    PROTOCOL,
    PSEUDO_CLAUSES,
    SELF_REPORTED,
    ClauseResult,
    check,
    pseudo_result,
    unknown_if_truncated,
)
from recoverykit.conformance.checks_script import unmet_by_failed_requests
from recoverykit.conformance.client_process import split_command
from recoverykit.conformance.environment import BrokerFactory, Run, make_run_dir
from recoverykit.conformance.errors import (
    AdapterCommandError,
    AdapterTimeout,
    OperationFailed,
    OutputsNotWritten,
    ProtocolError,
)
from recoverykit.conformance.junit import write_junit
from recoverykit.conformance.lockstep import LockstepConfig
from recoverykit.conformance.lockstep_run import hypothesis_home, run_lockstep
from recoverykit.conformance.out_dir import claim
from recoverykit.conformance.pacing import Pacing, using
from recoverykit.conformance.private_files import private_dir, privatize, write_private
from recoverykit.conformance.proofs import proof_of, proven
from recoverykit.conformance.scenarios import Scenario, all_scenarios, required_clauses
from recoverykit.conformance.unknowns import CAPABILITY, WINDOW, Declared, Why, counts, of_certify
from recoverykit.model.catalogue import Profile, Verdict
from recoverykit.model.contract import CLAUSES
from recoverykit.model.errors import InvalidArgument, RecoveryKitError

CATALOGUE = frozenset(c.id for c in CLAUSES)

PARALLEL = 3  # scenario runs at once: they spend most of their time waiting on processes
Progress = Callable[[str, str], None]  # (case name, what happened: "start" / a verdict value)


def default_adapter() -> str:
    """The bundled reference runtime, started with this very interpreter."""
    return f"{shlex.quote(sys.executable)} -m recoverykit.impl"


@dataclass
class Options:
    adapter: str | None = None
    profiles: tuple[str, ...] = (Profile.CHAT_CORE.value,)
    seed: int | None = None
    out: Path | None = None
    examples: int | None = None
    settings_profile: str = "ci"
    only: tuple[str, ...] = ()  # scenario ids and/or "lockstep"; empty: everything
    broker_factory: BrokerFactory | None = FailpointBroker  # None: no broker (no failpoint can pause)
    progress: Progress | None = None
    strict_evidence: bool = False  # a required clause only the runtime's own word holds valid is unknown
    acceptance: Acceptance = field(default_factory=Acceptance)  # known findings (--accept, --baseline)
    write_baseline: Path | None = None  # write this run's findings here (--write-baseline)
    pacing: Pacing = field(default_factory=Pacing)  # the windows, scaled (--timeout-scale)
    calibrate: bool = True  # measure the runtime first and scale the windows up if it is slow (``calibration``)
    notice: Callable[[str], None] | None = None  # one line for the user (the calibration's summary)


@dataclass
class Case:
    name: str
    kind: str  # scenario / lockstep
    verdict: Verdict
    clauses: tuple[str, ...] = ()
    results: list[ClauseResult] = field(default_factory=list)
    message: str = ""
    program: list[str] = field(default_factory=list)
    run_dirs: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    bundle: Path | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)  # lockstep: every clause its search found
    repeats: dict[str, int] = field(default_factory=dict)  # lockstep: accepted clauses broken again (programs)

    def broken(self) -> set[str]:
        return {r.clause_id for r in self.results if r.verdict is Verdict.INVALID}

    def accepted(self, accepted: Any) -> bool:
        """Invalid only through accepted clauses: a known finding, neither a pass nor a new failure."""
        broken = self.broken()
        return self.verdict is Verdict.INVALID and bool(broken) and broken <= set(accepted)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "verdict": self.verdict.value, "clauses": list(self.clauses),
                "message": self.message, "program": self.program, "seconds": round(self.seconds, 3),
                "run_dirs": [str(p) for p in self.run_dirs], "bundle": str(self.bundle) if self.bundle else None,
                "results": [r.as_dict() for r in self.results],
                **({"findings": self.findings} if self.kind == "lockstep" else {}),
                **({"repeats": self.repeats} if self.repeats else {})}


@dataclass
class Certification:
    adapter: str
    out: Path
    seed: int
    profiles: tuple[str, ...]
    required: frozenset[str]
    declared: set[str] = field(default_factory=set)
    adapter_info: dict[str, Any] = field(default_factory=dict)
    cases: list[Case] = field(default_factory=list)
    clauses: dict[str, Verdict] = field(default_factory=dict)
    verdict: Verdict = Verdict.UNKNOWN
    seconds: float = 0.0
    interrupted: int | None = None  # the signal that stopped the run early (results then say incomplete)
    unwritten: list[str] = field(default_factory=list)  # outputs a full disk kept from being written (verdict unknown)
    bases: dict[str, str] = field(default_factory=dict)  # clause -> kit / self-reported (judged clauses only)
    strict_evidence: bool = False
    acceptance: Acceptance = field(default_factory=Acceptance)
    baseline_error: str | None = None  # --write-baseline failed after the run (told on stderr; not the exit)
    pacing: Pacing = field(default_factory=Pacing)  # the windows every case was given (after calibration)
    declarations: Declared = field(default_factory=Declared)  # init_ok's observes, failpoints, lacks ...
    unknowns: dict[str, Why] = field(default_factory=dict)  # unknown clause -> its reason class (unknowns.py)

    @property
    def exit_code(self) -> int:
        return 128 + self.interrupted if self.interrupted is not None else self.verdict.exit_code

    def replay_command(self, case: str | None = None) -> str:
        parts = ["recoverykit", "certify", "--adapter", self.adapter, "--seed", str(self.seed)]
        if case:
            parts += ["--only", case]
        return shlex.join(parts)

    @property
    def accepted(self) -> dict[str, str]:
        """Accepted clauses and by what, with the aggregate ones accepted through them (``acceptance.derive``)."""
        return derive(self.acceptance.accepted, self.breaks(), self.acceptance.rests_on)

    def breaks(self) -> list[tuple[str, tuple[str, ...]]]:
        """(clause, the clauses it rests on) per invalid result of every case."""
        return [(r.clause_id, tuple(r.because)) for case in self.cases for r in case.results
                if r.verdict is Verdict.INVALID]

    def label(self, clause_id: str) -> str:
        """The clause's verdict as reported: ``accepted`` for a known finding that broke again (never valid)."""
        v = self.clauses.get(clause_id, Verdict.UNKNOWN)
        return "accepted" if v is Verdict.INVALID and clause_id in self.accepted else v.value

    def acceptance_summary(self) -> dict[str, Any]:
        warning = self.acceptance.adapter_warning(self.adapter_info)
        return {**self.acceptance.as_dict(),
                **classify(self.accepted, {c: v.value for c, v in self.clauses.items()}),
                "grown": grown_text(grown(self.acceptance.rests_on, self.breaks())),
                **({"adapter_warning": warning} if warning else {})}

    def findings(self) -> list[dict[str, Any]]:
        return findings_of(self)

    def _clause_entry(self, c: str, v: Verdict) -> dict[str, Any]:
        entry: dict[str, Any] = {"verdict": self.label(c), "required": c in self.required}
        if c in self.accepted:
            entry.update(accepted_by=self.accepted[c], finding=v.value)
            if v is Verdict.VALID:
                entry["stale_acceptance"] = True  # accepted, yet it held here: the acceptance can go
        if c in self.bases:
            entry.update(evidence=self.bases[c], proof=proof_of(c), proven_by=list(proven().get(c, ())))
        if c in self.unknowns and v is Verdict.UNKNOWN:
            entry["unknown"] = self.unknowns[c].as_dict()
        return entry

    def unknowns_summary(self) -> dict[str, Any]:
        """Unknown catalogue clauses per reason class, and the applicable ones (not ``not_applicable``)."""
        applicable = sum(v is not Verdict.NOT_APPLICABLE for c, v in self.clauses.items() if c in CATALOGUE)
        return {"classes": counts(self.unknowns), "applicable": applicable}

    def as_dict(self) -> dict[str, Any]:
        from recoverykit import __version__
        return {"verdict": self.verdict.value, "exit_code": self.exit_code, "kit_version": __version__,
                "adapter": {"command": self.adapter, **self.adapter_info, "profiles": sorted(self.declared)},
                "seed": self.seed, "profiles": list(self.profiles), "required": sorted(self.required),
                "clauses": {c: self._clause_entry(c, v) for c, v in sorted(self.clauses.items())},
                "acceptance": self.acceptance_summary(), "findings": self.findings(),
                 "unknowns": self.unknowns_summary(), "declarations": self.declarations.as_dict(),
                 "strict_evidence": self.strict_evidence, "pacing": self.pacing.as_dict(),
                "cases": [c.as_dict() for c in self.cases], "seconds": round(self.seconds, 3),
                "replay": self.replay_command(),
                **({"incomplete": True, "interrupted_by": signal.Signals(self.interrupted).name}
                   if self.interrupted is not None else {}),
                **({"outputs_incomplete": list(self.unwritten)} if self.unwritten else {})}


def certify(options: Options) -> Certification:
    """Run every applicable scenario and the lockstep machine against one adapter; write the results.

    The run holds its ``--out`` for its whole length (``out_dir.claim``): a concurrent run into the same
    directory is refused (``OutDirBusy``, exit 64), an earlier run's outputs move to ``previous/NNN/``.
    """
    for p in options.profiles:
        if p not in {x.value for x in Profile}:
            raise InvalidArgument(f"--profile {p!r} is not a profile of the contract; use one of "
                                  f"{', '.join(x.value for x in Profile)}")
    adapter = default_adapter() if options.adapter is None else options.adapter
    split_command(adapter)  # an empty or unparsable command is a usage error, never the reference runtime
    out = Path(options.out) if options.out else Path(tempfile.mkdtemp(prefix="rk-certify-"))
    with claim(out):
        return _certify(options, adapter, out)


def _certify(options: Options, adapter: str, out: Path) -> Certification:
    started = time.monotonic()
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
    required = frozenset().union(*(required_clauses(p) for p in options.profiles))
    cert = Certification(adapter, out, seed, options.profiles, required, strict_evidence=options.strict_evidence,
                         acceptance=options.acceptance)
    chosen = [s for s in all_scenarios() if not options.only or s.id in options.only]
    lockstep = (not options.only or "lockstep" in options.only)
    finished: list[Case] = []  # every case as it ends: what an interrupted run still reports
    cert.pacing = options.pacing
    if options.calibrate and (chosen or lockstep):
        from recoverykit.conformance.calibration import calibrate
        cert.pacing = calibrate(adapter, out / "runs", options.pacing, broker_factory=options.broker_factory)
        if options.notice is not None and cert.pacing.calibration is not None:
            options.notice(calibration_line(cert.pacing))

    def done(case: Case) -> Case:
        finished.append(case)
        return case

    try:
        if chosen:  # the first run learns the declared profiles; the rest run side by side (mostly waiting)
            cases = [done(_scenario_case(cert, chosen[0], options))]
            if not cert.adapter_info and cases[0].verdict is not Verdict.NOT_APPLICABLE:
                # the handshake itself failed: that is the verdict; every other case would only fail the same way
                why = f"not run: the adapter's handshake failed in {cases[0].name}"
                cases += [Case(s.id, "scenario", Verdict.UNKNOWN, s.clauses, message=why) for s in chosen[1:]]
                cases += [Case("lockstep", "lockstep", Verdict.UNKNOWN, message=why)] if lockstep else []
                lockstep = False
            else:
                pool = ThreadPoolExecutor(max_workers=PARALLEL)
                try:
                    cases += list(pool.map(lambda s: done(_scenario_case(cert, s, options)), chosen[1:]))
                finally:
                    pool.shutdown(wait=False, cancel_futures=True)  # an interrupt must not wait for queued ones
            cert.cases += cases
        if lockstep and (not cert.declared or "chat_core" in cert.declared):
            cert.cases.append(done(_lockstep_case(cert, options)))
    except KeyboardInterrupt as exc:  # SIGINT / SIGTERM (kit/signals.py): report what finished, marked incomplete
        order = {s.id: i for i, s in enumerate(chosen)}
        cert.cases = sorted(finished, key=lambda c: order.get(c.name, len(order)))
        cert.interrupted = getattr(exc, "signum", signal.SIGINT)
        try:
            exc.partial_results = _write(cert, started)  # type: ignore[attr-defined]
        except OutputsNotWritten:
            exc.partial_results = None  # type: ignore[attr-defined]
        raise
    _write(cert, started)
    if options.write_baseline is not None:
        from recoverykit import __version__
        try:  # checked writable before the run (cli); a failure now is told, and the verdict still decides the exit
            write_baseline(options.write_baseline, baseline_document(
                cert.findings(), written_by="certify", adapter=cert.adapter_info, kit_version=__version__,
                breaks=cert.breaks()))
        except InvalidArgument as exc:
            cert.baseline_error = str(exc)
    return cert


def _write(cert: Certification, started: float) -> Path:
    """Judge the cases so far, bundle the failing ones, write results.json and junit.xml."""
    cert.required = cert.required - waived(cert)  # what only capability-gated scenarios need is not required here
    cert.clauses = judge(cert)
    cert.bases = bases(cert)
    demoted = []
    if cert.strict_evidence:  # only the runtime's word holds it: missing evidence of the kit's own is unknown
        for c in cert.required:
            if cert.clauses.get(c) is Verdict.VALID and cert.bases.get(c) != KIT:
                cert.clauses[c] = Verdict.UNKNOWN
                demoted.append(c)
    cert.unknowns = of_certify(cert.cases, cert.clauses, cert.declarations, demoted)
    cert.verdict = verdict_of(cert.clauses, cert.required, frozenset(cert.accepted))
    if cert.interrupted is not None and cert.verdict is Verdict.VALID:
        cert.verdict = Verdict.UNKNOWN  # an interrupted run is never a pass
    for case in cert.cases:
        if case.verdict in (Verdict.INVALID, Verdict.UNKNOWN) and case.run_dirs:
            try:
                case.bundle = write_bundle(cert, case)
            except OSError as exc:  # a full disk: no bundle, and a partial one would only take the results' room
                cert.unwritten.append(f"bundles/{case.name}: {exc.strerror or exc}")
                shutil.rmtree(cert.out / "bundles" / case.name, ignore_errors=True)
    cert.seconds = time.monotonic() - started
    if cert.unwritten:  # the evidence a later `check` would read is not all there: never a verdict of the runtime's
        cert.verdict = Verdict.UNKNOWN
    try:
        write_junit(cert, cert.out / "junit.xml")
        privatize(cert.out / "junit.xml")
    except OSError as exc:
        cert.unwritten.append(f"junit.xml: {exc.strerror or exc}")
        with contextlib.suppress(OSError):
            (cert.out / "junit.xml").unlink()
        cert.verdict = Verdict.UNKNOWN
    try:
        write_private(cert.out / "results.json", json.dumps(cert.as_dict(), indent=2) + "\n")
    except OSError as exc:
        with contextlib.suppress(OSError):
            (cert.out / "results.json").unlink()
        raise OutputsNotWritten(f"the results could not be written to {cert.out} ({exc.strerror or exc}; "
                                f"{'; '.join(cert.unwritten) or 'the disk may be full'}): the verdict is unknown. "
                                "Free some space or give another --out, and run again") from None
    return cert.out / "results.json"


def _tell(options: Options, name: str, what: str) -> None:
    if options.progress is not None:
        options.progress(name, what)


def _scenario_case(cert: Certification, scenario: Scenario, options: Options) -> Case:
    with using(cert.pacing):  # this case's thread: its windows, and the reasons that name them
        return _paced_case(cert, scenario, options)


def _paced_case(cert: Certification, scenario: Scenario, options: Options) -> Case:
    case = Case(scenario.id, "scenario", Verdict.NOT_APPLICABLE, scenario.clauses)
    if cert.declared and not scenario.applies(cert.declared):
        case.message = f"profile {scenario.profile.value} not declared by the adapter"
        _tell(options, scenario.id, case.verdict.value)
        return case
    _tell(options, scenario.id, "start")
    began = time.monotonic()
    run_dir = make_run_dir(cert.out / "runs", scenario.id)
    case.run_dirs.append(run_dir)
    try:
        with Run(cert.adapter, run_dir, scenario.provider_script(), broker_factory=options.broker_factory,
                 pacing=cert.pacing) as run:
            cert.declared = run.profiles
            cert.adapter_info = {"name": run.init_ok.name, "version": run.init_ok.version,
                                 "protocol_version": run.init_ok.protocol_version}
            cert.declarations = Declared.of(run.init_ok.model_dump(mode="json"))
            missing = scenario.missing_capability(run) if scenario.applies(run.profiles) else None
            if not scenario.applies(run.profiles):
                case.message = f"profile {scenario.profile.value} not declared by the adapter"
                case.run_dirs.clear()
            elif missing is not None:
                case.message = f"{CAPABILITY}{missing}"
                case.run_dirs.clear()
            else:
                failure = None
                try:
                    case.results = scenario.drive(run)
                except (ProtocolError, OperationFailed, RecoveryKitError, TimeoutError) as exc:
                    case.message, failure = f"the scenario could not finish: {exc}", exc
                evidence = run.evidence()  # the drive's own results too: no goal is met by an unanswered request
                case.results = unmet_by_failed_requests(evidence, case.results + check(evidence))
                case.results = unknown_if_truncated(case.results, evidence.ledger)  # the drives' results too
                if failure is not None:
                    ended(case.results, failure)
    except AdapterCommandError:
        raise  # the user's command cannot even start: a usage error, not a verdict
    except (ProtocolError, OperationFailed) as exc:
        case.message = str(exc)
        ended(case.results, exc)
    except Exception as exc:  # the kit's environment failed: no evidence, so unknown (never a traceback)
        case.message = f"the run could not be completed: {type(exc).__name__}: {exc}"
        ended(case.results, exc)
    case.verdict = _case_verdict(case)
    case.seconds = time.monotonic() - began
    _tell(options, scenario.id, _shown(cert, case))
    return case


def ended(results: list[ClauseResult], exc: BaseException) -> None:
    """A case that ended in an exception contributes a verdict to the run, under a pseudo-clause:
    a protocol break is invalid, silence unknown (``protocol``); anything else left its evidence
    incomplete, so unknown (``completion``). Never twice for the same pseudo-clause."""
    if isinstance(exc, ProtocolError):
        result = pseudo_result(PROTOCOL, exc.verdict, str(exc))
    else:
        result = pseudo_result(COMPLETION, Verdict.UNKNOWN, f"{type(exc).__name__}: {exc}")
    if result.verdict is Verdict.UNKNOWN and isinstance(exc, (TimeoutError, AdapterTimeout)):
        result = replace(result, reason=WINDOW)  # one of the kit's waits ran out: what the case missed is its
    if not any(r.clause_id == result.clause_id and r.verdict is result.verdict for r in results):
        results.append(result)




def waived(cert: Certification) -> frozenset[str]:
    """Required clauses only scenarios needing an undeclared capability exercise: not applicable to this
    adapter (as an undeclared profile's are), so they neither pass nor hold the verdict at unknown."""
    skipped = {c for case in cert.cases if case.message.startswith(CAPABILITY) for c in case.clauses}
    ran = {c for case in cert.cases if case.verdict is not Verdict.NOT_APPLICABLE for c in case.clauses}
    return frozenset(skipped - ran)


def _case_verdict(case: Case) -> Verdict:
    if case.message.startswith(("profile ", CAPABILITY)):
        return Verdict.NOT_APPLICABLE
    verdicts = {r.clause_id: r.verdict for r in case.results if r.clause_id in case.clauses or
                r.verdict is Verdict.INVALID}
    if Verdict.INVALID in verdicts.values() or any(r.verdict is Verdict.INVALID for r in case.results):
        bad = next(r for r in case.results if r.verdict is Verdict.INVALID)
        case.message = case.message or bad.text
        return Verdict.INVALID
    judged = {r.clause_id for r in case.results if r.verdict is Verdict.VALID}
    missing = [c for c in case.clauses if c not in judged]
    if missing or case.message:
        case.message = case.message or f"not judged: {', '.join(missing)}"
        return Verdict.UNKNOWN
    return Verdict.VALID


def _lockstep_case(cert: Certification, options: Options) -> Case:
    _tell(options, "lockstep", "start")
    began = time.monotonic()
    config = LockstepConfig(cert.adapter, out=cert.out / "runs", broker_factory=options.broker_factory,
                            pacing=cert.pacing)
    database = private_dir(cert.out / "hypothesis-db")  # Hypothesis' database and its other files: never ./.hypothesis
    with hypothesis_home(database), using(cert.pacing):
        outcome = run_lockstep(config, profile=options.settings_profile, seed=cert.seed,
                               max_examples=options.examples, database=database,
                               accepted=frozenset(cert.accepted))
    clauses = tuple(f.clause_id for f in outcome.findings)
    first_run = [f.run for f in outcome.findings if f.run is not None][:1] or outcome.runs[-1:]
    case = Case("lockstep", "lockstep", outcome.verdict, clauses, list(outcome.results), outcome.message,
                outcome.program, first_run if outcome.verdict is not Verdict.VALID else [],
                findings=[f.as_dict() for f in outcome.findings], repeats=dict(outcome.repeats))
    if outcome.stopped:
        case.message = f"{case.message}; {outcome.stopped}" if case.message else outcome.stopped
    for f in outcome.findings:
        case.results.append(ClauseResult(f.clause_id, Verdict.INVALID, f.message, tuple(f.program)))
    for clause_id, n in outcome.repeats.items():  # accepted clauses the search ran into: still broken
        if not any(r.clause_id == clause_id and r.verdict is Verdict.INVALID for r in case.results):
            text = outcome.repeat_texts.get(clause_id, f"broke {clause_id}")
            case.results.append(ClauseResult(clause_id, Verdict.INVALID, f"{text} [in {n} lockstep program(s)]"))
    if outcome.ended is not None:  # a protocol break (or silence), or a run that could not finish
        result = pseudo_result(outcome.ended, outcome.ended_verdict or outcome.verdict, outcome.message,
                               tuple(outcome.program))
        if not any(r.clause_id == result.clause_id and r.verdict is result.verdict for r in case.results):
            case.results.append(result)
        case.clauses = (*case.clauses, outcome.ended)
    if case.verdict is Verdict.VALID and case.broken():  # only accepted clauses broke: a known finding, not valid
        case.verdict = Verdict.INVALID
        case.message = next(r.text for r in case.results if r.verdict is Verdict.INVALID)
        case.run_dirs = outcome.runs[-1:]
    case.seconds = time.monotonic() - began
    _tell(options, "lockstep", _shown(cert, case))
    return case


def _shown(cert: Certification, case: Case) -> str:
    """A case's verdict as the progress line shows it: ``accepted`` when only accepted clauses broke."""
    return "accepted" if case.accepted(cert.accepted) else case.verdict.value


def judge(cert: Certification) -> dict[str, Verdict]:
    """Per clause over every case: any invalid is invalid, else any valid is valid, else unknown."""
    out: dict[str, Verdict] = {}
    for case in cert.cases:
        if case.verdict is Verdict.NOT_APPLICABLE:
            for c in case.clauses:
                out.setdefault(c, Verdict.NOT_APPLICABLE)
            continue
        for r in case.results:
            now = out.get(r.clause_id)
            if r.verdict is Verdict.INVALID or now is Verdict.INVALID:
                out[r.clause_id] = Verdict.INVALID
            elif r.verdict is Verdict.VALID or now is Verdict.VALID:
                out[r.clause_id] = Verdict.VALID
            else:
                out[r.clause_id] = Verdict.UNKNOWN
    for c in cert.required:
        if out.get(c) in (None, Verdict.NOT_APPLICABLE):
            out[c] = Verdict.UNKNOWN  # required but never exercised: no evidence, no pass
    for c in CLAUSES:  # the whole catalogue: never exercised is unknown, an undeclared profile not applicable
        if c.id not in out:
            declared = not cert.declared or c.profile.value in cert.declared
            out[c.id] = Verdict.UNKNOWN if declared else Verdict.NOT_APPLICABLE
    return out


def bases(cert: Certification) -> dict[str, str]:
    """Per judged clause: ``kit`` when some valid or invalid result of it rests on the kit's own evidence,
    else ``self-reported`` (it rests on the runtime's observe only)."""
    out: dict[str, str] = {}
    for case in cert.cases:
        for r in case.results:
            if r.verdict in (Verdict.VALID, Verdict.INVALID) and r.clause_id not in PSEUDO_CLAUSES:
                out[r.clause_id] = KIT if KIT in (r.basis, out.get(r.clause_id)) else SELF_REPORTED
    return out


def verdict_of(clauses: dict[str, Verdict], required: frozenset[str],
               accepted: frozenset[str] = frozenset()) -> Verdict:
    """Invalid if anything broke; unknown if a required clause was not judged valid or a case ended in
    silence or could not finish (a pseudo-clause judged unknown); else valid. An accepted clause (a known
    finding) decides nothing: neither its failure nor its missing evidence."""
    if any(v is Verdict.INVALID and c not in accepted for c, v in clauses.items()):
        return Verdict.INVALID
    if any(clauses.get(c) is not Verdict.VALID for c in required if c not in accepted):
        return Verdict.UNKNOWN
    if any(clauses.get(c) is Verdict.UNKNOWN for c in PSEUDO_CLAUSES):
        return Verdict.UNKNOWN
    return Verdict.VALID


def findings_of(cert: Certification) -> list[dict[str, Any]]:
    """Every broken clause once: how many runs broke it (scenario cases, lockstep programs), where, whether
    it is accepted, and its shortest replay: a scenario (one fixed program; the fastest) before a lockstep
    program (a search replayed by seed; the fewest steps)."""
    by: dict[str, dict[str, Any]] = {}
    for case in cert.cases:
        lockstep = {f["clause"]: f for f in case.findings}
        for clause_id in sorted(case.broken()):
            entry = by.setdefault(clause_id, {"clause": clause_id, "count": 0, "seen_in": [], "_best": None})
            message = next(r.text for r in case.results if r.clause_id == clause_id and r.verdict is Verdict.INVALID)
            if case.kind == "lockstep":
                found = lockstep.get(clause_id)
                entry["count"] += found["count"] if found else case.repeats.get(clause_id, 1)
                rank = (1, found["steps"]) if found else (2, 0)
                replay = {"case": case.name, "replay": cert.replay_command(case.name),
                          "steps": found["steps"] if found else None,
                          "program": found["program"] if found else [], "message": message}
            else:
                entry["count"] += 1
                rank = (0, case.seconds)
                replay = {"case": case.name, "replay": cert.replay_command(case.name), "steps": None,
                          "seconds": round(case.seconds, 3), "message": message}
            entry["seen_in"].append(case.name)
            if entry["_best"] is None or rank < entry["_best"][0]:
                entry["_best"] = (rank, replay)
    out = []
    for clause_id, entry in sorted(by.items()):
        best = entry.pop("_best")[1]
        out.append({**entry, "status": "accepted" if clause_id in cert.accepted else "invalid",
                    **({"accepted_by": cert.accepted[clause_id]} if clause_id in cert.accepted else {}),
                    "message": best["message"], "shortest": best})
    return out


def calibration_line(pacing: Pacing) -> str:
    """The calibration's one line for the terminal (``calibration.Calibration.summary``, from results.json's
    ``pacing.calibration``)."""
    c = pacing.calibration or {}

    def s(v: float | None) -> str:
        return "not measured" if v is None else f"{v:.2f} s"
    line = (f"calibration: start {s(c.get('start_s'))}, first model request {s(c.get('first_request_s'))}, turn "
            f"{s(c.get('turn_s'))} -> timeout scale x{pacing.scale:g}")
    if pacing.scale != pacing.asked:
        line += f" (asked x{pacing.asked:g})"
    return line + "".join(f"; {n}" for n in c.get("notes") or [])
