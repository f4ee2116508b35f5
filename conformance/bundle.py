"""Failure bundles: everything one failing case leaves, in a layout ``recoverykit check`` re-reads.

A bundle is a directory (docs/certify.md#bundle-format)::

    bundle.json            seed, kit and adapter versions, case, verdict, clause results, program,
                           the replay command, the observed sections
    history.jsonl          the kit's operation history (invoke / ok / fail / info, observations, faults)
    provider-ledger.jsonl  every provider request and response (the usage ground truth)
    witness.jsonl          every real probe tool execution
    adapter.messages.jsonl every protocol line both ways; adapter.stderr.log: the adapter's logs
    data/                  a copy of the runtime's data directory at the end of the run
    program.txt            (lockstep) the shrunk program of rules and its @reproduce_failure line

Like etcd's stored robustness reports, a bundle is evidence that can be judged again later by a
newer checker, independently of the runtime that produced it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recoverykit.conformance import input_files
from recoverykit.conformance.checker import PSEUDO_CLAUSES, ClauseResult, Evidence, check, check_complete
from recoverykit.conformance.history import load_history
from recoverykit.conformance.private_files import copy_file, copy_tree, private_dir, privatize, write_private
from recoverykit.conformance.protocol_snapshot import Snapshot
from recoverykit.conformance.provider_ledger import read_ledger
from recoverykit.conformance.witness import read_witness
from recoverykit.model.catalogue import Verdict
from recoverykit.model.errors import InvalidArgument, MalformedRecord

if TYPE_CHECKING:
    from recoverykit.conformance.certify import Case, Certification

FILES = ("history.jsonl", "provider-ledger.jsonl", "witness.jsonl", "adapter.messages.jsonl", "adapter.stderr.log")
MANIFEST = "bundle.json"


def write_bundle(cert: Certification, case: Case) -> Path:
    """Copy the case's (last) run into ``<out>/bundles/<case>`` with a manifest; return the folder."""
    from recoverykit import __version__
    target = private_dir(cert.out / "bundles") / case.name
    target.mkdir(mode=0o700, exist_ok=True)
    run_dir = case.run_dirs[-1]
    for name in FILES:
        copy_file(run_dir / name, target / name)
    copied = copy_tree(run_dir / "data", target / "data")  # links stay links; bounded, holes kept
    if case.program:
        write_private(target / "program.txt", "\n".join(case.program) + "\n")
    manifest = {
        "case": case.name, "kind": case.kind, "verdict": case.verdict.value, "message": case.message,
        "seed": cert.seed, "kit_version": __version__, "adapter": {"command": cert.adapter, **cert.adapter_info},
        "observes": sorted(_observes(run_dir)), "clauses": list(case.clauses),
        "results": [r.as_dict() for r in case.results], "program": case.program,
        "replay": cert.replay_command(case.name), "run_dir": str(run_dir), "data_copy": copied,
    }
    write_private(target / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    privatize(target)  # a bundle is as private as the run it comes from: dirs 0700, files 0600
    return target


def _observes(run_dir: Path) -> set[str]:
    """The sections the adapter declared, read back from its init_ok line."""
    path = run_dir / "adapter.messages.jsonl"
    if not path.exists():
        return set()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:  # lines are clipped in the record (4 KiB) and may be anything the adapter wrote: never fatal
            record = json.loads(line)
            if record.get("dir") == "received" and '"init_ok"' in record.get("line", ""):
                observes = json.loads(record["line"]).get("observes", [])
                return {o for o in observes if isinstance(o, str)} if isinstance(observes, list) else set()
        except (ValueError, AttributeError, TypeError, RecursionError):
            continue
    return set()


def load_evidence(bundle: str | Path) -> tuple[Evidence, dict[str, Any]]:
    """A bundle's evidence, or ``InvalidArgument`` (a usage error) saying which file is not what the kit wrote."""
    folder = Path(bundle)
    if not (folder / "history.jsonl").exists():
        raise InvalidArgument(f"{folder} is not a recoverykit bundle: it has no history.jsonl (a bundle is a folder "
                              "under <out>/bundles/ written by `recoverykit certify`)")
    for name in ("history.jsonl", "provider-ledger.jsonl", "witness.jsonl"):  # no FIFO, device or huge file
        if (folder / name).exists() or (folder / name).is_symlink():
            input_files.regular_file(folder / name, "the bundle's")
    manifest = _json_object(folder / MANIFEST) if (folder / MANIFEST).exists() else {}
    observes = manifest.get("observes", [])
    if not isinstance(observes, list) or not all(isinstance(o, str) for o in observes):
        raise MalformedRecord(f"{folder / MANIFEST}: `observes` is not a list of section names")
    ledger = _records(folder / "provider-ledger.jsonl", read_ledger)
    witness = _records(folder / "witness.jsonl", read_witness) if (folder / "witness.jsonl").exists() else None
    history = load_history(folder / "history.jsonl")
    for o in history.observations:  # what the kit recorded passed the protocol's snapshot schema then
        try:
            Snapshot.model_validate_json(json.dumps(o.snapshot))
        except ValueError as exc:
            raise MalformedRecord(f"{folder / 'history.jsonl'}: observation {o.index} is not an observe snapshot "
                                  f"({str(exc).splitlines()[0]}); the history is corrupt") from None
    return Evidence(history, ledger, witness, frozenset(observes)), manifest


def _json_object(path: Path) -> dict[str, Any]:
    doc = input_files.read_json(path, "the bundle's")
    if not isinstance(doc, dict):
        raise MalformedRecord(f"{path}: is not a JSON object")
    return doc


def _records(path: Path, read: Any) -> Any:
    if not path.exists():
        return []
    try:
        found = read(path)
    except MalformedRecord:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise MalformedRecord(f"{path}: not the records the kit writes ({type(exc).__name__}: {exc})") from None
    records = found.records if hasattr(found, "records") else found
    if not all(isinstance(r, dict) for r in records):
        raise MalformedRecord(f"{path}: a record is not a JSON object")
    return found


def recheck(bundle: str | Path) -> tuple[Verdict, list[ClauseResult]]:
    """The history checker on a stored bundle: invalid if any clause broke (a protocol break included);
    unknown if the run was cut short (an operation never completed, a kill killed nothing), if nothing held,
    or if a clause the case was run for (``bundle.json``'s ``clauses``) did not hold on the stored history;
    else valid. So a re-check never calls valid what the run could not (certify judges a case the same way).

    A bundle whose files are not what the kit writes is a ``MalformedRecord`` (a usage error), never
    a verdict and never a crash."""
    evidence, manifest = load_evidence(bundle)
    try:
        results = check(evidence) + check_complete(evidence.history)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        raise MalformedRecord(f"{bundle}: its records are not what the kit writes, so they cannot be judged "
                              f"({type(exc).__name__}: {exc}); the bundle is corrupt") from None
    verdicts = {r.verdict for r in results}
    if Verdict.INVALID in verdicts:
        return Verdict.INVALID, results
    if any(r.clause_id in PSEUDO_CLAUSES and r.verdict is Verdict.UNKNOWN for r in results):
        return Verdict.UNKNOWN, results
    declared = manifest.get("clauses") if isinstance(manifest.get("clauses"), list) else []
    held = {r.clause_id for r in results if r.verdict is Verdict.VALID}
    missing = [c for c in declared if isinstance(c, str) and c not in held]
    if missing:
        seen = {r.clause_id for r in results}
        results += [ClauseResult(c, Verdict.UNKNOWN, f"not judged {c}: the case was run for it, and its stored "
                                 "history does not show it held") for c in missing if c not in seen]
        return Verdict.UNKNOWN, results
    return (Verdict.VALID if Verdict.VALID in verdicts else Verdict.UNKNOWN), results
