"""Known findings, acknowledged: ``--accept CLAUSE`` and baseline files, for certify and chaos alike.

A runtime that already breaks one clause must still be able to gate regressions in every other one
(pytest's strict xfail, a linter's baseline). An acceptance names contract clauses; the unit is the
clause because it is the unit of the contract's verdict (docs/decisions.md D19): a finding is "clause
C was judged invalid". A baseline entry also stores the sha256 of the clause's statement when it was
written: if the contract has since changed what C means, the entry no longer matches (it is listed as
``changed``) and C gates again until it is re-accepted. Where a finding was seen (cases, replays) is
kept in the entry for the reader, never used to match: the lockstep search is randomised, so "also
seen in another case" would make the gate flaky.

An accepted clause is never valid and never passed: it is reported ``accepted`` when it broke, as a
``stale`` acceptance when it held (time to drop it from the baseline), and it neither fails the run
nor holds the verdict at unknown. Pseudo-clauses (``protocol``, ``completion``) cannot be accepted:
a protocol break leaves nothing else judgeable.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recoverykit.conformance import input_files
from recoverykit.conformance.private_files import write_private
from recoverykit.model.contract import CLAUSES, clause
from recoverykit.model.errors import InvalidArgument

BASELINE_KIND = "recoverykit-baseline"
BASELINE_VERSION = 1
CLAUSE_IDS = frozenset(c.id for c in CLAUSES)
ACCEPT_FLAG = "--accept"


def statement_sha256(clause_id: str) -> str:
    return hashlib.sha256(clause(clause_id).statement.encode()).hexdigest()


@dataclass(frozen=True)
class Acceptance:
    """The acceptances in force for one run: clause -> where it was accepted (``--accept`` or the baseline)."""

    accepted: Mapping[str, str] = field(default_factory=dict)
    baseline: str | None = None  # the baseline file, as given
    changed: tuple[str, ...] = ()  # baseline entries whose clause statement changed since: not applied
    # an accepted aggregate clause (FA-01) -> the clauses its breaks rested on when the baseline was written: it is
    # accepted only while it rests on nothing else (``grown``)
    rests_on: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    adapter: Mapping[str, Any] = field(default_factory=dict)  # the adapter the baseline was written for

    def __bool__(self) -> bool:
        return bool(self.accepted)

    def as_dict(self) -> dict[str, Any]:
        return {"accepted": dict(sorted(self.accepted.items())), "baseline": self.baseline,
                "changed": list(self.changed),
                **({"rests_on": {c: list(on) for c, on in sorted(self.rests_on.items())}} if self.rests_on else {}),
                **({"baseline_adapter": dict(self.adapter)} if self.adapter else {})}

    def adapter_warning(self, adapter: Mapping[str, Any]) -> str | None:
        """A warning when the baseline was written for another adapter (by name): it is applied, and said so."""
        written, now = self.adapter.get("name"), adapter.get("name")
        if self.baseline is None or not written or written == now:
            return None
        return (f"the baseline {self.baseline} was written for adapter {written!r}, and is applied to {now!r}: "
                "its findings are accepted for this adapter too")

    @classmethod
    def from_dict(cls, doc: Any) -> Acceptance:
        """The acceptance a results document recorded (``as_dict``); none when it recorded none."""
        if not isinstance(doc, dict):
            return cls()
        accepted = doc.get("accepted") or {}
        if not isinstance(accepted, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in accepted.items()):
            raise InvalidArgument("the results document's acceptance.accepted is not a map of clause ids to sources")
        rests = doc.get("rests_on") or {}
        if not isinstance(rests, dict) or not all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                                                  for v in rests.values()):
            raise InvalidArgument("the results document's acceptance.rests_on is not a map of clause ids to lists")
        adapter = doc.get("baseline_adapter") if isinstance(doc.get("baseline_adapter"), dict) else {}
        return cls(dict(accepted), doc.get("baseline"), tuple(doc.get("changed") or ()),
                   {str(c): tuple(v) for c, v in rests.items()}, adapter)


def _clause_id(value: str, where: str) -> str:
    if value not in CLAUSE_IDS:
        near = sorted(c for c in CLAUSE_IDS if c.split("-")[0] == value.split("-")[0])[:8]
        raise InvalidArgument(f"{where} {value!r} is not a clause of the contract"
                              + (f" (clauses of that area: {', '.join(near)})" if near else
                                 "; `recoverykit contract docs` lists them"))
    return value


def load(accept: Iterable[str] = (), baseline: str | Path | None = None) -> Acceptance:
    """The acceptance of ``--accept`` values and a ``--baseline`` file; a bad value or file is ``InvalidArgument``."""
    accepted: dict[str, str] = {}
    changed: list[str] = []
    rests_on: dict[str, tuple[str, ...]] = {}
    adapter: dict[str, Any] = {}
    if baseline is not None:
        doc, entries = read_baseline(baseline, whole=True)
        adapter = {k: v for k, v in (doc.get("adapter") or {}).items() if k in ("name", "version")} \
            if isinstance(doc.get("adapter"), dict) else {}
        for entry in entries:
            if entry["statement_sha256"] != statement_sha256(entry["clause"]):
                changed.append(entry["clause"])
            else:
                accepted[entry["clause"]] = f"baseline {baseline}"
                if "rests_on" in entry:
                    rests_on[entry["clause"]] = tuple(entry["rests_on"])
    for value in accept:
        for part in (p.strip() for p in value.split(",")):
            if part:
                accepted[_clause_id(part, ACCEPT_FLAG)] = ACCEPT_FLAG
    return Acceptance(accepted, None if baseline is None else str(baseline), tuple(sorted(changed)),
                      {c: on for c, on in rests_on.items() if accepted.get(c, "").startswith("baseline")}, adapter)


def read_baseline(path: str | Path, whole: bool = False) -> Any:
    """The findings of a baseline file, checked entry by entry; anything else is ``InvalidArgument`` (exit 64)."""
    where = f"--baseline {path}"
    try:
        doc = input_files.read_json(path, "--baseline")
    except InvalidArgument as exc:
        raise InvalidArgument(f"{exc}; pass a file written by --write-baseline") from None
    if not isinstance(doc, dict) or doc.get("kind") != BASELINE_KIND:
        raise InvalidArgument(f"{where} is not a recoverykit baseline (kind {BASELINE_KIND!r}); pass a file written "
                              "by --write-baseline")
    if doc.get("version") != BASELINE_VERSION:
        raise InvalidArgument(f"{where} has version {doc.get('version')!r}; this kit reads version "
                              f"{BASELINE_VERSION}: write it again with --write-baseline")
    findings = doc.get("findings")
    if not isinstance(findings, list):
        raise InvalidArgument(f"{where}: findings is not a list")
    out = []
    for i, entry in enumerate(findings):
        if not isinstance(entry, dict) or not isinstance(entry.get("clause"), str) \
                or not isinstance(entry.get("statement_sha256"), str):
            raise InvalidArgument(f"{where}: findings[{i}] needs a clause id and the statement_sha256 it was "
                                  "written against")
        _clause_id(entry["clause"], f"{where}: findings[{i}].clause")
        rests = entry.get("rests_on")
        if rests is not None and (not isinstance(rests, list) or not all(isinstance(c, str) for c in rests)):
            raise InvalidArgument(f"{where}: findings[{i}].rests_on is not a list of clause ids")
        for c in rests or ():
            _clause_id(c, f"{where}: findings[{i}].rests_on")
        out.append(entry)
    return (doc, out) if whole else out


def baseline_document(findings: Iterable[Mapping[str, Any]], *, written_by: str, adapter: Mapping[str, Any],
                      kit_version: str, breaks: Iterable[tuple[str, Iterable[str]]] = ()) -> dict[str, Any]:
    """A baseline from a run's findings (``findings_of`` entries): every clause it judged invalid. ``breaks``
    (clause, the clauses that break rests on) per invalid result: an aggregate clause's entry records what its
    breaks rested on (``rests_on``), so a later run accepts it only while it rests on nothing new."""
    rests = rested_on(breaks)
    entries = []
    for f in findings:
        if f["clause"] not in CLAUSE_IDS:
            continue  # a pseudo-clause (a protocol break) is never acceptable
        if str(f.get("accepted_by") or "").startswith(DERIVED):
            continue  # accepted through other clauses: it follows them, a baseline names only the findings
        shortest = f.get("shortest") or {}
        entries.append({"clause": f["clause"], "statement_sha256": statement_sha256(f["clause"]),
                        "statement": clause(f["clause"]).statement, "count": f.get("count"),
                        "seen_in": list(f.get("seen_in", []))[:20], "replay": shortest.get("replay"),
                        "example": (f.get("message") or "")[:500],
                        **({"rests_on": rests[f["clause"]]} if f["clause"] in rests else {})})
    return {"kind": BASELINE_KIND, "version": BASELINE_VERSION, "written_by": written_by, "kit_version": kit_version,
            "adapter": {k: adapter.get(k) for k in ("name", "version") if k in adapter},
            "findings": sorted(entries, key=lambda e: e["clause"])}


def check_writable(path: str | Path) -> Path:
    """Fail fast, before a run, when ``--write-baseline`` could not be written: the path is opened for writing as
    the write will open it (not truncated; a file this made is removed again). A FIFO or a device is refused
    (``O_NONBLOCK``: no wait for a reader), as is a directory or a missing folder: ``InvalidArgument`` (exit 64)."""
    target = Path(path)
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC
    made = False
    try:
        try:
            fd, made = os.open(target, flags | os.O_CREAT | os.O_EXCL, 0o600), True
        except FileExistsError:
            fd = os.open(target, flags)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InvalidArgument(f"--write-baseline {path}: not a regular file; give a file path to write")
        finally:
            os.close(fd)
    except OSError as exc:
        raise InvalidArgument(f"--write-baseline {path}: cannot write there ({exc.strerror or exc}); nothing was "
                              "run") from None
    finally:
        if made:
            with contextlib.suppress(OSError):
                target.unlink()
    return target


def write_baseline(path: str | Path, doc: Mapping[str, Any]) -> Path:
    target = Path(path)
    try:
        write_private(target, json.dumps(doc, indent=1) + "\n")
    except OSError as exc:
        raise InvalidArgument(f"--write-baseline {path}: cannot write there ({exc})") from None
    return target


DERIVED = "derived from "  # how an aggregate clause accepted through the clauses it rests on says so


def rested_on(breaks: Iterable[tuple[str, Iterable[str]]]) -> dict[str, list[str]]:
    """Per aggregate clause (one whose breaks rest on others: FA-01), every clause its breaks rested on."""
    out: dict[str, set[str]] = {}
    for clause_id, because in breaks:
        if because:
            out.setdefault(clause_id, set()).update(because)
    return {c: sorted(on) for c, on in sorted(out.items())}


def grown(rests_on: Mapping[str, Iterable[str]], breaks: Iterable[tuple[str, Iterable[str]]]) -> dict[str, list[str]]:
    """Accepted aggregate clauses whose breaks now rest on clauses the baseline did not record: clause -> the new
    ones. Such a clause is not accepted: it gates, as a new finding."""
    now = rested_on(breaks)
    out = {c: sorted(set(now.get(c, ())) - set(on)) for c, on in rests_on.items()}
    return {c: new for c, new in sorted(out.items()) if new}


def grown_text(grew: Mapping[str, Iterable[str]]) -> list[str]:
    return [f"{c} (now also rests on {', '.join(new)})" for c, new in grew.items()]


def derive(accepted: Mapping[str, str], breaks: Iterable[tuple[str, Iterable[str]]],
           rests_on: Mapping[str, Iterable[str]] | None = None) -> dict[str, str]:
    """The acceptances in force, plus each aggregate clause (FA-01: every safety clause held) whose every break
    rests only on accepted clauses: a known finding too, never a new failure nor a pass. ``breaks`` holds
    (clause id, the clauses that break rests on: empty for an ordinary verdict) per invalid result. An aggregate
    clause a baseline accepted (``rests_on``: what its breaks rested on then) that now rests on other clauses too
    is dropped (``grown``): it gates."""
    breaks = list(breaks)
    gone = grown(rests_on or {}, breaks)
    accepted = {c: by for c, by in accepted.items() if c not in gone}
    out = dict(accepted)
    if not out:
        return out
    rests: dict[str, set[str] | None] = {}
    for clause_id, because in breaks:
        if clause_id in out:
            continue
        because = set(because)
        if not because or not because <= set(accepted) or rests.get(clause_id, set()) is None:
            rests[clause_id] = None
        else:
            rests.setdefault(clause_id, set()).update(because)  # type: ignore[union-attr]
    for clause_id, on in rests.items():
        if on:
            out[clause_id] = DERIVED + ", ".join(sorted(on))
    return out


def classify(accepted: Mapping[str, str], verdicts: Mapping[str, str]) -> dict[str, list[str]]:
    """Each accepted clause by what this run saw: ``confirmed`` (it broke: the known finding), ``stale`` (it held
    and never broke: the acceptance can go), ``not_exercised`` (no evidence either way)."""
    out: dict[str, list[str]] = {"confirmed": [], "stale": [], "not_exercised": []}
    for c in sorted(k for k, by in accepted.items() if not by.startswith(DERIVED)):  # derived ones follow these
        v = verdicts.get(c)
        out["confirmed" if v == "invalid" else "stale" if v == "valid" else "not_exercised"].append(c)
    return out
