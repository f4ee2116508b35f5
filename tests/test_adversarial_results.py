"""Adversarial result files against ``merge`` and ``report``: an incomplete or mixed shard set is never valid,
an edited verdict is recomputed from the cases, a malformed file is a usage error.

A CI fan-in merges the shards its jobs uploaded; a job that failed to upload, or a shard of another run
(another seed, kit, adapter version or dry run), must not certify the runtime. The shards here are a real
chaos run on the reference runtime, one scenario and three cells (one case in each of three shards), run
once per module; the verdicts of merge and report are then asked of every subset and every mix.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from env_helpers import cli_in_process, marked_by, run_kit

ROOT = Path(__file__).resolve().parent.parent
BOUND_S = 150.0  # generous: proves "no hang", not speed
# one case per shard of three: sha256 of these ids mod 3 gives 1, 2 and 3 (chaos/shard.py)
SELECT = ("--scenarios", "chat_unknown_write", "--points", "tool.result.commit.before",
          "--kinds", "worker_kill,tree_kill,stop_all_exit", "--quiet")


def chaos(*args: str) -> tuple[int, str]:
    """``recoverykit chaos ARGS`` in a subprocess: (exit code, output); no hang, no traceback, no leftovers."""
    return run_kit("chaos", *SELECT, *args, bound_s=BOUND_S)


def kit(*args: str) -> tuple[int, str]:
    code, out = cli_in_process(*args)
    assert "Traceback" not in out and "internal error" not in out, out
    return code, out


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict[str, Path]:
    """The whole run, its three shards (enumerated from the whole run's trace), and shard 3 again with another
    seed: their --out directories."""
    base = tmp_path_factory.mktemp("shards")
    code, out = chaos("--out", str(base / "whole"))
    assert code == 0, out
    trace = str(base / "whole" / "trace.json")
    dirs = {"whole": base / "whole"}
    for k in (1, 2, 3):
        code, out = chaos("--shard", f"{k}/3", "--trace", trace, "--out", str(base / f"s{k}"))
        assert code == 0, out
        dirs[f"s{k}"] = base / f"s{k}"
        assert len(json.loads((base / f"s{k}" / "results.json").read_text())["cases"]) == 1
    code, out = chaos("--shard", "3/3", "--seed", "7", "--trace", trace, "--out", str(base / "s3seed7"))
    assert code == 0, out
    dirs["s3seed7"] = base / "s3seed7"
    # another whole run of another selection (as runtimes.md merges a --durable-writes run beside another)
    code, out = chaos("--points", "tool.result.commit.after", "--kinds", "worker_kill", "--out", str(base / "other"))
    assert code == 0, out
    dirs["other"] = base / "other"
    return dirs


def _edited(src: Path, dst: Path, edit) -> str:
    doc = json.loads((src / "results.json").read_text())
    edit(doc)
    dst.write_text(json.dumps(doc))
    return str(dst)


@pytest.mark.slow
def test_two_of_three_shards_are_unknown_never_valid(run):
    code, out = kit("merge", str(run["s1"]), str(run["s2"]))
    assert code == 2, out
    assert "shard 3/3 is missing" in out and "chat_unknown_write/tool.result.commit.before/1/stop_all_exit" in out
    for subset in ((run["s1"],), (run["s2"], run["s3"]), (run["s1"], run["s3"])):
        code, out = kit("merge", *map(str, subset))
        assert code == 2, out
        code, out = kit("report", *map(str, subset))
        assert code == 2, out


@pytest.mark.slow
def test_all_three_shards_give_the_verdict_of_the_whole_run(run, tmp_path):
    whole = json.loads((run["whole"] / "results.json").read_text())
    code, out = kit("merge", str(run["s3"]), str(run["s1"]), str(run["s2"]), "--out", str(tmp_path / "m"))
    assert code == 0, out
    merged = json.loads((tmp_path / "m" / "results.json").read_text())
    assert merged["verdict"] == whole["verdict"] == "valid" and "missing" not in merged
    assert sorted(c["id"] for c in merged["cases"]) == sorted(c["id"] for c in whole["cases"])
    assert merged["coverage"]["exercised_cells"] == whole["coverage"]["exercised_cells"]
    code, out = kit("report", str(run["s1"]), str(run["s2"]), str(run["s3"]))
    assert code == 0, out
    code, out = kit("merge", str(tmp_path / "m"), str(run["s3"]))  # a merged set holds 3/3 already
    assert code == 64 and "given twice" in out, out


@pytest.mark.slow
def test_shards_of_different_runs_are_a_usage_error(run, tmp_path):
    code, out = kit("merge", str(run["s1"]), str(run["s2"]), str(run["s3seed7"]))
    assert code == 64 and "seed" in out, out
    for name, edit, word in (
            ("kit", lambda d: d.update(kit_version="0.0.9"), "kit version"),
            ("adapter", lambda d: d["adapter"].update(version="9.9"), "adapter version"),
            ("trace", lambda d: d["run"].update(trace_sha256="0" * 64), "dry-run trace"),
            ("split", lambda d: d.update(shard="3/4"), "numbers of shards")):
        other = _edited(run["s3"], tmp_path / f"{name}.json", edit)
        code, out = kit("merge", str(run["s1"]), str(run["s2"]), other)
        assert code == 64 and word in out, (name, out)
        code, out = kit("report", str(run["s1"]), str(run["s2"]), other)
        assert code == 64 and word in out, (name, out)


@pytest.mark.slow
def test_whole_runs_of_different_selections_merge_and_each_must_be_complete(run, tmp_path):
    code, out = kit("merge", str(run["whole"]), str(run["other"]), "--out", str(tmp_path / "m"))
    assert code == 0, out
    code, out = kit("merge", str(run["s1"]), str(run["s2"]), str(run["s3"]), str(run["other"]))
    assert code == 0, out
    code, out = kit("merge", str(run["s1"]), str(run["s2"]), str(run["other"]))
    assert code == 2 and "shard 3/3 of run 1" in out, out
    code, out = kit("merge", str(tmp_path / "m"), str(run["s3"]))  # the whole run already holds that case
    assert code == 64, out
    moved = _edited(run["s3"], tmp_path / "moved.json", lambda d: d["selection"].update(kinds=["tree_kill"]))
    code, out = kit("merge", str(run["s1"]), str(run["s2"]), moved)  # two runs, neither whole
    assert code == 2 and "missing" in out, out


def test_a_merge_written_before_parts_were_recorded_is_judged_as_before():
    import gzip

    from recoverykit.reports.merge import judged
    doc = json.loads(gzip.decompress((ROOT / "reports" / "langgraph" / "results.json.gz").read_bytes()))
    assert doc["shard"] == "1/1+1/1" and "parts" not in doc
    assert judged([doc])["verdict"] == doc["verdict"] == "invalid"


@pytest.mark.slow
def test_a_part_cut_short_keeps_the_set_unknown(run, tmp_path):
    cut = _edited(run["s3"], tmp_path / "cut.json", lambda d: d.update(incomplete=True, interrupted_by="SIGTERM"))
    code, out = kit("merge", str(run["s1"]), str(run["s2"]), cut)
    assert code == 2 and "interrupted by SIGTERM" in out, out


# --- report recomputes the verdict from the cases (issue 27 item 8) ------------------------------------------------

def _write(tmp_path: Path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def _certify_broken() -> dict:
    from report_samples import certify_results
    doc = certify_results()
    bad = {"clause": "INP-01", "verdict": "invalid", "text": "broke INP-01", "evidence": [], "basis": "kit"}
    doc["cases"][1] = {**doc["cases"][1], "verdict": "invalid", "results": [bad], "message": bad["text"]}
    return doc  # its stored verdict still says valid, exit_code 0


def test_report_recomputes_a_certify_verdict_from_the_cases(tmp_path):
    from report_samples import certify_results
    assert kit("report", _write(tmp_path, "ok.json", certify_results()))[0] == 0
    code, out = kit("report", _write(tmp_path, "edited.json", _certify_broken()))
    assert code == 1 and "INP-01" in out, out
    code, out = kit("report", _write(tmp_path, "cut.json", {**certify_results(), "incomplete": True,
                                                             "interrupted_by": "SIGTERM"}))
    assert code == 2 and "incomplete" in out, out
    unjudged = certify_results()
    unjudged["cases"][1]["results"] = []  # the required INP-01 is then judged by no case
    assert kit("report", _write(tmp_path, "unjudged.json", unjudged))[0] == 2
    stored = {**certify_results(), "verdict": "unknown"}  # never more lenient than the stored verdict
    assert kit("report", _write(tmp_path, "stored.json", stored))[0] == 2


def test_report_recomputes_a_chaos_verdict_from_the_cases(tmp_path):
    from report_samples import chaos_results
    doc = chaos_results()
    assert doc["verdict"] == "invalid"
    assert kit("report", _write(tmp_path, "edited.json", {**doc, "verdict": "valid"}))[0] == 1
    held = {**doc, "cases": [c for c in doc["cases"] if c["status"] == "passed"], "verdict": "valid"}
    assert kit("report", _write(tmp_path, "held.json", held))[0] == 0
    code, out = kit("report", _write(tmp_path, "cut.json", {**held, "incomplete": True, "interrupted_by": "SIGINT"}))
    assert code == 2 and "interrupted by SIGINT" in out, out


@pytest.mark.parametrize("damage", [
    lambda d: d["cases"].__setitem__(0, "chat_stream_usage"),
    lambda d: d["cases"][0].update(program=5),
    lambda d: d["cases"][0].update(program=[{"step": 1}]),
    lambda d: d.update(adapter=["x"]),
    lambda d: d["cases"][0]["results"].__setitem__(0, "broke"),
    lambda d: d["findings"][0].update(count="many"),
    lambda d: d["findings"][0].update(shortest=[1]),
    lambda d: d.update(acceptance={"stale": 3}),
    lambda d: d.update(verdict="great"),
], ids=["case-string", "program-int", "program-dicts", "adapter-list", "result-string", "count-string",
        "shortest-list", "stale-int", "verdict-word"])
def test_a_malformed_certify_document_is_a_usage_error(damage, tmp_path):
    from report_samples import certify_results
    doc = certify_results()
    damage(doc)
    code, out = kit("report", _write(tmp_path, "bad.json", doc))
    assert code == 64 and "not a well-formed certify results document" in out, out


# --- hostile input files: a FIFO, a device, a directory, a file over the limit (issue 27 item 15) -----------------

def kit_process(*args: str, env: dict | None = None, bound_s: float = 60.0) -> tuple[int, str]:
    """``recoverykit ARGS`` in a subprocess (a hang must fail the test, not the suite): no traceback, no 70."""
    import os
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT, env={**os.environ, **(env or {})},
                            stdin=subprocess.DEVNULL)
    try:
        out, _ = proc.communicate(timeout=bound_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"recoverykit {shlex.join(args)} hung past {bound_s} s") from None
    assert "Traceback" not in out and "MemoryError" not in out, out
    assert not marked_by(proc.pid)
    return proc.returncode, out


def _hostile(tmp_path: Path, kind: str) -> str:
    import os
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return str(tmp_path / "fifo")
    if kind == "zero":
        return "/dev/zero"
    return str(tmp_path)  # a directory where a file belongs


HOSTILE_COMMANDS = {
    "report": lambda f, t: ("report", f),
    "merge": lambda f, t: ("merge", f),
    "chaos --baseline": lambda f, t: ("chaos", "--baseline", f, "--list", "--out", str(t / "o")),
    "certify --baseline": lambda f, t: ("certify", "--baseline", f, "--only", "chat_text", "--out", str(t / "o")),
    "chaos --trace": lambda f, t: ("chaos", "--trace", f, "--list", "--out", str(t / "o")),
}


@pytest.mark.parametrize("kind", ["fifo", "zero"])
@pytest.mark.parametrize("command", sorted(HOSTILE_COMMANDS))
def test_a_fifo_or_a_device_as_input_is_a_usage_error_not_a_hang(command, kind, tmp_path):
    code, out = kit_process(*HOSTILE_COMMANDS[command](_hostile(tmp_path, kind), tmp_path))
    assert code == 64, out
    assert "FIFO" in out or "character device" in out, out


def test_a_bundle_whose_history_is_a_fifo_is_a_usage_error(tmp_path):
    import os
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    os.mkfifo(bundle / "history.jsonl")
    code, out = kit_process("check", str(bundle))
    assert code == 64 and "FIFO" in out, out


def test_an_input_over_the_size_limit_is_a_usage_error(tmp_path):
    from report_samples import certify_results
    doc = certify_results()
    doc["padding"] = "x" * 40_000
    big = _write(tmp_path, "big.json", doc)
    code, out = kit_process("report", big, env={"RECOVERYKIT_MAX_INPUT_MB": "0.01"})
    assert code == 64 and "RECOVERYKIT_MAX_INPUT_MB" in out, out
    assert kit_process("report", big)[0] == 0  # under the default limit
    code, out = kit_process("report", big, env={"RECOVERYKIT_MAX_INPUT_MB": "lots"})
    assert code == 64 and "RECOVERYKIT_MAX_INPUT_MB" in out, out


# --- --write-baseline: checked before the run, and a late failure never replaces the verdict (item 17) -----------

UNWRITABLE = "/proc/self/baseline.json"  # no file can be made there, whoever runs the test


@pytest.mark.slow
@pytest.mark.parametrize("command", [("chaos", *SELECT), ("certify", "--only", "chat_text")])
def test_an_unwritable_baseline_path_is_refused_before_the_run(command, tmp_path):
    code, out = kit_process(*command, "--write-baseline", UNWRITABLE, "--out", str(tmp_path / "o"), bound_s=150)
    assert code == 64 and "cannot write there" in out, out
    assert not (tmp_path / "o" / "results.json").exists()  # refused before anything ran


@pytest.mark.slow
def test_a_baseline_that_fails_after_the_run_is_told_and_the_verdict_decides(tmp_path, monkeypatch):
    from recoverykit.conformance import acceptance
    from recoverykit.model.errors import InvalidArgument

    def fail(path, doc):
        raise InvalidArgument(f"--write-baseline {path}: cannot write there (No space left on device)")
    monkeypatch.setattr(acceptance, "write_baseline", fail)
    code, out = kit("chaos", *SELECT, "--write-baseline", str(tmp_path / "b.json"), "--out", str(tmp_path / "o"))
    assert code == 0 and "No space left on device" in out and "the baseline was not written" in out, out
    assert json.loads((tmp_path / "o" / "results.json").read_text())["verdict"] == "valid"


# --- a baseline accepts an aggregate clause only while it rests on what it rested on (issue 27 item 11) -----------

DECLARED = {"name": "ref", "version": "1", "failpoints": ["usage.persist.after"], "restart_kinds": [],
            "profiles": ["chat_core"], "observes": []}


def _chaos_case(point: str, broken: dict[str, list[str]]) -> dict:
    """A failed tree_kill case at ``point`` breaking each clause (an aggregate with the clauses it rests on)."""
    clauses = [{"clause": c, "verdict": "invalid", "text": f"broke {c}", **({"because": on} if on else {})}
               for c, on in broken.items()]
    cid = f"chat_read_tool/{point}/1/tree_kill"
    return {"id": cid, "scenario": "chat_read_tool", "point": point, "kind": "tree_kill", "hit": 1, "second": None,
            "status": "failed", "clauses": clauses, "violations": [f"broke {c}" for c in broken],
            "replay": f"recoverykit chaos --replay {cid}", "timings": {"total": 1.0}, "leftovers": []}


def _document(cases: list[dict], accepted, declared: dict = DECLARED) -> dict:
    from recoverykit.chaos.shard import Shard
    from recoverykit.chaos.systematic import results_document
    return results_document(cases, declared, mode="systematic", shard=Shard(1, 1), selection={}, seed=0,
                            started=0.0, wall_s=1.0, acceptance=accepted)


def test_an_aggregate_clause_accepted_by_a_baseline_gates_when_it_rests_on_new_clauses(tmp_path):
    from recoverykit.chaos.systematic import breaks_of
    from recoverykit.conformance import acceptance
    then = [_chaos_case("usage.persist.after", {"USG-05": [], "FA-01": ["USG-05"]})]
    first = _document(then, acceptance.Acceptance())
    path = tmp_path / "baseline.json"
    acceptance.write_baseline(path, acceptance.baseline_document(first["findings"], written_by="chaos",
                                                                 adapter=DECLARED, kit_version="0",
                                                                 breaks=breaks_of(then)))
    entries = {e["clause"]: e for e in json.loads(path.read_text())["findings"]}
    assert entries["FA-01"]["rests_on"] == ["USG-05"] and "rests_on" not in entries["USG-05"]
    known = acceptance.load((), path)
    assert set(known.accepted) == {"USG-05", "FA-01"}

    same = _document(then, known)  # FA-01 rests on USG-05 only, as when the baseline was written: accepted
    assert same["verdict"] != "invalid" and same["acceptance"]["grown"] == []
    assert {f["clause"]: f["status"] for f in same["findings"]} == {"USG-05": "accepted", "FA-01": "accepted"}

    now = [_chaos_case("usage.persist.after", {"USG-05": [], "FA-01": ["USG-05"]}),
           _chaos_case("tool.dispatch.after", {"FA-15": [], "CTX-02": [], "CTX-12": [],
                                                "FA-01": ["FA-15", "CTX-02", "CTX-12"]})]
    later = _document(now, known)
    status = {f["clause"]: f["status"] for f in later["findings"]}
    assert status["FA-01"] == "invalid" and status["USG-05"] == "accepted", status  # FA-01 gates again
    assert later["acceptance"]["grown"] == ["FA-01 (now also rests on CTX-02, CTX-12, FA-15)"]
    assert "FA-01" not in later["acceptance"]["accepted"]


def test_a_baseline_of_another_adapter_is_applied_with_a_warning(tmp_path):
    from recoverykit.conformance import acceptance
    path = tmp_path / "baseline.json"
    acceptance.write_baseline(path, acceptance.baseline_document(
        [{"clause": "USG-05", "count": 1}], written_by="chaos", adapter={"name": "runtime-a"}, kit_version="0"))
    known = acceptance.load((), path)
    cases = [_chaos_case("usage.persist.after", {"USG-05": []})]
    doc = _document(cases, known, {**DECLARED, "name": "runtime-b"})
    assert "written for adapter 'runtime-a'" in doc["acceptance"]["adapter_warning"]
    assert doc["acceptance"]["confirmed"] == ["USG-05"]  # applied, and said so
    assert "adapter_warning" not in _document(cases, known, {**DECLARED, "name": "runtime-a"})["acceptance"]
    out = tmp_path / "r.json"
    out.write_text(json.dumps(doc))
    code, text = kit("merge", str(out))
    assert code == 0 and "warning: the baseline" in text and "runtime-a" in text, text


def test_a_baseline_that_accepted_fa01_on_usg05_does_not_accept_it_on_fa15(tmp_path):
    from recoverykit.conformance import acceptance
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"kind": acceptance.BASELINE_KIND, "version": 1, "adapter": {"name": "ref"},
                                "findings": [
        {"clause": "USG-05", "statement_sha256": acceptance.statement_sha256("USG-05")},
        {"clause": "FA-01", "statement_sha256": acceptance.statement_sha256("FA-01"), "rests_on": ["USG-05"]}]}))
    now = [_chaos_case("usage.persist.after", {"USG-05": [], "FA-01": ["USG-05"]}),
           _chaos_case("tool.dispatch.after", {"FA-15": [], "FA-01": ["FA-15"]})]
    later = _document(now, acceptance.load((), path))
    status = {f["clause"]: f["status"] for f in later["findings"]}
    assert status == {"USG-05": "accepted", "FA-01": "invalid", "FA-15": "invalid"}, status
