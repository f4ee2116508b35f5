"""Known findings: ``--accept`` and baseline files for certify and chaos, and failures grouped per clause.

The rules without processes first (loading, verdicts, the chaos report and JUnit), then end to end
against the mini runtime with deliberate bugs: an accepted USG-05 exits 0 and is reported accepted,
never valid; a second bug still fails the run; an acceptance that held is stale; a baseline written by
one run is read by the next; a malformed baseline is a usage error (64), never a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from recoverykit.chaos import systematic
from recoverykit.chaos.findings import accepted_case, findings
from recoverykit.conformance import acceptance, certify
from recoverykit.conformance.scenarios import all_scenarios
from recoverykit.model.catalogue import Verdict
from recoverykit.model.errors import InvalidArgument
from recoverykit.reports import failure_acceptance, junit, merge

ROOT = Path(__file__).resolve().parent.parent
MINI = f"{sys.executable} {ROOT / 'tests' / 'adapters' / 'mini_runtime.py'}"
V, INV, U = Verdict.VALID, Verdict.INVALID, Verdict.UNKNOWN


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recoverykit", *args], capture_output=True, text=True, timeout=300)


def baseline(tmp_path: Path, *entries: dict, **top) -> Path:
    path = tmp_path / "baseline.json"
    doc = {"kind": acceptance.BASELINE_KIND, "version": 1, "findings": list(entries), **top}
    path.write_text(json.dumps(doc))
    return path


def entry(clause_id: str, sha: str | None = None) -> dict:
    return {"clause": clause_id, "statement_sha256": sha or acceptance.statement_sha256(clause_id)}


# --- loading ---------------------------------------------------------------------------------------

def test_accept_takes_clause_ids_repeated_or_comma_separated():
    got = acceptance.load(["USG-05", "RI-03,CTL-02"])
    assert dict(got.accepted) == {"USG-05": "--accept", "RI-03": "--accept", "CTL-02": "--accept"}


@pytest.mark.parametrize("value", ["USG-5", "usg-05", "protocol", "completion", "RI-99"])
def test_accept_refuses_what_is_not_a_contract_clause(value):
    with pytest.raises(InvalidArgument, match="not a clause of the contract"):
        acceptance.load([value])


@pytest.mark.parametrize("text, why", [
    ("not json", "cannot be read as JSON"),
    ("[]", "not a recoverykit baseline"),
    ('{"kind": "recoverykit-chaos-results"}', "not a recoverykit baseline"),
    ('{"kind": "recoverykit-baseline", "version": 7, "findings": []}', "version 7"),
    ('{"kind": "recoverykit-baseline", "version": 1, "findings": {}}', "findings is not a list"),
    ('{"kind": "recoverykit-baseline", "version": 1, "findings": [{"clause": "USG-05"}]}', "statement_sha256"),
    ('{"kind": "recoverykit-baseline", "version": 1, "findings": ["USG-05"]}', "findings\\[0\\]"),
    ('{"kind": "recoverykit-baseline", "version": 1, "findings": [{"clause": "NO-1", "statement_sha256": "x"}]}',
     "not a clause of the contract"),
])
def test_a_malformed_baseline_is_refused_with_what_is_wrong(tmp_path, text, why):
    path = tmp_path / "b.json"
    path.write_text(text)
    with pytest.raises(InvalidArgument, match=why):
        acceptance.load((), path)


def test_a_missing_baseline_file_or_a_folder_is_refused(tmp_path):
    for path in (tmp_path / "absent.json", tmp_path):
        with pytest.raises(InvalidArgument, match="cannot be read"):
            acceptance.load((), path)


def test_a_baseline_entry_written_against_another_statement_is_not_applied(tmp_path):
    path = baseline(tmp_path, entry("USG-05", sha="0" * 64), entry("RI-03"))
    got = acceptance.load((), path)
    assert set(got.accepted) == {"RI-03"} and got.changed == ("USG-05",)  # USG-05 gates again until re-accepted


def test_a_written_baseline_reads_back_as_the_same_acceptances(tmp_path):
    found = [{"clause": "USG-05", "count": 3, "seen_in": ["a"], "message": "broke USG-05", "shortest": {"replay": "r"}},
             {"clause": "protocol", "count": 1}]  # a protocol break is never acceptable: left out
    doc = acceptance.baseline_document(found, written_by="certify", adapter={"name": "x"}, kit_version="0")
    path = acceptance.write_baseline(tmp_path / "b.json", doc)
    assert [e["clause"] for e in json.loads(path.read_text())["findings"]] == ["USG-05"]
    assert dict(acceptance.load((), path).accepted) == {"USG-05": f"baseline {path}"}


# --- certify's verdict -----------------------------------------------------------------------------

def test_an_accepted_clause_decides_neither_invalid_nor_unknown():
    required = frozenset({"RI-03", "USG-05"})
    assert certify.verdict_of({"RI-03": V, "USG-05": INV}, required) is INV
    assert certify.verdict_of({"RI-03": V, "USG-05": INV}, required, frozenset({"USG-05"})) is V
    assert certify.verdict_of({"RI-03": V, "USG-05": U}, required, frozenset({"USG-05"})) is V
    # every other clause still gates
    assert certify.verdict_of({"RI-03": INV, "USG-05": INV}, required, frozenset({"USG-05"})) is INV
    assert certify.verdict_of({"RI-03": U, "USG-05": INV}, required, frozenset({"USG-05"})) is U


# --- chaos: verdict, findings, report, junit, merge ------------------------------------------------

def case(cid: str, *broken: str, status: str = "failed", hit: int = 1, second: str | None = None,
         total: float = 1.0, **extra) -> dict:
    clauses = [{"clause": c, "verdict": "invalid", "text": f"broke {c}"} for c in broken]
    clauses.append({"clause": "RI-02", "verdict": "valid", "text": "held RI-02"})
    scenario, point, _, kind = cid.split("/")
    return {"id": cid, "scenario": scenario, "point": point, "kind": kind, "hit": hit, "second": second,
            "status": status, "clauses": clauses, "violations": [f"broke {c}" for c in broken],
            "replay": f"recoverykit chaos --replay {cid}", "timings": {"total": total}, "leftovers": [], **extra}


CELLS = {"cells": [], "declared_points": [], "declared_kinds": []}


def test_a_case_is_accepted_only_when_every_violation_is_an_accepted_clause():
    assert accepted_case(case("s/p/1/tree_kill", "USG-05"), {"USG-05"})
    assert not accepted_case(case("s/p/1/tree_kill", "USG-05", "RI-03"), {"USG-05"})
    assert not accepted_case(case("s/p/1/tree_kill", "USG-05", leftovers=[123]), {"USG-05"})
    left = case("s/p/1/tree_kill", "USG-05")
    left["violations"].append("processes [9] outlived the case")
    assert not accepted_case(left, {"USG-05"})
    assert not accepted_case(case("s/p/1/tree_kill", status="passed"), {"USG-05"})


def test_chaos_verdict_ignores_accepted_failures_and_only_those():
    known = [case("s/usage.persist.after/1/tree_kill", "USG-05")]
    assert systematic.verdict_of(known, CELLS)[0] is INV
    assert systematic.verdict_of(known, CELLS, {"USG-05"})[0] is V  # exercised, a known finding: not unknown
    both = [*known, case("s/tool.dispatch.after/1/tree_kill", "RI-03")]
    verdict, reasons = systematic.verdict_of(both, CELLS, {"USG-05"})
    assert verdict is INV and reasons == ["s/tool.dispatch.after/1/tree_kill: broke RI-03"]


def test_findings_group_per_clause_with_counts_and_the_shortest_replay():
    cases = [case("s/a/2/tree_kill", "USG-05", hit=2, total=0.5),
             case("s/b/1/tree_kill", "USG-05", "RI-03", second="worker_kill", total=0.2),
             case("s/c/1/worker_kill", "USG-05", total=3.0),
             case("s/d/1/tree_kill", status="passed")]
    got = {f["clause"]: f for f in findings(cases, {"USG-05": "--accept"})}
    assert set(got) == {"USG-05", "RI-03"}
    assert got["USG-05"]["count"] == 3 and got["USG-05"]["status"] == "accepted"
    assert len(got["USG-05"]["cells"]) == 3
    # one restart before two, then the earliest hit, then the fastest
    assert got["USG-05"]["shortest"]["case"] == "s/c/1/worker_kill"
    assert got["RI-03"] == {**got["RI-03"], "status": "invalid", "count": 1}


def _results(cases: list[dict], accepted: dict[str, str]) -> dict:
    doc = {"kind": systematic.RESULTS_KIND, "cases": cases, "adapter": {"name": "t"}, "verdict": "valid",
           "acceptance": {"accepted": accepted}, "findings": findings(cases, accepted),
           "coverage": {**CELLS, "cells": []}}
    return doc


def test_the_report_marks_accepted_cells_accepted_never_valid_and_junit_skips_them():
    cases = [case("chat_read_tool/usage.persist.after/1/tree_kill", "USG-05"),
             case("chat_read_tool/tool.dispatch.after/1/tree_kill", "RI-03")]
    report = failure_acceptance.build(_results(cases, {"USG-05": "--accept"}))
    by = {c["clause"]: c["verdict"] for c in report["clauses"]}
    assert by["USG-05"] == "accepted" and by["RI-03"] == "invalid" and by["RI-02"] == "valid"
    assert [c["clause"] for c in report["failing"]] == ["RI-03"]
    assert {c["clause"] for c in report["accepted_cells"]} == {"USG-05"}
    assert [f["clause"] for f in report["findings"]] == ["RI-03", "USG-05"]
    suite = ET.fromstring(junit.junit_xml(_results(cases, {"USG-05": "--accept"})))
    skipped = [s for s in suite.iter("skipped") if s.get("type") == "accepted"]
    assert len(skipped) == 1 and "USG-05" in skipped[0].get("message")
    assert suite.get("failures") == "1" and suite.get("skipped") == "1"


def test_merge_refuses_shards_run_with_different_acceptances():
    a = _results([case("s/p/1/tree_kill", "USG-05")], {"USG-05": "--accept"})
    b = _results([case("s/q/1/tree_kill", "USG-05")], {})
    with pytest.raises(InvalidArgument, match="different acceptances"):
        merge.merge([{**a, "shard": "1/2"}, {**b, "shard": "2/2"}])
    merged = merge.merge([{**a, "shard": "1/2"}, {**b, "acceptance": a["acceptance"], "shard": "2/2"}])
    assert merged["findings"][0]["count"] == 2 and merged["acceptance"]["confirmed"] == ["USG-05"]


# --- end to end against the mini runtime -----------------------------------------------------------


@pytest.mark.slow
def test_certify_with_usg05_accepted_exits_0_and_reports_it_accepted(tmp_path):
    out, written = tmp_path / "out", tmp_path / "baseline.json"
    # every scenario (they hold every required clause); the lockstep machine's acceptance is test_lockstep's
    only = [arg for s in all_scenarios() for arg in ("--only", s.id)]
    done = cli("certify", "--adapter", f"{MINI} --bug sum_usage", "--out", str(out), "--seed", "3",
               "--accept", "USG-05", "--write-baseline", str(written), "--json", *only)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout)
    assert results["verdict"] == "valid"
    assert results["clauses"]["USG-05"] == {**results["clauses"]["USG-05"], "verdict": "accepted",
                                            "finding": "invalid", "accepted_by": "--accept"}
    assert results["acceptance"]["confirmed"] == ["USG-05"] and results["acceptance"]["stale"] == []
    usg = next(f for f in results["findings"] if f["clause"] == "USG-05")
    assert usg["status"] == "accepted" and usg["count"] >= 2 and "--only" in usg["shortest"]["replay"]
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite.get("failures") == "0"
    assert any(s.get("type") == "accepted" for s in suite.iter("skipped"))
    assert [e["clause"] for e in json.loads(written.read_text())["findings"]] == ["USG-05"]
    report = (out / "report.md").read_text(encoding="utf-8")  # the accepted finding, apart from the passes
    assert report.index("## Accepted clauses") < report.index("| USG-05 | accepted (known) |")
    # the baseline, read back by a run with a second bug: USG-05 stays accepted, RI-03 fails the run
    two = cli("certify", "--adapter", f"{MINI} --bug sum_usage,resume_paused", "--out", str(tmp_path / "two"),
              "--only", "chat_read_tool", "--only", "pause_restart", "--baseline", str(written), "--json")
    assert two.returncode == 1, two.stderr[-2000:]
    results = json.loads(two.stdout)
    assert results["clauses"]["USG-05"]["verdict"] == "accepted"
    assert results["clauses"]["RI-03"]["verdict"] == "invalid"
    # FA-01 (every safety clause held after the restart) broke through RI-03 too: not accepted with USG-05
    assert {f["clause"]: f["status"] for f in results["findings"]} == {"USG-05": "accepted", "RI-03": "invalid",
                                                                       "FA-01": "invalid"}


@pytest.mark.slow
def test_an_acceptance_that_held_is_reported_stale(tmp_path):
    done = cli("certify", "--adapter", MINI, "--out", str(tmp_path), "--only", "chat_read_tool",
               "--accept", "USG-05,RI-03", "--json")
    results = json.loads(done.stdout)
    assert results["clauses"]["USG-05"]["verdict"] == "valid"  # what held is shown as held ...
    assert results["clauses"]["USG-05"]["stale_acceptance"] is True  # ... and the acceptance as stale
    assert results["acceptance"]["stale"] == ["USG-05"] and results["acceptance"]["not_exercised"] == ["RI-03"]
    table = cli("certify", "--adapter", MINI, "--out", str(tmp_path / "t"), "--only", "chat_read_tool",
                "--accept", "USG-05")
    assert "stale acceptances" in table.stdout and "USG-05" in table.stdout


@pytest.mark.slow
@pytest.mark.parametrize("command", ["certify", "chaos"])
def test_a_corrupt_baseline_is_a_usage_error(tmp_path, command):
    path = tmp_path / "baseline.json"
    path.write_text('{"kind": "recoverykit-baseline", "version": 1, "findings": [')
    done = cli(command, "--adapter", MINI, "--baseline", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == 64, done.stderr
    assert "cannot be read as JSON" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.slow
def test_chaos_groups_failures_per_clause_and_accepts_known_ones(tmp_path):
    select = ["--scenarios", "chat_read_tool", "--kinds", "tree_kill", "--points", "usage.persist.after"]
    bug = f"{MINI} --bug sum_usage"
    written = tmp_path / "baseline.json"
    failing = cli("chaos", "--adapter", bug, *select, "--out", str(tmp_path / "a"), "--write-baseline", str(written),
                  "--json", "--quiet")
    assert failing.returncode == 1, failing.stderr[-2000:]
    results = json.loads(failing.stdout)
    # summing breaks USG-05; after the kill that makes FA-01 (every safety clause held after the restart) break too
    assert [f["clause"] for f in results["findings"]] == ["FA-01", "USG-05"]
    usg = results["findings"][1]
    assert usg["clause"] == "USG-05" and usg["status"] == "invalid" and usg["count"] == results["statuses"]["failed"]
    assert usg["shortest"]["replay"].startswith("recoverykit chaos --replay chat_read_tool/usage.persist.after/1/")
    assert "USG-05 invalid" in failing.stderr and "shortest replay" in failing.stderr
    known = cli("chaos", "--adapter", bug, *select, "--out", str(tmp_path / "b"), "--baseline", str(written),
                "--json", "--quiet")
    assert known.returncode == 0, known.stderr[-2000:]
    results = json.loads(known.stdout)
    assert results["verdict"] == "valid" and results["acceptance"]["confirmed"] == ["FA-01", "USG-05"]
    assert results["findings"][0]["status"] == "accepted"
    report = json.loads((tmp_path / "b" / "report.json").read_text())
    assert report["failing"] == [] and {c["clause"] for c in report["accepted_cells"]} == {"FA-01", "USG-05"}


def test_an_aggregate_clause_is_accepted_only_through_accepted_clauses():
    """FA-01 broke in two cases: once through the accepted USG-05 only, once through RI-03 as well."""
    from recoverykit.conformance.acceptance import derive
    accepted = {"USG-05": "--accept"}
    assert derive(accepted, [("USG-05", ()), ("FA-01", ("USG-05",))])["FA-01"] == "derived from USG-05"
    assert "FA-01" not in derive(accepted, [("FA-01", ("USG-05",)), ("FA-01", ("USG-05", "RI-03"))])
    assert "RI-03" not in derive(accepted, [("RI-03", ())])  # an ordinary break is never derived
    assert derive({}, [("FA-01", ("USG-05",))]) == {}
