"""A nondeterministic runtime makes Hypothesis raise its Flaky errors: the user is told why, and the case stays
unknown (the search proved nothing either way), never valid."""

from __future__ import annotations

import hypothesis.stateful
import pytest
from hypothesis.errors import FlakyReplay, FlakyStrategyDefinition
from recoverykit.conformance import lockstep_run
from recoverykit.conformance.lockstep import LockstepConfig
from recoverykit.model.catalogue import Verdict

RAW = ("Inconsistent data generation! Data generation behaved differently between different runs. Is your data "
       "generation depending on external state?")


@pytest.mark.parametrize("error", [FlakyStrategyDefinition(RAW), FlakyReplay(RAW)])
def test_a_nondeterministic_runtime_is_unknown_with_its_cause(monkeypatch, tmp_path, error):
    def flaky_search(machine, settings=None):
        def test():
            raise error
        return test

    monkeypatch.setattr(lockstep_run, "SEED_PROGRAMS", ())
    monkeypatch.setattr(hypothesis.stateful, "get_state_machine_test", flaky_search)
    outcome = lockstep_run.run_lockstep(LockstepConfig("unused", out=tmp_path), seed=7)
    assert outcome.verdict is Verdict.UNKNOWN
    assert "answered the same program differently on two runs" in outcome.message
    assert "nondeterministic" in outcome.message and "--seed 7" in outcome.message
    assert not outcome.findings
