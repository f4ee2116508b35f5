"""The shape of a chaos or certify results document, checked before ``merge`` or a report reads one.

``recoverykit merge`` reads results.json files from other machines and other kit runs; a truncated,
hand-edited or foreign file must be refused with a message naming what is wrong (a usage error),
never reach the merge and the report builders as a ``KeyError`` (a kit defect, exit 70). The models
list only what those builders read, strictly typed (no coercion: they use the document as it is);
every other key is allowed and kept.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from recoverykit.model.contract import CLAUSES
from recoverykit.model.errors import InvalidArgument

CLAUSE_IDS = frozenset(c.id for c in CLAUSES)
Number = int | float


class _Open(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class ClauseEntry(_Open):
    clause: str
    verdict: Literal["valid", "invalid", "unknown", "not_applicable"]
    text: str

    @model_validator(mode="after")
    def _known(self) -> ClauseEntry:
        if self.clause not in CLAUSE_IDS:
            raise ValueError(f"clause {self.clause!r} is not in the contract catalogue")
        return self


class CaseEntry(_Open):
    id: str
    status: str
    scenario: str | None = None
    point: str | None = None
    kind: str | None = None
    second: str | None = None
    hit: int | None = None
    why: str | None = None
    replay: str | None = None
    bundle: str | None = None
    violations: list[str]
    leftovers: list[int] = []
    clauses: list[ClauseEntry] = []
    timings: dict[str, Number | None] | None = None
    adapter: dict[str, Any] | None = None
    reached: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _judged_cell(self) -> CaseEntry:
        if self.status in ("passed", "failed") and (self.point is None or self.kind is None):
            raise ValueError(f"case {self.id!r} is {self.status} but names no point and restart kind")
        return self


class Cell(_Open):
    point: str
    kind: str
    status: Literal["exercised", "unknown", "not_implemented", "not_reachable", "not_selected"]
    cases: int
    failed: int
    case_ids: list[str]
    why: str | None  # required, may be null


class Coverage(_Open):
    cells: list[Cell]
    declared_points: list[str]
    declared_kinds: list[str]


class AdapterInfo(_Open):
    name: str | None = None
    version: str | None = None


class AcceptanceInfo(_Open):
    accepted: dict[str, str] = {}  # clause -> where it was accepted (--accept, a baseline file)

    @model_validator(mode="after")
    def _known(self) -> AcceptanceInfo:
        unknown = sorted(set(self.accepted) - CLAUSE_IDS)
        if unknown:
            raise ValueError(f"accepted clause {unknown[0]!r} is not in the contract catalogue")
        return self


class RunInfo(_Open):
    """The whole run a shard is part of (``reports.shard_set`` checks a merge against it)."""
    cases: int | None = None
    case_ids: list[str] | None = None
    trace_sha256: str | None = None


class PartInfo(_Open):
    """One original part of a merged document (``reports.shard_set.identity``)."""
    shard: str | None = None
    seed: int | None = None
    mode: str | None = None
    run: RunInfo | None = None
    incomplete: bool | None = None
    interrupted_by: str | None = None


class ResultsDocument(_Open):
    kind: Literal["recoverykit-chaos-results"]
    cases: list[CaseEntry]
    shard: str | None = None  # K/N, or K/N+K/N... once merged
    run: RunInfo | None = None
    parts: list[PartInfo] | None = None
    seed: int | None = None
    kit_version: str | None = None
    mode: str | None = None
    incomplete: bool = False
    coverage: Coverage
    acceptance: AcceptanceInfo | None = None
    adapter: AdapterInfo | None = None
    started: Number = 0
    wall_s: Number = 0


# --- certify results (``recoverykit certify --out DIR``), as ``recoverykit report`` reads them ---------------------

VerdictText = Literal["valid", "invalid", "unknown", "not_applicable"]


class CertifyResult(_Open):
    clause: str
    verdict: VerdictText
    text: str = ""
    because: list[str] = []


class CertifyCase(_Open):
    name: str
    kind: str | None = None
    verdict: VerdictText
    clauses: list[str] = []
    message: str | None = ""
    program: list[str | int | float | bool | None] = []
    bundle: str | None = None
    seconds: Number | None = None
    results: list[CertifyResult] = []


class CertifyClause(_Open):
    verdict: str
    required: bool = False
    accepted_by: str | None = None


class CertifyFinding(_Open):
    clause: str
    status: str | None = None
    count: int = 0
    seen_in: list[str] = []
    accepted_by: str | None = None
    message: str | None = None
    shortest: dict[str, Any] | None = None


class CertifyAcceptance(_Open):
    accepted: dict[str, str] = {}
    stale: list[str] = []
    not_exercised: list[str] = []
    changed: list[str] = []


class CertifyDocument(_Open):
    verdict: VerdictText
    exit_code: int
    adapter: AdapterInfo | None = None
    seed: int | None = None
    profiles: list[str] = []
    required: list[str] = []
    clauses: dict[str, CertifyClause]
    acceptance: CertifyAcceptance | None = None
    findings: list[CertifyFinding] = []
    cases: list[CertifyCase]
    seconds: Number | None = None
    replay: str | None = None
    incomplete: bool = False


def _checked(model: type[BaseModel], doc: Any, source: str, command: str) -> dict[str, Any]:
    try:
        model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the document"
        raise InvalidArgument(f"{source} is not a well-formed {command} results document: {where}: {first['msg']} "
                              f"({exc.error_count()} problem(s) in all); pass the results.json that "
                              f"`recoverykit {command} --out DIR` wrote") from None
    return doc


def check_results(doc: Any, source: str) -> dict[str, Any]:
    """``doc`` itself if it has the shape of a chaos results document, else ``InvalidArgument`` naming the problem."""
    return _checked(ResultsDocument, doc, source, "chaos")


def check_certify(doc: Any, source: str) -> dict[str, Any]:
    """``doc`` itself if it has the shape of a certify results document, else ``InvalidArgument`` naming the
    problem (a case that is a string, a program that is a number, an adapter that is a list: exit 64, never 70)."""
    return _checked(CertifyDocument, doc, source, "certify")
