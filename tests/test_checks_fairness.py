"""Fair queueing after a restart (FA-12), judged from the provider's ledger: a fair order, a starved session."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_fairness import check_fair_queueing
from recoverykit.conformance.history import Recorder
from recoverykit.model.catalogue import Verdict


def _ledger(order: list[tuple[str, int]], *, tools: set[tuple[str, int]] = frozenset()) -> list[dict]:
    """One delivered request per (script, step), a tenth of a second apart from t=2 (after the restart)."""
    out = []
    for n, (script, step) in enumerate(order, start=1):
        t = 2.0 + n / 10
        out.append({"event": "request", "seq": n, "time": t, "request_id": f"{script}.{step}", "script_id": script,
                    "step": step, "attempt": 1})
        out.append({"event": "response", "seq": n, "time": t + 0.05, "delivered": True,
                    "probe_tokens": ["x"] if (script, step) in tools else []})
    return out


def _evidence(ledger: list[dict], late: dict[str, float] | None = None) -> Evidence:
    """A restart at t=1; ``late``: script -> when a submit tagged with it was acknowledged."""
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 1.0
    rec.fault("tree_kill", pids=[1])
    for script, at in (late or {}).items():
        rec.now = at
        op = rec.invoke("submit", {"session_id": script, "text": f"[[rk-script:{script}]] hi", "client_msg_id": at})
        rec.complete(op, "ok", {"work_id": f"w-{script}", "input_id": "i"})
    return Evidence(history=rec.history, ledger=ledger)


def test_one_more_admission_while_another_session_recovers_is_allowed():
    order = [("c", 0), ("a", 0), ("a", 1), ("b", 0), ("a", 2), ("b", 1)]
    assert check_fair_queueing(_evidence(_ledger(order)))[0].verdict is Verdict.VALID


def test_round_robin_is_fair():
    order = [("a", 0), ("c", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert check_fair_queueing(_evidence(_ledger(order)))[0].verdict is Verdict.VALID


def test_a_session_waiting_behind_two_backlogs_is_starved():
    order = [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2), ("c", 0)]  # a and b admitted 3 times
    result = check_fair_queueing(_evidence(_ledger(order)))[0]
    assert result.verdict is Verdict.INVALID
    assert "session c waited" in result.text


def test_steps_of_one_turn_are_one_admission():
    # a's step 1 continues the turn its step 0 (a tool call) began: one admission, not two
    order = [("a", 0), ("a", 1), ("b", 0), ("c", 0), ("b", 1)]
    assert check_fair_queueing(_evidence(_ledger(order, tools={("a", 0)})))[0].verdict is Verdict.VALID


def test_one_admission_each_cannot_show_starvation():
    order = [("a", 0), ("b", 0), ("c", 0)]
    assert check_fair_queueing(_evidence(_ledger(order)))[0].verdict is Verdict.UNKNOWN


def test_a_session_that_sent_its_input_late_was_not_waiting_before():
    order = [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2), ("c", 0)]
    assert check_fair_queueing(_evidence(_ledger(order), late={"c": 2.65}))[0].verdict is Verdict.VALID
