"""The clauses issue 12 found misstating their seed, pinned against the seed text.

For each clause: the phrases its seed uses are in both the seed section it cites and its statement, the
phrases the seed does not support are absent from the statement, and its quote lies in the section it
names (not only somewhere in the seed). Text is compared after folding case and punctuation, so "permission,
wait, and safe-point contracts" in the seed and "permission, wait and safe-point contracts" in a statement are
the same words. FA-17 (a rule of the framework's own release process) is retired to the omissions, and its id
stays reserved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from recoverykit.model import contract
from recoverykit.model.catalogue import Profile
from recoverykit.model.contract import (
    CLAUSES,
    OMISSIONS,
    SEED_000,
    SEED_001,
    SEED_003,
    Clause,
    Kind,
    Method,
    UnknownClause,
    clause,
    render_markdown,
)
from recoverykit.model.errors import InvalidArgument

ROOT = Path(__file__).resolve().parent.parent

# Every heading (or paragraph opener) a section can end at, in any seed.
HEADINGS = (contract.ARC, contract.MATRIX, contract.LAYER, contract.INTR, contract.SAFE, contract.HIST,
            contract.GOALUI, contract.TODO, contract.COST, contract.CTRL, contract.IMPL, contract.FAIL,
            contract.ZH_ARC, contract.ZH_CTRL, contract.ZH_FAIL, contract.PC_TOP, contract.PC_ADM,
            contract.PC_FILES, contract.PC_POLICY, contract.PC_DIAG, "Qualification")


def fold(text: str) -> str:
    """Lower case, punctuation to spaces, runs of spaces to one; padded so phrases match whole words."""
    return " " + re.sub(r"[\W_]+", " ", text.lower()).strip() + " "


def has(text: str, phrase: str) -> bool:
    return fold(phrase) in fold(text)


def section_text(seed_text: str, section: str) -> str:
    """From the line the section opens with to the next heading of any section (or the end)."""
    opening = [m.start() for m in re.finditer("^" + re.escape(section), seed_text, re.MULTILINE)]
    assert len(opening) == 1, f"section {section!r} opens {len(opening)} lines, not one"
    begin = opening[0]
    ends = [m.start() for heading in HEADINGS
            for m in re.finditer("^" + re.escape(heading), seed_text, re.MULTILINE) if m.start() > begin]
    return seed_text[begin:min(ends, default=len(seed_text))]


@dataclass(frozen=True)
class Words:
    """A seed phrase and how the statement says it (the same words unless ``said`` is given)."""

    phrase: str
    said: str | None = None
    seed: str | None = None  # the clause's own seed and section unless given
    section: str | None = None


@dataclass(frozen=True)
class Pin:
    words: tuple[Words, ...]
    absent: tuple[str, ...] = ()  # not in the statement (the seed section may say it of something else)
    unsaid: tuple[str, ...] = ()  # in neither the statement nor any seed section the pin draws on


W = Words
PINS: dict[str, Pin] = {
    "CTX-02": Pin((W("cover committed effects", "covers committed effects"),
                   W("permission, wait, and safe-point contracts"), W("without replaying unknown writes")),
                  absent=("covers every committed effect and never replays",)),
    "RES-05": Pin((W("Unavailable databases"), W("broken migrations"), W("credentials"), W("directories"),
                   W("changed tool versions"), W("lost projection events"),
                   W("explicit states and recoverable actions"), W("without clearing history"),
                   W("unexplained disabled controls")),
                  unsaid=("state and reason", "no history is cleared")),
    "FA-12": Pin((W("Recover multiple sessions together", "sessions recovered together"), W("fair queueing"),
                  W("shared quotas"),
                  W("fair scheduling and resource quotas", "quotas they share", SEED_000, contract.ARC)),
                 unsaid=("eventually runs", "each eventually")),
    "FA-02": Pin((W("host-restart semantics"), W("process-identity changes"),
                  W("automatically recover previously authorized work whose state remains run",
                    "work meant to run is recovered", SEED_000, contract.ARC),
                  W("machine restarts do not implicitly mean user Pause", "never read as a user Pause",
                    SEED_000, contract.ARC),
                  W("Single-host recovery must not silently become cross-host takeover",
                    "never silently becomes cross-host takeover", SEED_000, contract.ARC),
                  W("宿主重启语义由进程身份变化测试", "host-restart semantics", SEED_003, contract.ZH_FAIL)),
                 absent=("A changed process identity (host restart semantics)",)),
    "UI-05": Pin((W("UI read failures", "UI read failure"), W("State temporarily unavailable"), W("refresh"),
                  W("not permanently disabled unexplained controls", "never permanently disabled unexplained controls"),
                  W("UI 读取失败显示“状态暂不可确认”和刷新入口", "UI read failure", SEED_003, contract.ZH_CTRL)),
                 absent=("reason_code", "neither running nor finished")),
    "RTY-09": Pin((W("same one local directory the failed run used"), W("still bound to and owned by this task"),
                   W("not a shared project workspace"), W("not under remote storage authority"),
                   W("prior executor"), W("its leases released"), W("the recovery generation settled"),
                   W("No other lease, failed cleanup or running workspace operation"),
                   W("A restart orphan does not count"),
                   W("started before the source settled and before the current server process started"),
                   W("started in the current process still block reuse")),
                  absent=("not shared, not remote", "nothing else holds it")),
    "RTY-03": Pin((W("authenticated board task-mutation authority"),),
                  absent=("requires authenticated task-mutation authority",)),
    "RTY-16": Pin((W("A GitHub Retry selects"), W("already-saved, undelivered input", "saved, undelivered input"),
                   W("before replaying the failed run's older request"),
                   W("transfer to the retry owner under the dispatch transaction"), W("one successor"),
                   W("including after a restart or a lost dispatch response")),
                  absent=("Receipts selected by a Retry",)),
    "JOB-02": Pin((W("save Goal identity at the real active caller's admission boundary"),
                   W("restore it at startup"), W("clear unrelated temporary attribution")),
                  absent=("its caller's admission boundary",)),
    "RTY-28": Pin((W("Scheduling stops 30 minutes after the first failure"),
                   W("A longer provider cooldown takes precedence")),
                  unsaid=("later than 30 minutes", "no retry runs")),
    "APR-06": Pin((W("已接受审批不重复消费", "consumed at most once"),
                   W("审批未接受不自动批准", "never approved automatically"),
                   W("Consume accepted approvals once", "accepted approvals are consumed at most once",
                     SEED_000, contract.FAIL),
                   W("never approve unaccepted requests automatically", "unaccepted requests are never approved "
                     "automatically", SEED_000, contract.FAIL)),
                  unsaid=("exactly once",)),
}


def test_the_pins_cover_every_clause_issue_12_lists():
    listed = {"CTX-02", "RES-05", "FA-12", "FA-02", "UI-05", "RTY-09", "RTY-03", "RTY-16", "JOB-02", "RTY-28",
              "FA-17", "APR-06"}
    assert set(PINS) | set(contract.RETIRED) >= listed
    assert set(PINS) <= {c.id for c in CLAUSES}


@pytest.mark.parametrize("clause_id", sorted(PINS))
def test_the_statement_says_what_its_seed_section_says(clause_id, seeds):
    c, pin = clause(clause_id), PINS[clause_id]
    drawn_on = {(c.seed, c.section)}
    for words in pin.words:
        seed, section = words.seed or c.seed, words.section or c.section
        drawn_on.add((seed, section))
        text = section_text(seeds[seed], section)
        assert has(text, words.phrase), f"{clause_id}: the seed's {section!r} does not say {words.phrase!r}"
        said = words.said or words.phrase
        assert has(c.statement, said), f"{clause_id}: the statement drops {said!r}: {c.statement}"
    for phrase in pin.absent + pin.unsaid:
        assert not has(c.statement, phrase), f"{clause_id}: the statement says {phrase!r}: {c.statement}"
    for phrase in pin.unsaid:
        for seed, section in drawn_on:
            assert not has(section_text(seeds[seed], section), phrase), (
                f"{clause_id}: {phrase!r} is in {section!r}; the pin is wrong")


@pytest.mark.parametrize("clause_id", sorted(PINS))
def test_the_quote_lies_in_the_section_it_names(clause_id, seeds):
    c = clause(clause_id)
    assert has(section_text(seeds[c.seed], c.section), c.quote), f"{clause_id}: quote not in {c.section!r}"


def test_apr06_cites_the_chinese_text_that_says_at_most_once(seeds):
    c = clause("APR-06")
    assert (c.seed, c.section) == (SEED_003, contract.ZH_FAIL)
    assert "不重复消费" in c.quote and "at most once" in c.statement


def test_rty16_is_scoped_to_a_github_retry_and_rty03_to_the_board():
    assert clause("RTY-16").statement.startswith("A GitHub Retry selects")
    assert " board " in fold(clause("RTY-03").statement)


def test_fa17_is_retired_to_the_omissions_with_the_release_process_reason(seeds):
    assert "FA-17" not in {c.id for c in CLAUSES}
    assert "FA-17" in contract.RETIRED and "release" in contract.RETIRED["FA-17"]
    section = section_text(seeds[SEED_000], contract.IMPL)
    assert has(section, "designs without test or deployment evidence are not marked implemented")
    assert has(section, "remote release")  # the implementation status of the framework's own releases
    (omission,) = [o for o in OMISSIONS if "FA-17" in o.what]
    assert (omission.seed, omission.section) == (SEED_000, contract.IMPL)
    assert has(omission.what, "designs without test or deployment evidence are not marked implemented")
    assert "release" in omission.reason and "D9" in omission.reason
    assert not any("FA-17 keeps" in o.reason for o in OMISSIONS)  # no omission points at the retired clause


def test_a_retired_id_is_a_typed_error_that_says_why():
    with pytest.raises(UnknownClause, match="retired") as info:
        clause("fa-17")
    assert isinstance(info.value, InvalidArgument) and "OMISSIONS" in str(info.value)


def test_a_retired_id_is_never_reused():
    reused = Clause(id="FA-17", statement="S", kind=Kind.SAFETY, seed=SEED_000, section="x", quote="q",
                    profile=Profile.CHAT_CORE, methods=frozenset({Method.MODEL}))
    with pytest.raises(InvalidArgument, match="retired"):
        contract.index((reused,))
    with pytest.raises(InvalidArgument, match="duplicate"):
        contract.index((clause("OWN-06"), clause("OWN-06")))
    assert contract.index(CLAUSES)["OWN-06"] is clause("OWN-06")


def test_the_docs_list_retired_ids():
    text = render_markdown()
    assert "## Retired ids" in text
    for clause_id, reason in contract.RETIRED.items():
        assert f"| {clause_id} | {reason} |" in text


def test_seed_001_clauses_cite_seed_001_sections():
    """RTY-16 and RTY-28 stay in Paperclip's sections (a guard for the section lookup above)."""
    for clause_id in ("RTY-03", "RTY-09", "RTY-16", "RTY-28"):
        assert clause(clause_id).seed == SEED_001


def test_contract_show_of_a_retired_id_is_a_usage_error_that_says_why(capsysbinary):
    from recoverykit.cli import main

    with pytest.raises(SystemExit) as info:
        main(["contract", "show", "FA-17"])
    out, err = capsysbinary.readouterr()
    assert info.value.code == 64 and out == b""
    assert b"retired" in err and b"release process" in err and b"Traceback" not in err
