"""USG-09 (checks_pricing): quotes kept apart from tokens and never rewritten by a price change; an honest run,
each broken half, and the runs that prove nothing (unknown, never valid)."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_pricing import check_quotes_kept
from recoverykit.conformance.history import Recorder
from recoverykit.model.catalogue import Verdict

P1 = {"input_usd_per_mtok": 3.0, "output_usd_per_mtok": 15.0}
P2 = {"input_usd_per_mtok": 5.0, "output_usd_per_mtok": 25.0}


def _ledger(sent: dict[str, float]) -> list[dict]:
    out = []
    for n, (rid, t) in enumerate(sent.items(), start=1):
        out.append({"event": "request", "seq": n, "time": t, "request_id": rid, "request_id_source": "header",
                    "response_id": f"chatcmpl-{n}", "script_id": rid, "step": 0, "attempt": 1, "script_steps": 1})
        out.append({"event": "response", "seq": n, "time": t + 0.1, "response_id_sent": True, "status": 200,
                    "delivered": True, "usage_billed": {"prompt_tokens": 30, "completion_tokens": 12},
                    "usage_reported": {"prompt_tokens": 30, "completion_tokens": 12}, "usage_chunks": 1})
    return out


def _r(rid: str, quote: dict | None, usage: str = "known") -> dict:
    return {"receipt_id": rid, "request_id": rid, "work_id": rid, "attempt": 1, "usage": usage,
            "prompt_tokens": 30, "completion_tokens": 12, "quote": quote}


def _evidence(first_a: dict | None = P1, later_a: dict | None = P1, b: dict | None = P2, *,
              second_set: bool = True) -> Evidence:
    """Prices P1, request a, a observed; prices P2, a observed again; request b; both observed."""
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 1.0
    rec.complete(rec.invoke("pricing_set", P1), "ok", {})
    rec.now = 3.0
    rec.observe({"usage_receipts": [_r("a", first_a)]})
    if second_set:
        rec.now = 4.0
        rec.complete(rec.invoke("pricing_set", P2), "ok", {})
    rec.now = 7.0
    rec.observe({"usage_receipts": [_r("a", later_a), _r("b", b)]}, True)
    return Evidence(history=rec.history, ledger=_ledger({"a": 2.0, "b": 5.0}))


def _one(ev: Evidence):
    (result,) = check_quotes_kept(ev)
    assert result.clause_id == "USG-09"
    return result


def test_quotes_kept_apart_and_unchanged_hold():
    assert _one(_evidence()).verdict is Verdict.VALID


def test_a_quote_rewritten_by_a_price_change_is_invalid():
    result = _one(_evidence(later_a=P2))
    assert result.verdict is Verdict.INVALID and "changed" in result.text


def test_tokens_without_their_price_are_invalid():
    result = _one(_evidence(b=None))
    assert result.verdict is Verdict.INVALID and "not at a table in force" in result.text


def test_a_price_the_kit_never_set_is_invalid():
    made_up = {"input_usd_per_mtok": 0.0, "output_usd_per_mtok": 0.0}
    assert _one(_evidence(first_a=made_up, later_a=made_up)).verdict is Verdict.INVALID


def test_without_a_price_change_between_observations_it_is_unknown():
    assert _one(_evidence(b=P1, second_set=False)).verdict is Verdict.UNKNOWN


def test_a_run_that_changes_no_price_judges_nothing():
    rec = Recorder(clock=lambda: 1.0)
    rec.observe({"usage_receipts": [_r("a", None)]})
    assert check_quotes_kept(Evidence(history=rec.history, ledger=_ledger({"a": 0.5}))) == []
