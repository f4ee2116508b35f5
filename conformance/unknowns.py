"""Why a clause stays unknown: one reason class per unknown clause, so an unknown says who could end it.

Missing evidence is unknown, never valid; but "unknown" alone tells an adapter author nothing. Each clause a
run leaves unknown is given one class, derived where ``certify`` and ``chaos`` fold their results:

- ``adapter_could_supply``: evidence the adapter could report and does not: an ``observe`` section it leaves out
  of ``init_ok.observes``, a failpoint or restart kind it does not declare, processes it does not list. The
  reason names what to add; docs/adapter-guide.md ``GUIDE`` says how.
- ``framework_lacks``: the adapter declares (``init_ok.lacks``) that the framework has no such feature. Reported
  as such, never as valid: a declared lack only explains an unknown; evidence still decides a judged clause.
- ``runtime_only``: evidence only the runtime holds: the clause rests on the runtime's own word (``observe``)
  with no evidence of the kit's (``--strict-evidence``), or on the outcome of an operation it never answered.
- ``window``: the kit's own wait ran out (a reply, a request, a failpoint, quiescence; see ``--timeout-scale``).
- ``not_exercised``: the kit's own residual: no case of this run reached the situation the clause is about.

The class comes from structure where the unknown is made (``ClauseResult.reason``, the declarations in
``init_ok``, a timeout's type); where only the result's text says why, ``TEXT_TABLE`` is the one place the
text is read (tests/test_unknown_classes.py checks each row).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ADAPTER_COULD_SUPPLY = "adapter_could_supply"
FRAMEWORK_LACKS = "framework_lacks"
RUNTIME_ONLY = "runtime_only"
WINDOW = "window"
NOT_EXERCISED = "not_exercised"
CLASSES = (ADAPTER_COULD_SUPPLY, FRAMEWORK_LACKS, RUNTIME_ONLY, WINDOW, NOT_EXERCISED)  # report order
RANK = {c: i for i, c in enumerate(CLASSES)}  # several reasons for one clause: the most actionable one is told

CAPABILITY = "capability not declared: "  # a certify case's message when the adapter lacks what the scenario needs
GUIDE = "docs/adapter-guide.md#20-unknown-clauses-what-the-adapter-can-supply"
HOW = {  # what the adapter adds, by what it left out (each a subsection of the guide's section 20)
    "observe": f"declare the section in init_ok.observes and fill it from the framework's store ({GUIDE})",
    "failpoint": f"declare the failpoint in init_ok.failpoints and call it from the framework's hook ({GUIDE})",
    "restart_kind": f"declare the kind in init_ok.restart_kinds and perform it in `restart` ({GUIDE})",
    "declaration": f"declare the optional init_ok field the reason names, if the framework has it ({GUIDE})",
    "processes": f"list every runtime process in `processes` (runtime_processes / Supervisor) ({GUIDE})",
}

# observe sections, and the words a check uses for one of their records
SECTIONS = {"work_items": ("work_items", "work item"), "goals": ("goals", "goal"), "turns": ("turns",),
            "tool_calls": ("tool_calls", "tool call"), "approvals": ("approvals",),
            "usage_receipts": ("usage_receipts", "receipt"), "leases": ("leases", "lease"), "waits": ("waits",),
            "fenced_writes": ("fenced_writes",), "runs": ("runs",), "tasks": ("tasks",),
            "wakeup_receipts": ("wakeup_receipts",), "workspaces": ("workspaces",),
            "recovery_coordinators": ("recovery_coordinators",), "retry_schedule": ("retry_schedule",),
            "reservations": ("reservations",)}
_OBSERVED = re.compile(r"\bobserve[ds]?\b|does not observe|"
                       r"no \w+ observed|observed in a settled")


@dataclass(frozen=True)
class Declared:
    """What the adapter declared in ``init_ok``, as far as the classes read it."""

    profiles: frozenset[str] = frozenset()
    observes: frozenset[str] | None = frozenset()  # None: not known (a document that did not keep init_ok's)
    failpoints: frozenset[str] = frozenset()
    restart_kinds: frozenset[str] = frozenset()
    lacks: Mapping[str, str] = field(default_factory=dict)  # clause -> why the framework lacks it
    lacked: Mapping[str, str] = field(default_factory=dict)  # feature (section, failpoint, init_ok field) -> why

    @classmethod
    def of(cls, init: Mapping[str, Any] | None) -> Declared:
        """From an ``init_ok`` (or the ``adapter`` block of a results document); absent fields are empty."""
        init = init or {}
        lacks: dict[str, str] = {}
        lacked: dict[str, str] = {}
        for lack in init.get("lacks") or ():
            if isinstance(lack, Mapping):
                for c in lack.get("clauses") or ():
                    lacks.setdefault(str(c), str(lack.get("why", "")))
                for f in lack.get("features") or ():
                    lacked.setdefault(str(f), str(lack.get("why", "")))

        def names(key: str) -> frozenset[str]:
            return frozenset(map(str, init.get(key) or ()))
        observes = names("observes") if "observes" in init else None
        return cls(names("profiles"), observes, names("failpoints"), names("restart_kinds"), lacks, lacked)

    def as_dict(self) -> dict[str, Any]:
        return {"profiles": sorted(self.profiles), "observes": sorted(self.observes or ()),
                "failpoints": sorted(self.failpoints), "restart_kinds": sorted(self.restart_kinds),
                "lacks": [*({"clauses": [c], "why": w} for c, w in sorted(self.lacks.items())),
                          *({"features": [f], "why": w} for f, w in sorted(self.lacked.items()))]}


@dataclass(frozen=True)
class Why:
    """One unknown clause's class, the reason it rests on, and (adapter_could_supply) how to supply it."""

    kind: str
    why: str
    how: str = ""
    needs: tuple[str, ...] = ()  # adapter_could_supply: the features it names (sections, failpoints, init_ok fields)

    def as_dict(self) -> dict[str, str]:
        return {"class": self.kind, "why": self.why[:300], **({"how": self.how} if self.how else {})}


def _sections(text: str) -> list[str]:
    low = text.lower()
    return [s for s, words in SECTIONS.items() if any(re.search(rf"\b{re.escape(w)}", low) for w in words)]


def _observe(text: str, declared: Declared) -> Why | None:
    if not _OBSERVED.search(text) or declared.observes is None:
        return None
    left_out = [s for s in _sections(text) if s not in declared.observes]
    if left_out:
        return Why(ADAPTER_COULD_SUPPLY, f"observe section {', '.join(left_out)} not declared ({text})", HOW["observe"],
                   tuple(left_out))
    return Why(NOT_EXERCISED, text)  # declared, and the run never showed one


def needs(text: str) -> tuple[str, ...]:
    """The features a reason names: interruption points (the catalogue's names) and ``init_ok.<field>``s."""
    from recoverykit.model.catalogue import POINTS_BY_NAME
    fields = [f for f in re.findall(r"init_ok\.(\w+)", text) if f not in ("failpoints", "observes")]
    points = [p for p in re.findall(r"\b[a-z_]+(?:\.[a-z_]+)+\b", re.sub(r"init_ok\.\w+", "", text))
              if p in POINTS_BY_NAME]
    return tuple(dict.fromkeys([*points, *fields]))


def _failpoint(m: re.Match[str], text: str, declared: Declared) -> Why:
    return Why(ADAPTER_COULD_SUPPLY, text, HOW["failpoint"], needs(text))


# The one table of texts: (pattern, class or a function of the match). First match wins; tests check each row.
TEXT_TABLE: tuple[tuple[re.Pattern[str], Any], ...] = (
    (re.compile(r"failpoint \S+ not declared|init_ok\.failpoints lacks|failpoints? \S+ (?:is |are )?not declared"),
     _failpoint),
    (re.compile(r"restart kind \S+ (?:is )?not declared|not in init_ok\.restart_kinds"),
     lambda m, t, d: Why(ADAPTER_COULD_SUPPLY, t, HOW["restart_kind"])),
    (re.compile(r"processes reply listed no process|no runtime process(?:es)? (?:was |were )?listed"),
     lambda m, t, d: Why(ADAPTER_COULD_SUPPLY, t, HOW["processes"])),
    (re.compile(r"within [\d.]+ ?s\b|\bwindow [\d.]+ s\b|timeout.scale|never became quiescent|not quiescent|"
                r"did not settle|not settled|no reply within|ran out"),
     lambda m, t, d: Why(WINDOW, t)),
    (re.compile(r"indefinite|indeterminate|never answered|unanswered|rests on the runtime's own word"),
     lambda m, t, d: Why(RUNTIME_ONLY, t)),
)


def of_text(text: str, declared: Declared = Declared()) -> Why:
    """The class a result's text gives (``TEXT_TABLE``, then the observe sections it names), else not exercised."""
    why = _detail(text)
    observed = _observe(why, declared)
    if observed is not None and observed.kind == ADAPTER_COULD_SUPPLY:
        return observed
    for pattern, to in TEXT_TABLE:
        m = pattern.search(why)
        if m:
            return to(m, why, declared)
    return observed or Why(NOT_EXERCISED, why)


def _detail(text: str) -> str:
    """The why of a result's text: the parenthesised detail after the clause's statement, else the whole text."""
    m = re.match(r"not judged ([A-Z]+-\d+): ", text)
    statement = _statements().get(m.group(1)) if m else None
    if m and statement and text.startswith(f"{m.group(0)}{statement} (") and text.rstrip().endswith(")"):
        return text[len(m.group(0)) + len(statement) + 2:].rstrip()[:-1].strip()
    return text.strip()


def of_result(reason: str | None, text: str, declared: Declared = Declared(), *, case: Why | None = None) -> Why:
    """A result's class: the one set where it was made (``ClauseResult.reason``), else its text's; ``case``: why
    its case ended early (a wait that ran out, a kill that found no listed process), which is then why what the
    case did not reach stays unknown."""
    told = of_text(text, declared)
    if reason in CLASSES and reason != told.kind:
        if reason != ADAPTER_COULD_SUPPLY:
            return Why(reason, told.why)
        how = told.how or (HOW["failpoint"] if "failpoint" in text or "the point" in text else HOW["declaration"])
        return Why(reason, told.why, how, told.needs or needs(text) or tuple(_sections(text)))
    if case is not None and told.kind == NOT_EXERCISED:
        return Why(case.kind, f"{told.why}; its case: {case.why}", case.how, case.needs)
    return told


def of_case(results: Iterable[tuple[str | None, str]], message: str, declared: Declared = Declared()) -> Why | None:
    """Why a case ended early, if it did: its pseudo-results' (reason, text) made unknown, then its message."""
    for reason, text in [*results, (None, message)]:
        if text or reason:
            why = of_result(reason, text, declared)
            if why.kind != NOT_EXERCISED:
                return why
    return None


Result = tuple[str, str | None, str, Why | None]  # clause, reason where made, text, why its case ended early


def fold(unknown: Iterable[str], results: Iterable[Result], declared: Declared,
         messages: Mapping[str, Iterable[str]] = {}) -> dict[str, Why]:
    """Per unknown clause, its class: a declared lack first, else the most actionable class among its unknown
    results, else the messages of the cases that covered it, else not exercised."""
    by: dict[str, list[Why]] = {}
    for clause, reason, text, case in results:
        by.setdefault(clause, []).append(of_result(reason, text, declared, case=case))
    out: dict[str, Why] = {}
    lacks = declared.lacks
    profile = _profiles()
    for clause in unknown:
        if clause in lacks:
            out[clause] = Why(FRAMEWORK_LACKS, lacks[clause] or "declared lacking by the adapter (init_ok.lacks)")
            continue
        if declared.profiles and profile.get(clause, "chat_core") not in declared.profiles:
            out[clause] = Why(FRAMEWORK_LACKS, f"profile {profile[clause]} not declared in init_ok.profiles: the "
                              "runtime does not implement this part of the contract")
            continue
        whys = [_lacked(w, declared) for w in by.get(clause) or
                [of_text(m, declared) for m in messages.get(clause, ()) if m]]
        out[clause] = _chosen(whys)
    return out


def _chosen(whys: list[Why]) -> Why:
    """One class of several reasons: the most actionable (adapter, framework, runtime) if any gives one; a
    window only when every reason is one (a case that ran out among many that simply did not get there is
    not why); else not exercised."""
    if not whys:
        return Why(NOT_EXERCISED, "no case of this run exercised it")
    best = min(whys, key=lambda w: RANK[w.kind])
    if best.kind == WINDOW and any(w.kind == NOT_EXERCISED for w in whys):
        return next(w for w in whys if w.kind == NOT_EXERCISED)
    return best


def _lacked(why: Why, declared: Declared) -> Why:
    """Evidence the adapter could supply, unless it declared that the framework lacks every feature it needs."""
    if why.kind != ADAPTER_COULD_SUPPLY or not why.needs or not all(n in declared.lacked for n in why.needs):
        return why
    return Why(FRAMEWORK_LACKS, "; ".join(dict.fromkeys(declared.lacked[n] for n in why.needs)) + f" ({why.why})")


def _statements() -> dict[str, str]:
    from recoverykit.model.contract import CLAUSES
    return {c.id: c.statement for c in CLAUSES}


def _profiles() -> dict[str, str]:
    from recoverykit.model.contract import CLAUSES
    return {c.id: c.profile.value for c in CLAUSES}


def counts(whys: Mapping[str, Why] | Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """How many unknown clauses per class, every class listed (zero too)."""
    out = dict.fromkeys(CLASSES, 0)
    for w in whys.values():
        kind = w.kind if isinstance(w, Why) else w.get("class")
        if kind in out:
            out[kind] += 1
    return out


def of_chaos(doc: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """A chaos results document's unknown clauses, classed from its cases' results (stored runs too)."""
    declared = Declared.of(doc.get("adapter") if isinstance(doc.get("adapter"), Mapping) else None)
    unknown = [c for c, v in (doc.get("clauses") or {}).items() if v == "unknown"]
    results = [(str(r.get("clause")), r.get("reason"), str(r.get("text", "")),
                of_case([], str(case.get("why") or ""), declared))
               for case in doc.get("cases") or () if isinstance(case, Mapping)
               for r in case.get("clauses") or () if isinstance(r, Mapping) and r.get("verdict") == "unknown"]
    return {c: w.as_dict() for c, w in sorted(fold(unknown, results, declared).items())}


STRICT_WHY = ("held only by the runtime's own word (observe), with no evidence of the kit's own: "
              "--strict-evidence counts it unknown")


def of_certify(cases: Iterable[Any], clauses: Mapping[str, Any], declared: Declared,
               demoted: Iterable[str] = ()) -> dict[str, Why]:
    """A certify run's unknown catalogue clauses, classed from its cases (``certify.Case``) at the fold;
    ``demoted``: the clauses --strict-evidence made unknown (only the runtime's word held them)."""
    return _of_cases([(case.verdict.value, case.message, case.clauses,
                       [(r.clause_id, r.verdict.value, r.reason, r.text) for r in case.results]) for case in cases],
                     {c: getattr(v, "value", v) for c, v in clauses.items()}, declared, demoted)


def of_certify_doc(doc: Mapping[str, Any], declared: Declared | None = None) -> dict[str, dict[str, str]]:
    """A certify results document's unknown clauses by class: as stored, else classed from its cases (a
    document written before classes were)."""
    entries = {c: e for c, e in (doc.get("clauses") or {}).items() if isinstance(e, Mapping)}
    stored = {c: dict(e["unknown"]) for c, e in entries.items() if isinstance(e.get("unknown"), Mapping)}
    if stored or "unknowns" in doc:
        return stored
    cases = [(str(c.get("verdict")), str(c.get("message") or ""), list(c.get("clauses") or ()),
              [(str(r.get("clause")), str(r.get("verdict")), r.get("reason"), str(r.get("text", "")))
               for r in c.get("results") or () if isinstance(r, Mapping)])
             for c in doc.get("cases") or () if isinstance(c, Mapping)]
    verdicts = {c: str(e.get("finding", e.get("verdict"))) for c, e in entries.items()}
    declared = declared or Declared.of(doc.get("declarations") or doc.get("adapter"))
    return {c: w.as_dict() for c, w in sorted(_of_cases(cases, verdicts, declared).items())}


CaseView = tuple[str, str, Iterable[str], list[tuple[str, str, str | None, str]]]  # verdict, message, clauses, results


def _of_cases(cases: Iterable[CaseView], clauses: Mapping[str, str], declared: Declared,
              demoted: Iterable[str] = ()) -> dict[str, Why]:
    from recoverykit.model.contract import CLAUSES
    catalogue = {c.id for c in CLAUSES}
    results: list[Result] = []
    messages: dict[str, list[str]] = {}
    for verdict, message, covered, found in cases:
        if verdict == "not_applicable":
            if message.startswith(CAPABILITY):  # a scenario the adapter's missing declaration kept from running
                results += [(c, ADAPTER_COULD_SUPPLY, f"scenario not run, {message}", False) for c in covered]
            continue
        ended = of_case([(reason, text) for c, v, reason, text in found if c not in catalogue and v == "unknown"],
                        message, declared)
        results += [(c, reason, text, ended) for c, v, reason, text in found if v == "unknown"]
        for c in covered:
            messages.setdefault(c, []).append(message)
    unknown = [c for c, v in clauses.items() if c in catalogue and v == "unknown"]
    out = fold(unknown, results, declared, messages)
    for c in demoted:
        if c in out and out[c].kind != FRAMEWORK_LACKS:
            out[c] = Why(RUNTIME_ONLY, STRICT_WHY)
    return out
