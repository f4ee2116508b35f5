"""Property-based fuzzing of ``recoverykit check`` and ``recoverykit merge`` inputs.

Whatever bytes are in a bundle's files or a results file (random bytes, truncated JSON, valid JSON of
the wrong shape, a directory where a file belongs, a mutation of a well-formed document), the
command ends in a usage error (64) or a verdict (0 / 1 / 2): never exit 70 (a kit defect) and never
a traceback. Run in-process through ``recoverykit.cli.main`` for speed; nothing here starts a process.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from env_helpers import cli_in_process
from hypothesis import given
from hypothesis import strategies as st
from recoverykit.chaos.systematic import RESULTS_KIND
from recoverykit.conformance.history import Recorder

ALLOWED = {0, 1, 2, 64}
BUNDLE_FILES = ("history.jsonl", "bundle.json", "provider-ledger.jsonl", "witness.jsonl")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12)


def run(*args: str) -> tuple[int, str]:
    return cli_in_process(*args)


def assert_no_defect(code: int, out: str) -> None:
    assert code in ALLOWED, out
    assert "Traceback" not in out and "internal error" not in out, out


# --- mutations of a well-formed document ------------------------------------------------------------------------

def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _replace(doc: Any, path: tuple, value: Any, delete: bool) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        doc = dict(doc)
        if delete and not rest:
            doc.pop(head, None)
        else:
            doc[head] = _replace(doc[head], rest, value, delete)
    else:
        doc = list(doc)
        if delete and not rest:
            doc.pop(head)
        else:
            doc[head] = _replace(doc[head], rest, value, delete)
    return doc


@st.composite
def mutated(draw, doc: Any) -> Any:
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        doc = _replace(doc, path, draw(json_values), delete=bool(path) and draw(st.booleans()))
    return doc


# --- check ------------------------------------------------------------------------------------------------------

SNAPSHOT = {"approvals": None, "fenced_writes": [], "goals": None, "leases": [], "runs": None, "tool_calls": None,
            "turns": [], "usage_receipts": [], "waits": [], "work_items": [
                {"control_version": 1, "desired_state": "done", "host_id": "host-a", "inputs": [
                    {"client_msg_id": "c-1", "input_id": "in-1", "text": "[[rk-script:read]] hello"}],
                 "kind": "chat_request", "last_progress": None, "parent_id": None, "reason_code": "finished",
                 "recovery_policy": "automatic", "session_id": "s-1", "status": "finished", "work_id": "w-1"}]}
LEDGER = [{"event": "request", "seq": 1, "time": 1.0, "request_id": "r-1", "request_id_source": "header",
           "attempt": 1, "script_id": "read", "step": 0, "stream": True, "include_usage": True, "model": "m"},
          {"event": "response", "seq": 1, "time": 2.0, "request_id": "r-1", "status": 200, "stream": True,
           "delivered": True, "chunks_sent": 2, "usage_billed": {"prompt_tokens": 1, "completion_tokens": 2},
           "usage_reported": {"prompt_tokens": 1, "completion_tokens": 2}, "probe_tokens": [], "cut": False}]
WITNESS = [{"phase": "start", "probe_token": "read.0.1.0", "pid": 10, "create_time": 1.0, "time": 1.0,
            "tool": "probe_unknown", "effect_class": "unknown"},
           {"phase": "finish", "probe_token": "read.0.1.0", "pid": 10, "create_time": 1.0, "time": 2.0,
            "outcome": "ok", "exit_code": 0}]


def _history_records() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "history.jsonl"
        with Recorder(path, clock=lambda: 5.0) as rec:
            op = rec.invoke("submit", {"session_id": "s-1", "text": "[[rk-script:read]] hello", "client_msg_id": "c-1"})
            rec.complete(op, "ok", {"work_id": "w-1", "input_id": "in-1"})
            op = rec.invoke("pause", {"work_id": "w-1"})
            rec.complete(op, "ok", {"work_id": "w-1"})
            rec.fault("tree_kill", pids=[1])
            rec.observe(SNAPSHOT, quiescent=True)
        return [json.loads(line) for line in path.read_text().splitlines()]


HISTORY = _history_records()
MANIFEST = {"case": "x", "observes": ["work_items", "usage_receipts", "leases", "turns"], "results": []}
GOOD = {"history.jsonl": HISTORY, "bundle.json": MANIFEST, "provider-ledger.jsonl": LEDGER, "witness.jsonl": WITNESS}


def _jsonl(records: Any) -> bytes:
    if isinstance(records, list):
        return "".join(json.dumps(r) + "\n" for r in records).encode()
    return (json.dumps(records) + "\n").encode()


@st.composite
def bundle_file(draw, name: str) -> bytes | None:
    """None: a directory in the file's place; else the file's bytes."""
    how = draw(st.sampled_from(["good", "mutated", "bytes", "truncated", "directory", "absent"]))
    good = GOOD[name]
    encode = (lambda d: json.dumps(d).encode()) if name == "bundle.json" else _jsonl
    if how == "good":
        return encode(good)
    if how == "mutated":
        return encode(draw(mutated(good)))
    if how == "bytes":
        return draw(st.binary(max_size=200))
    if how == "truncated":
        data = encode(good)
        return data[: draw(st.integers(0, len(data)))]
    return None if how == "directory" else b"\0absent"


@given(files=st.fixed_dictionaries({name: bundle_file(name) for name in BUNDLE_FILES}))
def test_check_of_any_bundle_is_a_usage_error_or_a_verdict(files):
    with tempfile.TemporaryDirectory() as d:
        bundle = Path(d) / "bundle"
        bundle.mkdir()
        for name, data in files.items():
            if data is None:
                (bundle / name).mkdir()
            elif data != b"\0absent":
                (bundle / name).write_bytes(data)
        assert_no_defect(*run("check", str(bundle)))
        assert_no_defect(*run("check", "--json", str(bundle)))


def test_the_unmutated_bundle_is_judged():
    with tempfile.TemporaryDirectory() as d:
        bundle = Path(d)
        for name in BUNDLE_FILES:
            good = GOOD[name]
            (bundle / name).write_bytes(json.dumps(good).encode() if name == "bundle.json" else _jsonl(good))
        code, out = run("check", str(bundle))
        assert code in (0, 1, 2) and "INP-01" in out, out


# --- merge ------------------------------------------------------------------------------------------------------

CASE = {"id": "chat_text/input.accept.after/1/tree_kill", "scenario": "chat_text", "point": "input.accept.after",
        "hit": 1, "kind": "tree_kill", "second": None, "status": "failed", "verdict": "invalid",
        "clauses": [{"clause": "INP-01", "verdict": "invalid", "text": "broke INP-01"},
                    {"clause": "FA-15", "verdict": "valid", "text": "held FA-15"}],
        "violations": ["broke INP-01"], "leftovers": [], "timings": {"total": 1.0, "reached": 0.5},
        "replay": "recoverykit chaos --replay x", "why": None, "reached": {"via": "failpoint"},
        "adapter": {"name": "ref", "warm_spare": True}}
CELL = {"point": "input.accept.after", "kind": "tree_kill", "status": "exercised", "cases": 1, "failed": 1,
        "case_ids": [CASE["id"]], "why": None}
RESULTS = {"kind": RESULTS_KIND, "version": 1, "adapter": {"name": "ref"}, "shard": "1/2", "started": 0.0,
           "wall_s": 1.0, "seed": 0, "mode": "systematic", "selection": {}, "cases": [CASE],
           "coverage": {"cells": [CELL], "declared_points": ["input.accept.after"], "declared_kinds": ["tree_kill"]}}
OTHER = {**RESULTS, "shard": "2/2", "cases": [{**CASE, "id": "chat_text/input.accept.after/1/worker_kill",
                                                 "kind": "worker_kill", "status": "passed", "verdict": "valid"}]}


@st.composite
def results_file(draw, good: dict) -> bytes | None:
    how = draw(st.sampled_from(["good", "mutated", "mutated", "bytes", "truncated", "directory"]))
    if how == "good":
        return json.dumps(good).encode()
    if how == "mutated":
        return json.dumps(draw(mutated(good))).encode()
    if how == "bytes":
        return draw(st.binary(max_size=200))
    if how == "truncated":
        data = json.dumps(good).encode()
        return data[: draw(st.integers(0, len(data)))]
    return None


@given(first=results_file(RESULTS), second=results_file(OTHER), check_report=st.booleans())
def test_merge_of_any_results_is_a_usage_error_or_a_verdict(first, second, check_report):
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, data in enumerate((first, second)):
            part = Path(d) / f"part{i}"
            part.mkdir()
            if data is None:
                (part / "results.json").mkdir()
            else:
                (part / "results.json").write_bytes(data)
            paths.append(str(part))
        assert_no_defect(*run("merge", *paths, "--out", str(Path(d) / "merged"), "--json"))
        if check_report:
            report = Path(d) / "merged" / "report.json"
            if not report.exists():
                report.parent.mkdir(exist_ok=True)
                report.write_bytes(first if first is not None else b"{")
            assert_no_defect(*run("merge", "--check-report", str(report), paths[1]))


def test_the_unmutated_shards_merge():
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, doc in enumerate((RESULTS, OTHER)):
            (Path(d) / f"p{i}.json").write_text(json.dumps(doc))
            paths.append(str(Path(d) / f"p{i}.json"))
        code, out = run("merge", *paths, "--out", str(Path(d) / "m"))
        assert code == 1, out  # the first shard holds a failed case
