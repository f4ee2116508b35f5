"""Adversarial adapters against certify's verdict: a protocol break is invalid, silence unknown, never a pass.

Each test drives ``recoverykit`` as a user would (a subprocess, so its exit code and output are the
user's), through ``tests/adapters/proxy_adapter.py``: the reference runtime with chosen replies
corrupted. Every test asserts the exit code, that no traceback reached the output, a generous time
bound that proves there was no hang, and that no process of the run outlived it.
"""

from __future__ import annotations

import json
import shlex
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from bundle_agreement import disagreements
from env_helpers import cli_in_process, run_kit
from recoverykit.chaos.systematic import RESULTS_KIND
from recoverykit.conformance.history import Recorder

ROOT = Path(__file__).resolve().parent.parent
PROXY = ROOT / "tests" / "adapters" / "proxy_adapter.py"

pytestmark = pytest.mark.slow


def proxy(*modes: str, after: int = 0, when: str = "") -> str:
    args = [sys.executable, str(PROXY), *[f"--mode={m}" for m in modes]]
    args += [f"--after={after}"] if after else []
    return shlex.join([*args, f"--if-init-contains={when}"] if when else args)




def in_process(*args: str) -> tuple[int, str]:
    """``recoverykit ARGS`` in this process (fast: for commands that start no adapter); never a traceback."""
    code, out = cli_in_process(*args)
    assert "Traceback" not in out, out
    return code, out


def results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def junit_suite(out: Path) -> ET.Element:
    return ET.parse(out / "junit.xml").getroot().find("testsuite")


# --- defect 1: a protocol break inside the lockstep machine or a scenario ---------------------------------------

def test_a_protocol_break_inside_lockstep_is_invalid_in_every_output(tmp_path):
    out = tmp_path / "out"
    # every scenario honest: before the fix this printed "verdict: valid" and exited 0
    code, text = run_kit("certify", "--adapter", proxy("extra-key:observe", after=3, when="lockstep"),
                         "--seed", "1", "--only", "stop_all_restart", "--only", "chat_read_tool", "--only", "lockstep",
                         "--out", str(out))
    assert code == 1, text
    assert "verdict: invalid" in text
    doc = results(out)
    assert doc["verdict"] == "invalid" and doc["exit_code"] == 1
    assert doc["clauses"]["protocol"]["verdict"] == "invalid"
    (lockstep,) = [c for c in doc["cases"] if c["name"] == "lockstep"]
    assert lockstep["verdict"] == "invalid" and any(r["clause"] == "protocol" for r in lockstep["results"])
    suite = junit_suite(out)
    assert suite.get("failures") == "1"
    assert suite.find("properties/property[@name='verdict']").get("value") == "invalid"
    # the stored bundle re-checks the same way: the break is in the kit's own history
    assert disagreements(out) == []  # every bundle re-checks as the run judged it
    code, text = run_kit("check", str(out / "bundles" / "lockstep"), bound_s=60)
    assert code == 1, text
    assert "broke protocol" in text


def test_a_protocol_break_inside_a_scenario_is_invalid_not_unknown(tmp_path):
    out = tmp_path / "out"
    code, text = run_kit("certify", "--adapter", proxy("extra-key:observe", when="chat_read_tool"), "--seed", "1",
                         "--only", "chat_read_tool", "--only", "stop_all_restart", "--only", "lockstep",
                         "--out", str(out))
    assert code == 1, text
    doc = results(out)
    assert doc["verdict"] == "invalid" and doc["clauses"]["protocol"]["verdict"] == "invalid"
    verdicts = {c["name"]: c["verdict"] for c in doc["cases"]}
    assert verdicts["chat_read_tool"] == "invalid"
    assert [n for n, v in verdicts.items() if v == "invalid"] == ["chat_read_tool"]
    assert junit_suite(out).get("failures") == "1"
    assert disagreements(out) == []  # every bundle re-checks as the run judged it
    code, text = run_kit("check", str(out / "bundles" / "chat_read_tool"), bound_s=60)
    assert code == 1, text


def test_a_protocol_break_inside_an_observe_of_a_restarting_case_keeps_every_clause(tmp_path):
    """Issue 27 item 9: FA-01 asked the catalogue for the kind of the `protocol` pseudo-clause (UnknownClause), so the
    case became unknown with one `completion` result, and `check` called its bundle corrupt (64)."""
    out = tmp_path / "out"
    code, text = run_kit("certify", "--adapter", proxy("extra-key:observe", after=2), "--seed", "1",
                         "--only", "stop_all_restart", "--out", str(out))
    assert code == 1, text
    (case,) = results(out)["cases"]
    assert case["verdict"] == "invalid"
    by_clause = {r["clause"]: r["verdict"] for r in case["results"]}
    assert by_clause["protocol"] == "invalid"
    assert "completion" not in by_clause  # the case ran to its end: every other clause is judged
    assert by_clause["INP-01"] == "valid" and "FA-01" in by_clause
    assert disagreements(out) == []  # every bundle re-checks as the run judged it
    code, text = run_kit("check", str(out / "bundles" / "stop_all_restart"), bound_s=60)
    assert code == 1, text
    assert "broke protocol" in text and "corrupt" not in text


# --- defect 3: an empty --adapter --------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["certify", "chaos"])
@pytest.mark.parametrize("adapter", ["", "   "])
def test_an_empty_adapter_is_a_usage_error_not_the_reference_runtime(command, adapter, tmp_path):
    out = tmp_path / "out"
    code, text = run_kit(command, "--adapter", adapter, "--out", str(out), bound_s=60)
    assert code == 64, text
    assert "empty" in text
    assert not out.exists()  # nothing ran


# --- defect 8: a broken handshake -------------------------------------------------------------------------------

HANDSHAKE_BREAKS = ["wrong-type:init", "oversize:init", "invalid-utf8:init", "close:init", "bogus-declarations:init"]


@pytest.mark.parametrize("mode", HANDSHAKE_BREAKS)
def test_a_broken_handshake_is_invalid_with_results_written_like_ping(mode, tmp_path):
    out = tmp_path / "out"
    code, text = run_kit("certify", "--adapter", proxy(mode), "--seed", "1", "--out", str(out), bound_s=90)
    assert code == 1, text
    doc = results(out)
    assert doc["verdict"] == "invalid" and doc["clauses"]["protocol"]["verdict"] == "invalid"
    assert int(junit_suite(out).get("failures")) >= 1
    ping, text = run_kit("protocol", "ping", "--adapter", proxy(mode), bound_s=60)
    assert ping == code, text  # ping and certify agree on the same adapter


def test_an_adapter_that_hangs_on_start_is_unknown_and_leaves_no_process(tmp_path, monkeypatch):
    monkeypatch.setenv("RECOVERYKIT_START_TIMEOUT_S", "10")
    out = tmp_path / "out"
    code, text = run_kit("certify", "--adapter", proxy("hang:start"), "--seed", "1", "--only", "lockstep",
                         "--out", str(out), bound_s=180)
    assert code == 2, text
    doc = results(out)
    assert doc["verdict"] == "unknown" and doc["clauses"]["protocol"]["verdict"] == "unknown"
    assert (out / "junit.xml").exists()
    assert disagreements(out) == []  # every bundle re-checks as the run judged it
    code, text = run_kit("check", str(out / "bundles" / "lockstep"), bound_s=60)
    assert code == 2, text  # silence stays unknown in the stored bundle, never valid


# --- defect 6: no clause result at all ---------------------------------------------------------------------------

def test_results_without_any_clause_result_still_get_their_database(tmp_path):
    import sqlite3
    doc = {"kind": RESULTS_KIND, "version": 1, "adapter": {"name": "demo"}, "shard": "1/1", "started": 0,
           "wall_s": 1.0, "cases": [{"id": "chat_text/input.accept.after/1/tree_kill", "scenario": "chat_text",
                                     "point": "input.accept.after", "hit": 1, "kind": "tree_kill", "second": None,
                                     "status": "not_reached", "verdict": "unknown", "clauses": [], "violations": [],
                                     "why": "never reached", "leftovers": []}],
           "coverage": {"cells": [], "declared_points": [], "declared_kinds": []}}
    (tmp_path / "part").mkdir()
    (tmp_path / "part" / "results.json").write_text(json.dumps(doc))
    code, text = in_process("merge", str(tmp_path / "part"), "--out", str(tmp_path / "merged"))
    assert code == 2, text  # nothing was exercised: unknown, and the exit says so (not 70)
    db = sqlite3.connect(tmp_path / "merged" / "results.db")
    try:
        assert db.execute("select count(*) from clauses").fetchone() == (0,)
        assert db.execute("select count(*) from cases").fetchone() == (1,)
    finally:
        db.close()


# --- defect 13: malformed input to check and merge ---------------------------------------------------------------

SNAPSHOT = {"approvals": None, "fenced_writes": None, "goals": None, "leases": None, "runs": None, "tool_calls": None,
            "turns": None, "usage_receipts": None, "waits": None, "work_items": [
                {"control_version": 1, "desired_state": "done", "host_id": "host-a", "inputs": [
                    {"client_msg_id": "c-1", "input_id": "in-1", "text": "hello"}], "kind": "chat_request",
                 "last_progress": None, "parent_id": None, "reason_code": "finished", "recovery_policy": "automatic",
                 "session_id": "s-1", "status": "finished", "work_id": "w-1"}]}


def valid_bundle(folder: Path) -> Path:
    """A tiny bundle the checker judges valid (INP-01 held, nothing broken)."""
    folder.mkdir(parents=True, exist_ok=True)
    with Recorder(folder / "history.jsonl") as rec:
        op = rec.invoke("submit", {"session_id": "s-1", "text": "hello", "client_msg_id": "c-1"})
        rec.complete(op, "ok", {"work_id": "w-1", "input_id": "in-1"})
        rec.observe(SNAPSHOT, quiescent=True)
    (folder / "bundle.json").write_text(json.dumps({"case": "x", "observes": ["work_items"]}))
    return folder


def test_the_tiny_bundle_is_valid(tmp_path):
    code, text = in_process("check", str(valid_bundle(tmp_path / "b")))
    assert code == 0, text


def _append(path: Path, record: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


def test_a_dangling_invoke_is_never_valid(tmp_path):
    bundle = valid_bundle(tmp_path / "b")
    _append(bundle / "history.jsonl", {"event": "op", "index": 3, "type": "invoke", "f": "observe", "value": {},
                                       "time": 1.0, "invoke": None})
    code, text = in_process("check", str(bundle))
    assert code == 2, text
    assert "never completed" in text


@pytest.mark.parametrize("index", ["3", 2.5, True, None, 1])
def test_a_non_integer_or_backward_index_is_a_usage_error(index, tmp_path):
    bundle = valid_bundle(tmp_path / "b")
    _append(bundle / "history.jsonl", {"event": "fault", "index": index, "kind": "tree_kill", "detail": {},
                                       "time": 1.0})
    code, text = in_process("check", str(bundle))
    assert code == 64, text


@pytest.mark.parametrize("damage", ["truncated_history", "history_dir", "manifest_not_json", "manifest_list",
                                    "observes_string", "ledger_garbage", "witness_dir", "snapshot_wrong_type",
                                    "completion_of_nothing", "value_not_object"])
def test_a_damaged_bundle_is_a_usage_error(damage, tmp_path):
    bundle = valid_bundle(tmp_path / "b")
    history = bundle / "history.jsonl"
    lines = history.read_text().splitlines()
    if damage == "truncated_history":
        history.write_text(lines[0][:30] + "\n" + "\n".join(lines[1:]) + "\n")
    elif damage == "history_dir":
        history.unlink()
        history.mkdir()
    elif damage == "manifest_not_json":
        (bundle / "bundle.json").write_text('{"observes": [')
    elif damage == "manifest_list":
        (bundle / "bundle.json").write_text("[]")
    elif damage == "observes_string":
        (bundle / "bundle.json").write_text('{"observes": "work_items"}')
    elif damage == "ledger_garbage":
        (bundle / "provider-ledger.jsonl").write_bytes(b"\xff\xfe\n[1]\n")
    elif damage == "witness_dir":
        (bundle / "witness.jsonl").mkdir()
    elif damage == "snapshot_wrong_type":
        record = json.loads(lines[2])
        record["snapshot"]["work_items"][0]["inputs"] = "c-1"
        history.write_text("\n".join([*lines[:2], json.dumps(record)]) + "\n")
    elif damage == "completion_of_nothing":
        record = json.loads(lines[1])
        record["invoke"] = 7
        history.write_text("\n".join([lines[0], json.dumps(record), lines[2]]) + "\n")
    elif damage == "value_not_object":
        record = json.loads(lines[1])
        record["value"] = ["w-1"]
        history.write_text("\n".join([lines[0], json.dumps(record), lines[2]]) + "\n")
    code, text = in_process("check", str(bundle))
    assert code == 64, text


def _results_doc() -> dict:
    case = {"id": "chat_text/input.accept.after/1/tree_kill", "scenario": "chat_text", "point": "input.accept.after",
            "hit": 1, "kind": "tree_kill", "second": None, "status": "passed", "verdict": "valid",
            "clauses": [{"clause": "INP-01", "verdict": "valid", "text": "held INP-01"}], "violations": [],
            "leftovers": [], "timings": {"total": 1.0}, "replay": "recoverykit chaos --replay x"}
    cell = {"point": "input.accept.after", "kind": "tree_kill", "status": "exercised", "cases": 1, "failed": 0,
            "case_ids": [case["id"]], "why": None}
    return {"kind": RESULTS_KIND, "version": 1, "adapter": {"name": "ref"}, "shard": "1/1", "started": 0.0,
            "wall_s": 1.0, "cases": [case], "coverage": {"cells": [cell], "declared_points": ["input.accept.after"],
                                                         "declared_kinds": ["tree_kill"]}}


def test_a_well_formed_results_document_merges(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps(_results_doc()))
    code, text = in_process("merge", str(tmp_path / "results.json"), "--out", str(tmp_path / "m"))
    assert code == 0, text


@pytest.mark.parametrize("damage", ["not_json", "truncated", "not_utf8", "cases_string", "case_without_id",
                                    "cell_status", "coverage_missing", "unknown_clause", "adapter_name_list",
                                    "results_dir"])
def test_a_damaged_results_document_is_a_usage_error(damage, tmp_path):
    doc = _results_doc()
    path = tmp_path / "results.json"
    text = json.dumps(doc)
    if damage == "not_json":
        text = "hello"
    elif damage == "truncated":
        text = text[: len(text) // 2]
    elif damage == "cases_string":
        doc["cases"] = "many"
    elif damage == "case_without_id":
        del doc["cases"][0]["id"]
    elif damage == "cell_status":
        doc["coverage"]["cells"][0]["status"] = 3
    elif damage == "coverage_missing":
        del doc["coverage"]
    elif damage == "unknown_clause":
        doc["cases"][0]["clauses"][0]["clause"] = "NOPE-1"
    elif damage == "adapter_name_list":
        doc["adapter"]["name"] = ["a"]
    if damage == "not_utf8":
        path.write_bytes(b'{"kind": "\xff"}')
    elif damage == "results_dir":
        path.mkdir()
    else:
        path.write_text(text if damage in ("not_json", "truncated") else json.dumps(doc))
    code, out = in_process("merge", str(tmp_path), "--out", str(tmp_path / "m"))
    assert code == 64, out
    report = tmp_path / "report.json"
    report.write_text("{")
    code, out = in_process("merge", "--check-report", str(report), str(tmp_path))
    assert code == 64, out
