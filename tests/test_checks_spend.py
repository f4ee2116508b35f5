"""USG-06 (checks_spend): a Goal's spent_tokens_known never above its durable receipts; an honest run, a
projection ahead of its receipts, and the runs that prove nothing (unknown, never valid)."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_spend import check_spend_projection
from recoverykit.conformance.history import Recorder
from recoverykit.model.catalogue import Verdict


def _ledger(delivered: dict[str, float]) -> list[dict]:
    out = []
    for n, (rid, t) in enumerate(delivered.items(), start=1):
        out.append({"event": "request", "seq": n, "time": t - 0.1, "request_id": rid, "request_id_source": "header",
                    "response_id": f"chatcmpl-{n}", "script_id": "gv", "step": n - 1, "attempt": 1,
                    "script_steps": 2})
        out.append({"event": "response", "seq": n, "time": t, "response_id_sent": True, "status": 200,
                    "delivered": True, "usage_billed": {"prompt_tokens": 30, "completion_tokens": 12},
                    "usage_reported": {"prompt_tokens": 30, "completion_tokens": 12}, "usage_chunks": 1})
    return out


def _goal(spent: int | None) -> dict:
    return {"goal_id": "g", "work_id": "w", "state": "active",
            "budget": {"max_tokens": 1000, "max_cost_usd": None, "spent_tokens_known": spent}}


def _r(rid: str, usage: str) -> dict:
    known = usage in ("known", "partial")
    return {"receipt_id": rid, "request_id": rid, "work_id": "w", "goal_id": "g", "usage": usage,
            "prompt_tokens": 30 if known else None, "completion_tokens": 12 if known else None}


def _evidence(after: int | None = 42, *, kill: bool = True, before: int | None = 42) -> Evidence:
    """a answered and durable (42 tokens); b answered, then a kill before its receipt was written: b is unknown."""
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 2.0
    rec.observe({"goals": [_goal(before)], "usage_receipts": [_r("a", "known"), _r("b", "unknown")]})
    if kill:
        rec.now = 3.0
        rec.fault("tree_kill")
    rec.now = 5.0
    rec.observe({"goals": [_goal(after)], "usage_receipts": [_r("a", "known"), _r("b", "unknown")]}, True)
    return Evidence(history=rec.history, ledger=_ledger({"a": 1.0, "b": 2.5}))


def _one(ev: Evidence):
    (result,) = check_spend_projection(ev)
    assert result.clause_id == "USG-06"
    return result


def test_a_projection_within_its_durable_receipts_holds():
    assert _one(_evidence()).verdict is Verdict.VALID


def test_spend_counted_before_its_receipt_was_durable_is_invalid():
    result = _one(_evidence(84))
    assert result.verdict is Verdict.INVALID and "ran ahead of the durable receipts" in result.text


def test_without_a_restart_after_a_delivered_response_it_is_unknown():
    assert _one(_evidence(kill=False)).verdict is Verdict.UNKNOWN


def test_a_runtime_that_tracks_no_spend_is_not_judged():
    assert check_spend_projection(_evidence(None, before=None)) == []
