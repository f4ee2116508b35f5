"""A runtime slower than the lockstep's settle window is unknown, never a recovery failure (RI-02).

``settle()`` judged RI-02 whatever ``quiesce`` answered: work still running when the window closed was "meant to run
but is running". The mini runtime with ``--slow-start`` makes its first model request after the window (as a
framework that loads its model client at the first call), with no restart at all."""

from __future__ import annotations

import sys
from pathlib import Path

from env_helpers import leftovers
from recoverykit.conformance.lockstep import FINAL_SETTLE_S, LockstepConfig
from recoverykit.conformance.lockstep_run import SEED_PROGRAMS, LockstepOutcome, _absorb, _finish, run_program
from recoverykit.model.catalogue import Verdict

ROOT = Path(__file__).resolve().parent.parent
SLOW = f"{sys.executable} {ROOT / 'tests' / 'adapters' / 'mini_runtime.py'} --slow-start {FINAL_SETTLE_S + 8:g}"


def test_work_still_running_when_the_window_closes_is_unknown_with_its_reason(tmp_path):
    config = LockstepConfig(SLOW, out=tmp_path)
    outcome = run_program(config, SEED_PROGRAMS[0])  # submit; settle
    assert outcome.clause_id is None, outcome.message  # the old code: RI-02 "meant to run but is running"
    assert outcome.verdict is Verdict.UNKNOWN
    assert "quiescent: false" in outcome.message and f"{FINAL_SETTLE_S:g} s" in outcome.message
    assert config.unsettled and "RI-02 not judged" in config.unsettled[0]
    assert leftovers(tmp_path) == []


def test_a_search_whose_only_trouble_was_an_unsettled_program_is_unknown_not_valid(tmp_path):
    config = LockstepConfig("unused", out=tmp_path)
    config.compared, config.unsettled = 3, ["w-1 is meant to run and was still running ...; RI-02 not judged"]
    whole = LockstepOutcome(Verdict.VALID)
    program = LockstepOutcome(Verdict.UNKNOWN, message=config.unsettled[0])
    assert _absorb(config, whole, program, "seed program")  # the search goes on
    _finish(config, whole)
    assert whole.verdict is Verdict.UNKNOWN and "not settled" in whole.message
    assert [(r.clause_id, r.verdict) for r in whole.results] == [("RI-02", Verdict.UNKNOWN)]
