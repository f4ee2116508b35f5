"""Honest runtimes the kit must not misjudge: a client that notices a cut stream late (RES-03 is not attributable,
so unknown, never invalid) and a runtime that answers each input in its own turn (the kit's script must have a step
for it; a request the script could not answer never meets a scenario's goal).

End to end through ``certify`` on the mini runtime with its switches (``tests/adapters/mini_runtime.py``); each
test ends by proving nothing it started is still running."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from env_helpers import leftovers
from recoverykit.conformance.certify import Options, certify
from recoverykit.conformance.checker import ClauseResult, Evidence
from recoverykit.conformance.checks_script import unmet_by_failed_requests
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.provider_ledger import read_ledger
from recoverykit.model.catalogue import Verdict

ROOT = Path(__file__).resolve().parent.parent
MINI = f"{sys.executable} {ROOT / 'tests' / 'adapters' / 'mini_runtime.py'}"

pytestmark = pytest.mark.slow


def _case(tmp_path: Path, switches: str, scenario: str):
    cert = certify(Options(adapter=f"{MINI} {switches}", out=tmp_path / "out", seed=1, only=(scenario,)))
    assert leftovers(tmp_path) == []
    case = next(c for c in cert.cases if c.name == scenario)
    return cert, case, {r.clause_id: r for r in case.results}


def test_a_cut_stream_noticed_late_is_not_a_shrinking_backoff(tmp_path):
    # the mini waits 0.3 s after the cut, then 0.6 s after the 503; its client sees the cut 1.6 s late
    cert, case, results = _case(tmp_path, "--notice-delay 1.6", "provider_faults")
    assert results["RES-03"].verdict is Verdict.UNKNOWN, results["RES-03"].text  # the old check: invalid
    assert "notice the cut" in results["RES-03"].text
    assert cert.clauses["RES-03"] is not Verdict.INVALID and case.verdict is not Verdict.INVALID, case.message


def test_an_honest_client_still_shows_a_growing_backoff(tmp_path):
    _, _, results = _case(tmp_path, "", "provider_faults")
    assert results["RES-03"].verdict is not Verdict.INVALID, results["RES-03"].text


def test_a_runtime_answering_each_input_in_its_own_turn_passes_input_during_recovery(tmp_path):
    """The old two-step script failed its own-turn request (HTTP 400) and the failed item passed: a hollow valid."""
    _, case, _ = _case(tmp_path, "--turn-per-input", "input_during_recovery")
    ledger = read_ledger(case.run_dirs[0] / "provider-ledger.jsonl")
    statuses = [r.get("status") for r in ledger if r.get("event") == "response"]
    assert 400 not in statuses, statuses  # every turn got an answer from the script (the old script: step 2, a 400)
    assert case.verdict is Verdict.VALID, (case.message, [(r.clause_id, r.verdict.value, r.text) for r in case.results])


def _ran_out() -> Evidence:
    ledger = [{"event": "request", "seq": 1, "time": 1.0, "script_id": "s", "step": 0, "script_steps": 1},
              {"event": "response", "seq": 1, "time": 1.1, "status": 200, "delivered": True},
              {"event": "request", "seq": 2, "time": 2.0, "script_id": "s", "step": 1, "script_steps": 1},
              {"event": "response", "seq": 2, "time": 2.1, "status": 400, "delivered": True}]
    return Evidence(history=Recorder().history, ledger=ledger)


def test_no_clause_is_valid_on_a_request_the_kit_s_script_could_not_answer():
    held = ClauseResult("RI-02", Verdict.VALID, "held RI-02")
    broke = ClauseResult("RI-04", Verdict.INVALID, "broke RI-04")
    out = unmet_by_failed_requests(_ran_out(), [held, broke])
    assert out[0].verdict is Verdict.UNKNOWN and "the kit's script had no step for request 2" in out[0].text
    assert out[1] == broke  # what the runtime broke stands
    answered = Evidence(history=Recorder().history, ledger=_ran_out().ledger[:2])
    assert unmet_by_failed_requests(answered, [held]) == [held]
    repeated = _ran_out().ledger  # a ``repeat_last`` script answers past its end: nothing failed
    repeated[2]["response_id"], repeated[3]["status"] = "chatcmpl-2", 200
    assert unmet_by_failed_requests(Evidence(history=Recorder().history, ledger=repeated), [held]) == [held]
