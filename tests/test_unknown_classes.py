"""Every unknown clause carries a reason class (issue 28 item 5), and the report and docs/runtimes.md count them apart.

One fake piece of evidence per class goes through certify's own fold (``certify._write``, which writes
results.json): an observe section the adapter leaves out (adapter_could_supply), a feature it declares lacking
in ``init_ok.lacks`` (framework_lacks), a clause only the runtime's word held under --strict-evidence
(runtime_only), a case whose wait for the provider ran out (window), and a clause no case reached
(not_exercised). Then each row of the one text table, chaos's fold, the report and the runtimes matrix.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError
from recoverykit.adapter import Adapter
from recoverykit.conformance import unknowns
from recoverykit.conformance.certify import CATALOGUE, Case, Certification, _write, ended
from recoverykit.conformance.checker import SELF_REPORTED, ClauseResult, _result, unobserved
from recoverykit.conformance.protocol_rpcs import InitOk, Lack
from recoverykit.conformance.provider import ProviderTimeout
from recoverykit.conformance.unknowns import (
    ADAPTER_COULD_SUPPLY,
    FRAMEWORK_LACKS,
    NOT_EXERCISED,
    RUNTIME_ONLY,
    WINDOW,
    Declared,
    of_text,
)
from recoverykit.model.catalogue import Verdict
from recoverykit.reports import readable, render, runtimes

ROOT = Path(__file__).resolve().parent.parent
INIT = {"name": "fake", "version": "1", "protocol_version": "1.4", "profiles": ["chat_core"],
        "failpoints": ["provider.request.before"], "restart_kinds": [], "observes": ["work_items", "turns"],
        "lacks": [{"features": ["leases"], "why": "the framework records no owner (its docs, section X)"}]}


def _unknown(clause: str, detail: str) -> ClauseResult:
    return _result(clause, Verdict.UNKNOWN, detail)


def certified(tmp_path: Path) -> dict:
    """One fake certify run whose evidence leaves one clause unknown for each class; its results.json."""
    cert = Certification("fake-adapter", tmp_path, 1, ("chat_core",), frozenset({"RI-01"}), strict_evidence=True)
    cert.declared = {"chat_core"}
    cert.declarations = Declared.of(INIT)
    supply = Case("chat_read_tool", "scenario", Verdict.UNKNOWN, ("FA-05",),
                  [_unknown("FA-05", "no witness log, or tool_calls never observed"),
                   replace(_result("RI-01", Verdict.VALID, "held"), basis=SELF_REPORTED)], message="not judged")
    lacks = Case("chat_unknown_write", "scenario", Verdict.UNKNOWN, ("OWN-06",),
                 [_unknown("OWN-06", "no lease ever observed"), _unknown("APR-04", "the store was never faulted")],
                 message="not judged: OWN-06")
    window_results = [_unknown("CTX-10", "no response was cut off mid-stream while the runtime lived")]
    ended(window_results, ProviderTimeout("no request held for script='s' step=0 within 20.0s; requests so far: 0"))
    window = Case("interrupted_stream", "scenario", Verdict.UNKNOWN, ("CTX-10",), window_results,
                  message="the scenario could not finish: no request held ...")
    cert.cases = [supply, lacks, window]
    _write(cert, 0.0)
    return json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))


def test_each_class_is_produced_at_certify_s_fold(tmp_path):
    doc = certified(tmp_path)
    kind = {c: e["unknown"]["class"] for c, e in doc["clauses"].items() if "unknown" in e}
    assert kind["FA-05"] == ADAPTER_COULD_SUPPLY  # tool_calls left out of init_ok.observes
    assert "tool_calls" in doc["clauses"]["FA-05"]["unknown"]["why"]
    assert unknowns.GUIDE in doc["clauses"]["FA-05"]["unknown"]["how"]
    assert kind["OWN-06"] == FRAMEWORK_LACKS  # leases declared lacking
    assert "the framework records no owner" in doc["clauses"]["OWN-06"]["unknown"]["why"]
    assert doc["clauses"]["RI-01"]["verdict"] == "unknown" and kind["RI-01"] == RUNTIME_ONLY  # --strict-evidence
    assert kind["CTX-10"] == WINDOW  # the provider wait ran out
    assert kind["REC-04"] == NOT_EXERCISED  # no case covered it
    assert kind["APR-04"] == FRAMEWORK_LACKS  # a profile not declared
    assert "profile approvals not declared" in doc["clauses"]["APR-04"]["unknown"]["why"]
    assert all(e["verdict"] == "unknown" for c, e in doc["clauses"].items() if "unknown" in e)  # never valid
    classes = doc["unknowns"]["classes"]
    assert set(classes) == set(unknowns.CLASSES) and all(classes[k] >= 1 for k in unknowns.CLASSES)
    catalogue = {c: e for c, e in doc["clauses"].items() if c in CATALOGUE}  # not the pseudo-clause `completion`
    assert sum(classes.values()) == sum(e["verdict"] == "unknown" for e in catalogue.values())
    assert doc["unknowns"]["applicable"] == sum(e["verdict"] != "not_applicable" for e in catalogue.values())


def test_an_unknown_made_with_its_class_keeps_it():
    r = unobserved("APR-01", "approvals")
    assert r.reason == ADAPTER_COULD_SUPPLY and r.as_dict()["reason"] == ADAPTER_COULD_SUPPLY
    declared = Declared.of({**INIT, "profiles": ["chat_core", "approvals"]})
    got = unknowns.fold(["APR-01"], [("APR-01", r.reason, r.text, None)], declared)
    assert got["APR-01"].kind == ADAPTER_COULD_SUPPLY


def test_a_lack_covers_an_unknown_only_when_every_feature_it_needs_is_lacked():
    text = "not run, capability not declared: init_ok.failpoints lacks input.accept.before, input.accept.after"
    one = Declared.of({**INIT, "lacks": [{"features": ["input.accept.before"], "why": "w"}]})
    both = Declared.of({**INIT, "lacks": [{"features": ["input.accept.before", "input.accept.after"], "why": "w"}]})
    results = [("INP-02", ADAPTER_COULD_SUPPLY, text, None)]
    assert unknowns.fold(["INP-02"], results, one)["INP-02"].kind == ADAPTER_COULD_SUPPLY
    assert unknowns.fold(["INP-02"], results, both)["INP-02"].kind == FRAMEWORK_LACKS


# The one text table: each row, with a text a check or case writes today, and the class it gives.
TEXTS = [
    ("failpoint input.accept.before not declared", ADAPTER_COULD_SUPPLY),
    ("capability not declared: init_ok.failpoints lacks recovery.repair.after", ADAPTER_COULD_SUPPLY),
    ("restart kind normal_exit not declared", ADAPTER_COULD_SUPPLY),
    ("the tree kill killed nothing: the adapter's processes reply listed no process, so no runtime process was "
     "interrupted", ADAPTER_COULD_SUPPLY),
    ("not quiescent within 30 s after the restart", WINDOW),
    ("no request arrived (request window 20 s x1.5 = 30 s; --timeout-scale gives more)", WINDOW),  # pacing's words
    ("no request held for script='x' step=0 within 20.0s; requests so far: 0", WINDOW),
    ("the outcome is indefinite: the runtime never answered", RUNTIME_ONLY),
    ("no tool_calls observed", ADAPTER_COULD_SUPPLY),  # tool_calls not in INIT's observes
    ("turns not observed", NOT_EXERCISED),  # declared, and the run showed none
    ("no external operation was waited on", NOT_EXERCISED),
]


@pytest.mark.parametrize(("text", "kind"), TEXTS)
def test_each_row_of_the_text_table(text, kind):
    assert of_text(text, Declared.of(INIT)).kind == kind


def test_every_row_of_the_text_table_has_a_test():
    for pattern, _ in unknowns.TEXT_TABLE:
        assert any(pattern.search(text) for text, _ in TEXTS), pattern.pattern


def test_chaos_classes_its_unknowns_from_its_cases():
    doc = {"adapter": INIT, "clauses": {"CTX-10": "unknown", "FA-05": "unknown", "OWN-06": "unknown"},
           "cases": [{"why": "not quiescent within 30 s after the restart", "clauses": [
               {"clause": "CTX-10", "verdict": "unknown", "text": "no response was cut off"}]},
               {"why": "", "clauses": [{"clause": "FA-05", "verdict": "unknown", "text": "tool_calls never observed"},
                                       {"clause": "OWN-06", "verdict": "unknown", "text": "no lease ever observed"}]}]}
    got = {c: w["class"] for c, w in unknowns.of_chaos(doc).items()}
    assert got == {"CTX-10": WINDOW, "FA-05": ADAPTER_COULD_SUPPLY, "OWN-06": FRAMEWORK_LACKS}


def test_the_report_counts_unknowns_apart(tmp_path):
    doc = certified(tmp_path)
    page = readable.view(None, [doc])
    assert page["unknowns"]["classes"] == doc["unknowns"]["classes"]
    md = render.markdown(page)
    assert "## Unknown clauses by reason" in md
    for kind, n in doc["unknowns"]["classes"].items():
        assert f"(`{kind}`) |" in md and md.split(f"(`{kind}`) |", 1)[1].split("\n", 1)[0].endswith(f"| {n} |")
    assert "FA-05: observe section tool_calls not declared" in md  # what the adapter could supply, with how
    assert 'id="unknown-reasons"' in render.html(page)


def test_the_runtimes_doc_counts_unknowns_apart(tmp_path):
    chaos = {"adapter": INIT, "clauses": {"FA-05": "unknown", "OWN-06": "unknown", "RI-01": "valid"},
             "cases": [{"why": "", "clauses": [
                 {"clause": "FA-05", "verdict": "unknown", "text": "tool_calls never observed"},
                 {"clause": "OWN-06", "verdict": "unknown", "text": "no lease ever observed"}]}]}
    folder = tmp_path / "fake"
    folder.mkdir()
    with gzip.open(folder / "results.json.gz", "wt", encoding="utf-8") as f:
        json.dump(chaos, f)
    runtime = runtimes.Runtime("fake", str(folder), None, "recoverykit chaos", "README.md")
    lines = runtimes.unknown_counts([(runtime, runtime.load())])
    assert "| runtime | run | applicable | unknown | " + " | ".join(unknowns.CLASSES) + " | adapter % |" in lines
    assert "| fake | chaos | 3 | 2 | 1 | 1 | 0 | 0 | 0 | 33.3 |" in lines
    runtimes.store_certify(runtime, _written(tmp_path / "run", certified))
    rows = [line for line in runtimes.unknown_counts([(runtime, runtime.load())]) if line.startswith("| fake |")]
    assert [r.split(" | ")[1] for r in rows] == ["chaos", "certify"]
    doc = (ROOT / "docs" / "runtimes.md").read_text(encoding="utf-8")
    assert "| runtime | run | applicable | unknown | adapter_could_supply | framework_lacks |" in doc
    for name in ("langgraph", "dbos"):
        assert f"| {name} | chaos |" in doc


def _written(out: Path, make) -> Path:
    out.mkdir()
    make(out)
    return out / "results.json"


def test_an_adapter_declares_what_its_framework_lacks():
    class Lacking(Adapter):
        name = "lacking"
        lacks = [{"features": ["turns"], "why": "no history of executions (its docs)"}]

    declared = Lacking().declare()
    InitOk.model_validate_json(json.dumps({"type": "init_ok", "msg_id": 1, "in_reply_to": 1, **declared}))
    assert Declared.of(declared).lacked == {"turns": "no history of executions (its docs)"}
    assert "lacks" not in type("Plain", (Adapter,), {"name": "plain"})().declare()  # absent when none
    with pytest.raises(ValidationError):
        Lack(why="names nothing")


def test_a_kill_that_found_no_listed_process_is_the_adapter_s_to_supply():
    """A case whose required kill found no process (the adapter's ``processes`` listed none) proves nothing; what
    it did not reach is evidence the adapter could supply by listing its processes."""
    from recoverykit.conformance.checker import Evidence, check_kills_landed
    from recoverykit.conformance.history import NOTHING_KILLED, Recorder

    rec = Recorder()
    rec.fault(NOTHING_KILLED, during="tree_kill", listed=[], required=True)
    (pseudo,) = check_kills_landed(Evidence(rec.history))
    assert pseudo.reason == ADAPTER_COULD_SUPPLY
    case = unknowns.of_case([(pseudo.reason, pseudo.text)], "", Declared.of(INIT))
    got = unknowns.fold(["CTX-10"], [("CTX-10", None, "no response was cut off", case)], Declared.of(INIT))
    assert got["CTX-10"].kind == ADAPTER_COULD_SUPPLY and "processes" in got["CTX-10"].how
