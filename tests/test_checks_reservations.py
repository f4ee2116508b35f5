"""USG-19 (checks_reservations): an expired unstarted reservation never dispatches and a started one is settled only
by its receipt; an honest run, each broken half, and the runs that prove nothing (unknown, never valid)."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_reservations import check_reservations
from recoverykit.conformance.history import Recorder
from recoverykit.model.catalogue import Verdict

JUMP = 3600.0  # the second start's clock offset: R1 (made at 1.5, expiring at 301.5) is long expired then


def _ledger(sent: dict[str, float]) -> list[dict]:
    out = []
    for n, (rid, t) in enumerate(sent.items(), start=1):
        out.append({"event": "request", "seq": n, "time": t, "request_id": rid, "request_id_source": "header",
                    "response_id": f"chatcmpl-{n}", "script_id": "gv", "step": 0, "attempt": 1, "script_steps": 2})
    return out


def _rsv(rid: str, request_id: str, state: str, expires_at: float) -> dict:
    return {"reservation_id": rid, "work_id": "w", "goal_id": "g", "request_id": request_id, "max_tokens": 100,
            "expires_at": expires_at, "state": state}


def _receipt(request_id: str, usage: str) -> dict:
    return {"receipt_id": request_id, "request_id": request_id, "work_id": "w", "usage": usage}


def _start(rec: Recorder, at: float, offset: float) -> None:
    rec.now = at
    rec.complete(rec.invoke("start", {"clock_offset_s": offset}), "ok", {})


def _evidence(*, r1_later: str = "expired", r3_last: str | None = "started", b1_usage: str = "unknown",
              sent: dict[str, float] | None = None, second_kill: bool = True, r1_last: str | None = None) -> Evidence:
    """R1 reserved, a kill, a start 3600 s later; a2 under R2, b1 under R3 sent; R3 observed started, a kill, a
    start; R3 observed again."""
    rec = Recorder(clock=lambda: rec.now)
    _start(rec, 1.0, 0.0)
    rec.now = 2.0
    rec.observe({"reservations": [_rsv("R1", "a1", "reserved", 301.5)], "usage_receipts": []})
    rec.now = 3.0
    rec.fault("tree_kill")
    _start(rec, 4.0, JUMP)
    rec.now = 6.0
    rec.observe({"reservations": [_rsv("R1", "a1", r1_later, 301.5), _rsv("R2", "a2", "settled", 3904.5),
                                  _rsv("R3", "b1", "started", 3905.5)],
                 "usage_receipts": [_receipt("a1", "unknown"), _receipt("a2", "known"), _receipt("b1", "unknown")]})
    if second_kill:
        rec.now = 7.0
        rec.fault("tree_kill")
        _start(rec, 8.0, JUMP)
    rec.now = 9.0
    last = [_rsv("R1", "a1", r1_last or r1_later, 301.5), _rsv("R2", "a2", "settled", 3904.5)]
    if r3_last is not None:
        last.append(_rsv("R3", "b1", r3_last, 3905.5))
    rec.observe({"reservations": last, "usage_receipts": [_receipt("a1", "unknown"), _receipt("a2", "known"),
                                                          _receipt("b1", b1_usage)]}, True)
    return Evidence(history=rec.history, ledger=_ledger(sent if sent is not None else {"a2": 4.5, "b1": 5.5}))


def _one(ev: Evidence):
    (result,) = check_reservations(ev)
    assert result.clause_id == "USG-19"
    return result


def test_expired_unsent_and_started_kept_hold():
    assert _one(_evidence()).verdict is Verdict.VALID


def test_an_attempt_sent_after_its_reservation_expired_is_invalid():
    result = _one(_evidence(sent={"a1": 4.5, "b1": 5.5}))
    assert result.verdict is Verdict.INVALID and "after its reservation R1 expired" in result.text


def test_an_expired_reservation_later_started_is_invalid():
    result = _one(_evidence(r1_last="started"))
    assert result.verdict is Verdict.INVALID and "observed expired, then started" in result.text


def test_a_started_reservation_released_after_a_restart_is_invalid():
    result = _one(_evidence(r3_last="released"))
    assert result.verdict is Verdict.INVALID and "only its receipt may settle it" in result.text


def test_a_started_reservation_gone_from_the_section_is_invalid():
    result = _one(_evidence(r3_last=None))
    assert result.verdict is Verdict.INVALID and "no longer shown" in result.text


def test_a_reservation_settled_while_its_usage_is_unknown_is_invalid():
    result = _one(_evidence(r3_last="settled"))
    assert result.verdict is Verdict.INVALID and "usage is unknown" in result.text


def test_settled_by_its_known_receipt_is_no_release():
    assert _one(_evidence(r3_last="settled", b1_usage="known")).verdict is not Verdict.INVALID


def test_without_a_restart_after_the_started_request_it_is_unknown():
    assert _one(_evidence(second_kill=False)).verdict is Verdict.UNKNOWN


def test_a_run_without_reservations_judges_nothing():
    rec = Recorder(clock=lambda: 1.0)
    rec.observe({"reservations": [], "usage_receipts": []})
    assert check_reservations(Evidence(history=rec.history, ledger=[])) == []
