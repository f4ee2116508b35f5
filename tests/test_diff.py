"""``recoverykit diff OLD NEW``: regressions exit 1, anything else 0, bad input 64, on real runs and stored reports.

The runs are real: the reference runtime and a mutant of it (tests/mutants/, one realistic recovery bug), each
run through ``recoverykit certify --only`` and ``recoverykit chaos --replay`` on the case that kills the mutant,
exactly as a CI gate would run them; the stored reports are reports/reference and reports/langgraph.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "mutants"))
import mutate
from recoverykit.reports import diff as diffing

ROOT = Path(__file__).resolve().parent.parent
REFERENCE, LANGGRAPH = ROOT / "reports" / "reference", ROOT / "reports" / "langgraph"
CERTIFY_MUTANT, CERTIFY_CASE = "wait_admits_any_version", "wait_duplicate_notification"  # breaks WAIT-02
CHAOS_MUTANT, CHAOS_CASE = "submit_acknowledged_before_commit", "chat_unknown_write/input.accept.before/1/tree_kill"


def kit(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "recoverykit", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """certify and chaos results of the reference runtime and of a mutant, on the case that kills the mutant."""
    work = tmp_path_factory.mktemp("diff-runs")
    out = {}
    for name, mutant, tail in (("certify", CERTIFY_MUTANT, ["certify", "--only", CERTIFY_CASE, "--seed", "1",
                                                             "--profile", "waits"]),
                               ("chaos", CHAOS_MUTANT, ["chaos", "--replay", CHAOS_CASE])):
        adapter = mutate.adapter_command(mutate.by_name(mutant), mutate.materialize(mutate.by_name(mutant),
                                                                                     work / f"pkg-{name}"))
        for who, extra in (("ref", []), ("mut", ["--adapter", adapter])):
            out[f"{name}-{who}"] = work / f"{name}-{who}"
            done = kit(*tail, *extra, "--out", out[f"{name}-{who}"])
            expected = {"certify-ref": 2, "certify-mut": 1, "chaos-ref": 0, "chaos-mut": 1}  # one case: unknown
            assert done.returncode == expected[f"{name}-{who}"], done.stderr[-2000:]
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(work) in " ".join(p.info["cmdline"] or [])]
    return out


def test_a_certify_mutant_against_the_reference_is_a_regression_of_its_clause(runs):
    done = kit("diff", runs["certify-ref"], runs["certify-mut"], "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    d = json.loads(done.stdout)
    assert [r["clause"] for r in d["regressions"]] == ["WAIT-02"]
    regression = d["regressions"][0]
    assert regression["was"] == "valid" and regression["now"] == "invalid"
    assert "notification of another version" in regression["messages"][0]
    assert regression["replay"].startswith("recoverykit certify") and f"--only {CERTIFY_CASE}" in regression["replay"]
    assert d["changed_cells"] == [{"cell": CERTIFY_CASE, "was": "valid", "now": "invalid"}]
    text = kit("diff", runs["certify-ref"], runs["certify-mut"])
    assert text.returncode == 1 and "regressions: 1" in text.stdout and "WAIT-02: valid -> invalid" in text.stdout


def test_the_other_way_round_the_clause_is_fixed_and_the_exit_is_0(runs):
    done = kit("diff", runs["certify-mut"], runs["certify-ref"], "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    d = json.loads(done.stdout)
    assert d["regressions"] == [] and [r["clause"] for r in d["fixed"]] == ["WAIT-02"]
    for r in d["new_unknowns"]:  # judged by the mutant's path only: unknown now, each with NEW's reason
        assert r["was"] != "unknown" and r["reasons"] and all(r["reasons"])


def test_a_chaos_mutant_changes_its_cell_and_breaks_its_clause(runs):
    d = json.loads(kit("diff", runs["chaos-ref"], runs["chaos-mut"], "--json").stdout)
    assert "INP-01" in [r["clause"] for r in d["regressions"]] and d["exit_code"] == 1
    assert {"cell": "input.accept.before x tree_kill", "was": "passed", "now": "invalid"} in d["changed_cells"]
    assert kit("diff", runs["chaos-ref"], runs["chaos-mut"]).returncode == 1
    assert kit("diff", runs["chaos-mut"], runs["chaos-ref"]).returncode == 0


def test_the_stored_reference_report_against_a_one_case_mutant_run(runs):
    """A stored report (results.json.gz of a whole run) against a run of one case: the mutant's break is a
    regression; the cells only the whole run selected are counted, not reported as changed."""
    d = json.loads(kit("diff", REFERENCE, runs["chaos-mut"], "--json").stdout)
    assert d["exit_code"] == 1 and "INP-01" in [r["clause"] for r in d["regressions"]]
    assert [c["cell"] for c in d["changed_cells"]] == ["input.accept.before x tree_kill"]
    assert d["cells_only_in"]["old"] > 0 and d["notes"]


@pytest.mark.parametrize("stored", [REFERENCE, LANGGRAPH], ids=["reference", "langgraph"])
def test_a_stored_report_against_itself_changes_nothing(stored):
    done = kit("diff", stored, stored, "--json")
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)
    assert d["regressions"] == d["fixed"] == d["new_unknowns"] == d["changed_cells"] == []
    assert d["cells_compared"] > 0 and d["notes"] == []


def test_langgraph_before_its_findings_regresses_each_broken_clause(tmp_path):
    """OLD: the stored LangGraph run with its broken clauses said valid and their failing cases passed (as an
    earlier, clean run would say); NEW: the stored run. Each of its broken clauses is a regression."""
    with gzip.open(LANGGRAPH / "results.json.gz", "rt", encoding="utf-8") as f:
        doc = json.load(f)
    broken = sorted(c for c, v in doc["clauses"].items() if v == "invalid")
    old = json.loads(json.dumps(doc))
    old["clauses"] = {c: "valid" if v == "invalid" else v for c, v in doc["clauses"].items()}
    old["findings"] = []
    for case in old["cases"]:
        if case["status"] == "failed":
            case.update(status="passed", violations=[], clauses=[])
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "results.json").write_text(json.dumps(old))
    done = kit("diff", tmp_path / "old", LANGGRAPH, "--json")
    assert done.returncode == 1
    d = json.loads(done.stdout)
    assert sorted(r["clause"] for r in d["regressions"]) == broken
    assert all(r["messages"] and r["replay"] for r in d["regressions"] if r["clause"] in
               {f["clause"] for f in doc["findings"]})
    failing = {f"{c['point']} x {c['kind']}" for c in doc["cases"] if c["status"] == "failed"}
    assert {c["cell"] for c in d["changed_cells"]} == failing
    assert all(c["now"] == "invalid" for c in d["changed_cells"])


def test_bad_input_exits_64_with_a_message(tmp_path, runs):
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"kind": "something-else"}))
    bad_chaos = tmp_path / "bad-chaos.json"
    bad_chaos.write_text(json.dumps({"kind": "recoverykit-chaos-results", "cases": "many"}))
    for old, new, said in ((tmp_path / "nowhere", runs["certify-ref"], "does not exist"),
                           (tmp_path / "empty", runs["certify-ref"], "no results.json"),
                           (tmp_path / "junk.json", runs["certify-ref"], "cannot be read"),
                           (tmp_path / "other.json", runs["certify-ref"], "neither a certify nor a chaos"),
                           (bad_chaos, runs["chaos-ref"], "not a well-formed chaos results document"),
                           (runs["certify-ref"], runs["chaos-ref"], "same command"),
                           (REFERENCE, LANGGRAPH, "different runtimes")):
        done = kit("diff", old, new)
        assert done.returncode == 64, (old, new, done.stdout, done.stderr)
        assert said in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad-chaos.json", "empty", "junk.json", "other.json"]


def test_adapter_text_cannot_forge_a_line_of_the_diff():
    old = {"kind": "certify", "adapter": "x", "version": None, "verdict": "valid", "cases": 0, "selection": [],
           "cells": {}, "clauses": {"INP-01": {"verdict": "valid", "reasons": [], "messages": [], "replay": None}}}
    new = json.loads(json.dumps(old))
    new["clauses"]["INP-01"] = {"verdict": "invalid", "reasons": [], "replay": "r\x1b[2J",
                                "messages": ["broke\nfixed: 9\n0 regressions: exit 0"]}
    out = diffing.text(diffing.diff(old, new))
    assert "\n0 regressions" not in out and "\x1b" not in out and out.rstrip().endswith("exit 1")
