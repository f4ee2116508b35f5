"""The contract catalogue keeps its citations honest: every quote is in its seed, every id is stable and
well formed, every interruption point and restart kind is exercised, and docs/contract.md is current."""

from __future__ import annotations

import json
import re
from difflib import SequenceMatcher
from pathlib import Path

import pytest
from recoverykit.model import contract
from recoverykit.model.catalogue import INTERRUPTION_POINTS, Profile, RestartKind
from recoverykit.model.contract import (
    AREAS,
    CLAUSES,
    OMISSIONS,
    SEEDS,
    Clause,
    Kind,
    Method,
    UnknownClause,
    by_area,
    by_method,
    by_profile,
    clause,
    render_markdown,
    to_json,
)
from recoverykit.model.errors import InvalidArgument

ROOT = Path(__file__).resolve().parent.parent


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_catalogue_has_at_least_forty_clauses():
    assert len(CLAUSES) >= 40


def test_ids_are_unique_and_well_formed():
    ids = [c.id for c in CLAUSES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    for c in CLAUSES:
        assert re.fullmatch(r"[A-Z]{2,4}-\d{2,3}", c.id), c.id
        assert c.area in AREAS, c.id


def test_every_area_has_clauses_and_numbers_start_at_one():
    for area in AREAS:
        numbers = [c.number for c in by_area(area)]
        assert numbers, f"area {area} has no clause"
        assert numbers[0] == 1, f"area {area} starts at {numbers[0]}"


@pytest.mark.parametrize("c", CLAUSES, ids=lambda c: c.id)
def test_quote_and_section_occur_in_the_seed(c: Clause, seeds):
    text = _norm(seeds[c.seed])
    assert _norm(c.quote) in text, f"{c.id}: quote not found verbatim in {c.seed}: {c.quote!r}"
    assert _norm(c.section) in text, f"{c.id}: section {c.section!r} is not a heading or phrase of {c.seed}"


def test_omissions_cite_real_sections(seeds):
    for o in OMISSIONS:
        assert _norm(o.section) in _norm(seeds[o.seed]), o
        assert o.reason.strip() and o.what.strip()


def test_statements_are_single_sentences_fit_for_violation_messages():
    for c in CLAUSES:
        assert "\n" not in c.statement and c.statement[0].isupper(), c.id
        assert c.broke() == f"broke {c.id}: {c.statement}"
    assert clause("OWN-06").broke("write at generation 3 after 4") .endswith("(write at generation 3 after 4)")


def test_the_three_seeds_and_required_sections_are_all_cited():
    cited = {(c.seed, c.section) for c in CLAUSES}
    assert {c.seed for c in CLAUSES} == set(SEEDS)
    required = {
        contract.SEED_000: [contract.ARC, contract.MATRIX, contract.INTR, contract.SAFE, contract.TODO,
                            contract.COST, contract.CTRL, contract.FAIL],
        contract.SEED_001: [contract.PC_ADM, contract.PC_POLICY],
    }
    for seed, sections in required.items():
        for section in sections:
            assert (seed, section) in cited, f"no clause cites {seed} section {section!r}"


def test_every_interruption_point_is_exercised_by_some_clause():
    exercised = {p for c in CLAUSES for p in c.points}
    missing = [p.name for p in INTERRUPTION_POINTS if p.name not in exercised]
    assert not missing, f"interruption points no clause is exercised at: {missing}"


def test_every_restart_kind_is_exercised_by_some_clause():
    exercised = {r for c in CLAUSES for r in c.restarts}
    assert set(RestartKind) <= exercised, set(RestartKind) - exercised


def test_every_profile_and_method_selects_clauses_and_profiles_partition_the_catalogue():
    for method in Method:
        assert by_method(method), method
        assert by_method(method.value) == by_method(method)
    parts = [by_profile(p) for p in Profile]
    assert all(parts), [p for p, part in zip(Profile, parts, strict=True) if not part]
    assert sorted(c.id for part in parts for c in part) == sorted(c.id for c in CLAUSES)


def test_both_kinds_occur():
    assert {c.kind for c in CLAUSES} == set(Kind)


def test_clause_lookup_and_typed_error_for_unknown_ids():
    assert clause("OWN-06").id == "OWN-06"
    assert clause(" own-06 ").id == "OWN-06"
    with pytest.raises(UnknownClause) as info:
        clause("OWN-6")
    assert isinstance(info.value, InvalidArgument) and isinstance(info.value, KeyError)
    assert "OWN-06" in str(info.value)  # the did-you-mean hint
    with pytest.raises(UnknownClause, match="string like"):
        clause(6)  # type: ignore[arg-type]


@pytest.mark.parametrize(("call", "value"), [(by_profile, "chats"), (by_method, "fuzzing"), (by_area, "XX")])
def test_unknown_filters_name_the_valid_choices(call, value):
    with pytest.raises(InvalidArgument) as info:
        call(value)
    assert value in str(info.value) and "one of" in str(info.value)


@pytest.mark.parametrize(("changes", "needle"), [
    ({"id": "own-1"}, "AREA-NN"),
    ({"id": "ZZ-01"}, "AREA-NN"),
    ({"seed": "002_x.txt"}, "not one of"),
    ({"statement": "two\nlines"}, "one non-empty line"),
    ({"quote": " "}, "quote"),
    ({"points": ("tool.nowhere",)}, "unknown interruption points"),
])
def test_a_malformed_clause_is_refused_where_it_is_written(changes, needle):
    fields = {"id": "OWN-99", "statement": "s", "kind": Kind.SAFETY, "seed": contract.SEED_000,
              "section": "x", "quote": "q", "profile": Profile.CHAT_CORE, "methods": frozenset({Method.MODEL})}
    with pytest.raises(InvalidArgument, match=needle):
        Clause(**{**fields, **changes})


def test_json_round_trips_with_the_documented_fields():
    data = json.loads(json.dumps(to_json()))
    assert len(data) == len(CLAUSES)
    for item in data:
        assert {"id", "statement", "kind", "seed", "section", "quote", "profile", "methods"} <= item.keys()
        assert item["seed"] in SEEDS and isinstance(item["methods"], list)
    assert to_json([clause("RTY-26")])[0]["profile"] == "paperclip_retry"


def test_docs_contract_md_is_current():
    path = ROOT / "docs" / "contract.md"
    expected = render_markdown()
    assert path.is_file(), f"docs/contract.md is missing; run `{contract.DOCS_COMMAND}`"
    assert path.read_text(encoding="utf-8") == expected, (
        f"docs/contract.md is stale; regenerate it with `{contract.DOCS_COMMAND}`")


def test_rendered_docs_say_they_are_generated_and_list_every_clause_and_omission():
    text = render_markdown()
    first = text.splitlines()[0]
    assert "Generated" in first and contract.DOCS_COMMAND in first
    for c in CLAUSES:
        assert f"### {c.id} (" in text
    assert text.count("\n| ") >= len(OMISSIONS)
    for o in OMISSIONS:
        assert o.what.replace("|", "\\|") in text


# --- Coverage of the seeds' obligations -------------------------------------------------------
# Every sentence with "must", "never", "only", "do not" or "cannot" in seed 000 from the automatic
# recovery contract to the end, and in seed 001's admission and retry-policy sections, must share a
# substantial verbatim stretch with some clause's quote, or be listed here with the clause that
# carries it (its quote rests on a neighbouring phrase) or the omission that explains its absence.
ADDRESSED: dict[str, str] = {
    "user-paused work does not resume automatically": "RI-03",
    "Only specific permission, budget, resource, or unknown-operation issues need human": "RI-08",
    "names, acceptEdits flags, and plugin declarations cannot replace": "EFF-10",
    "the frontend must not infer them from status strings": "UI-04",
    "display is not a second control implementation": "UI-01",
    "do not assume cross-database atomic transactions": "REC-07",
    "Live child processes only reconnect": "FA-15",
    "Consume accepted approvals once": "APR-06",  # APR-06 quotes the Chinese, which says "at most once"
    "With a user-set hard cost budget": "USG-16",
    "Recovery promises confirmed saved work state": "REC-10",
    "Judge lack of progress by changes in results and evidence": "GOAL-07",
    "Recovery tests cover ordinary chat, not just one specific session": "REC-16",
    "Only an explicitly activated Goal produces Goal UI": "omitted:Goal UI styling",
    "Starting, running, pausing and verifying do not add transcript cards": "omitted:transcript cards",
    "The composer continues to show the current Goal only": "omitted:composer",
    "ask the user only when ambiguity would change scope": "omitted:ask the user",
    "Independent acceptance can also err": "omitted:independent acceptance can also err",
    "otherwise do not promise absolute prevention of overspend": "omitted:overspend",
    "Hard budgets accept only audited input/output limits": "omitted:hard budgets accept only audited",
    "Do not terminate the user's current work": "omitted:never terminate the user's work",
    "Final visible App acceptance uses only the default instance": "omitted:default-instance",
    "do not reboot the user's machine yourself": "omitted:never reboot",
    "A click does not renew an exhausted generation": "RTY-07",
    "Reuse requires the same one local directory": "RTY-09",
    "A restart orphan does not count": "RTY-09",
    "Its Git status must still be readable": "omitted:Git status",
    "This hint is given only for a task-owned local directory": "omitted:priorWorkspace",
    "The file list is given only when Git resolves": "omitted:priorWorkspace",
    "it does not ask for another fresh directory": "RTY-12",
    "Its server-owned App binding must predate that input": "omitted:GitHub App",
    "The endpoint's non-null App claim cannot be replaced": "omitted:GitHub App",
    "Containment, current access, task eligibility, pause and budget gates must still pass": "RTY-18",
    "Every run must retain the same company, task and agent": "RTY-21",
    "Its bounded host preparation settlement must prove no provider work": "RTY-39",
    "The source must retain its unresolved native adapter claim": "RTY-39",
    "An inherited sessionIdBefore is prior context": "omitted:sessionIdBefore",
    "Every source lease must have exact stop and cleanup proof": "RTY-39",
    "The saved snapshot must match the source, workspace epoch": "RTY-39",
    "Resolving the preservation action does not discard the canonical Retry source": "RTY-08",
    "Preservation alone does not authorize automatic replay": "RTY-24",
    "An unadmitted receipt from a former owner cannot own": "omitted:Agent Chat owner checks",
}
_MODAL = re.compile(r"(?<![\w-])(must|never|only|do not|does not|cannot)\b", re.IGNORECASE)  # not "read-only"


def _between(text: str, start: str, end: str | None) -> str:
    begin = text.index(start)
    return text[begin: text.index(end, begin) if end else len(text)]


def _obligations(seeds: dict[str, str]) -> list[tuple[str, str]]:
    s000, s001 = seeds[contract.SEED_000], seeds[contract.SEED_001]
    scopes = [(contract.SEED_000, _between(s000, contract.ARC + "\n", None)),
              (contract.SEED_001, _between(s001, "\n" + contract.PC_ADM + "\n", "\n" + contract.PC_FILES + "\n")),
              (contract.SEED_001, _between(s001, "\n" + contract.PC_POLICY + "\n", "\n" + contract.PC_DIAG + "\n"))]
    found = []
    for seed, text in scopes:
        for line in text.splitlines():
            for sentence in re.split(r"(?<=[.;])\s+|•", line):
                sentence = _norm(sentence)
                if _MODAL.search(sentence):
                    found.append((seed, sentence))
    return found


def _shares_a_quote(seed: str, sentence: str) -> bool:
    for c in CLAUSES:
        if c.seed != seed:
            continue
        quote = _norm(c.quote)
        match = SequenceMatcher(None, sentence, quote, autojunk=False).find_longest_match()
        if match.size >= min(30, len(sentence) - 2, len(quote)):
            return True
    return False


def test_every_obligation_of_the_required_sections_is_addressed(seeds):
    assert len(_obligations(seeds)) > 60  # the scan itself must find the seeds' obligations
    unaddressed = [
        (seed[:3], sentence) for seed, sentence in _obligations(seeds)
        if not _shares_a_quote(seed, sentence) and not any(key in sentence for key in ADDRESSED)
    ]
    assert not unaddressed, "sentences with no clause or omission; add a clause or an entry in ADDRESSED: " + \
        "\n".join(f"{seed}: {sentence}" for seed, sentence in unaddressed)


def test_addressed_entries_point_at_real_seed_text_clauses_and_omissions(seeds):
    everything = _norm(seeds[contract.SEED_000]) + _norm(seeds[contract.SEED_001])
    omitted = " ".join(o.what.lower() for o in OMISSIONS)
    for fragment, target in ADDRESSED.items():
        assert fragment in everything, fragment
        if target.startswith("omitted:"):
            assert target.removeprefix("omitted:").lower() in omitted, target
        else:
            clause(target)


_CITED = re.compile(r"\b(?:" + "|".join(AREAS) + r")-\d{2,3}\b")


def test_every_clause_id_cited_elsewhere_in_the_kit_exists():
    """A typo in a cited id would make a violation message point nowhere."""
    known = {c.id for c in CLAUSES}
    unknown = []
    for folder in ("kit", "model", "conformance", "chaos", "impl", "reports", "benchmarks"):
        for source in sorted((ROOT / folder).rglob("*.py")):
            if source.name == "contract.py" and source.parent.name == "model":
                continue
            for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
                unknown += [f"{source.relative_to(ROOT)}:{number}: {cited}" for cited in _CITED.findall(line)
                            if cited not in known]
    assert not unknown, "clause ids cited but not in model/contract.py:\n" + "\n".join(unknown)


def test_the_history_method_is_claimed_exactly_where_a_history_check_names_the_clause():
    """The catalogue states only what exists: `history` for a clause iff some check of the history checker
    can return a verdict for it (read from the checks' source, reports/coverage.py)."""
    from recoverykit.model.contract import Method
    from recoverykit.reports.coverage import registry

    judged = {c for c, checks in registry().items() if any(x["kind"] == "history" for x in checks)}
    claimed = {c.id for c in CLAUSES if Method.HISTORY in c.methods}
    assert claimed == judged, (sorted(claimed - judged), sorted(judged - claimed))
