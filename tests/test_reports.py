"""The failure-acceptance report: built from results, rendered, re-validated; shard results merged."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from recoverykit.chaos import coverage
from recoverykit.chaos.shard import Shard
from recoverykit.chaos.systematic import results_document
from recoverykit.model.errors import InvalidArgument
from recoverykit.reports import failure_acceptance, readable, render
from recoverykit.reports.merge import check_report, load_results, merge, write_all

DECLARED = {"command": "x", "name": "fake-runtime", "version": "1", "profiles": ["chat_core"],
            "failpoints": ["tool.result.commit.before"], "restart_kinds": [], "observes": []}
REPLAY = "recoverykit chaos --replay chat_unknown_write/tool.result.commit.before/1/tree_kill --adapter x"


def case(kind, status, clause_verdict="valid"):
    cid = f"chat_unknown_write/tool.result.commit.before/1/{kind}"
    prefix = "broke" if clause_verdict == "invalid" else "held"
    clause = {"clause": "FA-15", "verdict": clause_verdict, "text": f"{prefix} FA-15: never re-run (executed 2 times)",
              "evidence": []}
    return {"id": cid, "scenario": "chat_unknown_write", "point": "tool.result.commit.before", "hit": 1, "kind": kind,
            "status": status, "clauses": [clause], "leftovers": [],
            "violations": [clause["text"]] if clause_verdict == "invalid" else [], "replay": REPLAY}


def doc(cases, shard="1/1"):
    return results_document(cases, DECLARED, mode="systematic", shard=Shard(*map(int, shard.split("/"))),
                            selection={}, seed=0, started=0.0, wall_s=1.0)


def test_failing_cell_has_evidence_and_a_one_command_reproduction():
    results = doc([case("tree_kill", "failed", "invalid"), case("worker_kill", "passed")])
    assert results["verdict"] == "invalid"
    report = failure_acceptance.build(results)
    failing = {(c["clause"], c["kind"]) for c in report["failing"]}
    assert ("FA-15", "tree_kill") in failing and ("FA-06", "tree_kill") in failing  # FA-06 names this point
    assert ("FA-15", "worker_kill") not in failing
    cell = next(c for c in report["failing"] if c["clause"] == "FA-15")
    assert cell["reproduce"] == REPLAY and "executed 2 times" in cell["evidence"][0]
    view = readable.view(results)
    md, page = render.markdown(view), render.html(view)
    assert REPLAY in md and "`tool.result.commit.before x tree_kill`" in md
    assert page.startswith("<!doctype html>") and "<script" not in page and "http" not in page.split("<body>")[0]
    assert "--replay chat_unknown_write/tool.result.commit.before/1/tree_kill" in page


def test_html_escapes_what_it_shows():
    results = doc([case("tree_kill", "failed", "invalid")])
    results["cases"][0]["clauses"][0]["text"] = "broke FA-15: <script>alert(1)</script>"
    assert "<script>alert" not in render.html(readable.view(results))


def test_stored_report_is_revalidated(tmp_path):
    results = doc([case("tree_kill", "failed", "invalid")])
    paths = write_all(results, tmp_path)
    assert check_report(paths["report.json"], tmp_path) == []
    stored = json.loads(paths["report.json"].read_text())
    stored["failing"] = []
    paths["report.json"].write_text(json.dumps(stored))
    assert any("failing" in p for p in check_report(paths["report.json"], tmp_path))
    other = tmp_path / "other"
    write_all(doc([case("tree_kill", "passed")]), other)
    assert any("sha256" in p for p in check_report(tmp_path / "report.json", other))


def test_merge_shards(tmp_path):
    one, two = doc([case("tree_kill", "passed")], "1/2"), doc([case("worker_kill", "failed", "invalid")], "2/2")
    merged = merge([one, two])
    assert merged["verdict"] == "invalid" and len(merged["cases"]) == 2 and merged["shard"] == "1/2+2/2"
    assert merged["clauses"]["FA-15"] == "invalid"
    with pytest.raises(InvalidArgument, match="overlap"):
        merge([one, one])
    with pytest.raises(InvalidArgument, match="different adapters"):
        merge([one, {**two, "adapter": {**DECLARED, "name": "other"}}])
    with pytest.raises(InvalidArgument, match=r"no results\.json"):
        load_results(tmp_path)


def test_merge_cli_exit_codes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_all(doc([case("tree_kill", "passed")], "1/2"), a)
    write_all(doc([case("worker_kill", "passed")], "2/2"), b)
    run = [sys.executable, "-m", "recoverykit", "merge", str(a), str(b), "--json", "--out", str(tmp_path / "m")]
    done = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"] == "valid"
    assert (tmp_path / "m" / "report.html").exists()
    write_all(doc([case("worker_kill", "failed", "invalid")], "2/2"), b)
    assert subprocess.run(run, capture_output=True, timeout=60).returncode == 1
    bad = subprocess.run([sys.executable, "-m", "recoverykit", "merge", str(a), str(a)], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 64 and "overlap" in bad.stderr and "Traceback" not in bad.stderr


def test_coverage_survives_the_report():
    results = doc([case("tree_kill", "passed")])
    report = failure_acceptance.build(results)
    statuses = {(c["point"], c["kind"]): c["status"] for c in report["coverage_cells"]}
    assert statuses[("tool.result.commit.before", "tree_kill")] == coverage.EXERCISED
    assert statuses[("tool.result.commit.before", "normal_exit")] == coverage.NOT_IMPLEMENTED


def test_junit_never_shows_unknown_as_a_pass(tmp_path):
    import xml.etree.ElementTree as ET

    results = doc([case("tree_kill", "failed", "invalid"), case("worker_kill", "passed"),
                   {**case("normal_exit", "passed"), "status": "not_reached", "why": "never reached"}])
    paths = write_all(results, tmp_path)
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    assert suite.get("failures") == "1" and suite.get("skipped") == "1" and suite.get("tests") == "3"
    failure = suite.find("testcase/failure")
    assert REPLAY in failure.text and "broke FA-15" in failure.get("message")
    assert "junit.xml" in paths


def test_results_db_answers_what_results_json_holds(tmp_path):
    import sqlite_utils

    results = doc([case("tree_kill", "failed", "invalid"), case("worker_kill", "passed")])
    paths = write_all(results, tmp_path)
    db = sqlite_utils.Database(paths["results.db"])
    assert db["cases"].count == len(results["cases"])
    failed = list(db.query("SELECT id, kind FROM cases WHERE status = 'failed'"))
    assert [row["kind"] for row in failed] == ["tree_kill"]
    broke = list(db.query("SELECT case_id FROM clauses WHERE verdict = 'invalid'"))
    assert {row["case_id"] for row in broke} == {failed[0]["id"]}
    write_all(doc([case("normal_exit", "passed")]), tmp_path)  # rewritten with results.json, never appended
    assert [row["kind"] for row in sqlite_utils.Database(paths["results.db"]).query("SELECT kind FROM cases")] == [
        "normal_exit"]


def test_readable_report_of_certify_and_chaos_results():
    """Clause summary first, accepted findings apart, every in-page link resolving, markup shown as text."""
    import re

    from report_samples import HOSTILE, certify_results, chaos_results

    view = readable.view(chaos_results(), [certify_results()])
    assert view["verdict"] == "invalid"  # chaos broke FA-15; certify was valid
    rows = {r["clause"]: r for r in view["clauses"]}
    assert rows["FA-15"]["verdict"] == "invalid" and rows["FA-15"]["cells"] == 2 and rows["FA-15"]["finding"]
    assert rows["FA-15"]["replay"].startswith("recoverykit chaos --replay chat_unknown_write/tool.result")
    assert rows["INP-01"] == {**rows["INP-01"], "verdict": "valid", "required": True, "cases": 1}
    accepted = {r["clause"]: r for r in view["accepted_clauses"]}
    assert "USG-05" in accepted and "USG-05" not in rows  # shown apart, never among the passes
    assert accepted["USG-05"]["replay"] == "recoverykit certify --adapter x --seed 7 --only chat_stream_usage"
    assert {f["clause"] for f in view["accepted"]} == {"USG-05", "FA-10"}  # FA-10 names usage.persist.after
    assert "FA-15" in {f["clause"] for f in view["findings"]}
    assert view["more_clauses"] == {"unknown": 1, "not_applicable": 1}
    page = render.html(view)
    ids = set(re.findall(r'\bid="([^"]+)"', page))
    links = set(re.findall(r'href="#([^"]+)"', page))
    assert links and links <= ids, sorted(links - ids)[:5]
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in page
    assert "<script" not in page and "http" not in page.split("<body>")[0]
    md = render.markdown(view)
    assert HOSTILE not in md and md.index("## Clauses") < md.index("## Accepted clauses") < md.index(
        "## Interruption point x restart kind") < md.index("## Findings per clause")


def test_certify_only_report_has_no_matrix_and_reports_refuse_mixed_adapters():
    from report_samples import certify_results, chaos_results

    view = readable.view(None, [certify_results()])
    assert view["matrix"] is None and view["verdict"] == "valid"
    assert "No chaos results in this report" in render.html(view)
    other = {**chaos_results(), "adapter": {**DECLARED}}
    with pytest.raises(InvalidArgument, match="different adapters"):
        readable.view(other, [certify_results()])
    with pytest.raises(InvalidArgument, match="at least one"):
        readable.view(None, [])
    with pytest.raises(TypeError, match=r"readable\.view"):  # the old call, failing clearly
        render.html(failure_acceptance.build(chaos_results()))


def test_report_cli(tmp_path):
    from recoverykit.cli import main
    from report_samples import certify_results, chaos_results

    (tmp_path / "chaos").mkdir()
    (tmp_path / "chaos" / "results.json").write_text(json.dumps(chaos_results()))
    (tmp_path / "certify.json").write_text(json.dumps(certify_results()))

    def run(*args):
        with pytest.raises(SystemExit) as exit_:
            main(["report", *map(str, args)])
        return exit_.value.code

    assert run(tmp_path / "chaos", tmp_path / "certify.json", "--out", tmp_path / "out") == 1  # the verdict
    page = (tmp_path / "out" / "report.html").read_text()
    assert "Certify run 1" in page and 'id="cell-tool.result.commit.before-tree_kill"' in page
    assert run(tmp_path / "certify.json", "--md", tmp_path / "c.md") == 0
    assert "## Accepted clauses" in (tmp_path / "c.md").read_text()
    (tmp_path / "junk.json").write_text("{}")
    assert run(tmp_path / "junk.json") == 64
    assert run(tmp_path / "certify.json", "--html", tmp_path / "no" / "such" / "dir.html") == 64
