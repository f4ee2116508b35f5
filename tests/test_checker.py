"""The history checker judges each clause on synthetic evidence: one honest run, one broken per clause."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence, check, merge
from recoverykit.conformance.history import Recorder, load_history
from recoverykit.conformance.witness import Execution, WitnessLog
from recoverykit.model.catalogue import Verdict


def _item(work_id="w1", *, inputs=("c1",), desired="done", status="finished", reason=None):
    return {"work_id": work_id, "session_id": "s1", "kind": "chat_request", "desired_state": desired,
            "control_version": 1, "status": status, "reason_code": reason, "recovery_policy": "automatic",
            "host_id": "h", "parent_id": None, "last_progress": None,
            "inputs": [{"input_id": f"i-{c}", "client_msg_id": c, "text": "hi"} for c in inputs]}


def _snapshot(items=None, receipts=(), leases=(), turns=(), approvals=()):
    return {"work_items": items if items is not None else [_item()], "usage_receipts": list(receipts),
            "leases": list(leases), "turns": list(turns), "approvals": list(approvals), "fenced_writes": []}


def _receipt(rid="r1", tokens=(10, 5), usage="known"):
    return {"receipt_id": f"u-{rid}", "work_id": "w1", "request_id": rid, "attempt": 1, "goal_id": None,
            "revision": None, "prompt_tokens": tokens and tokens[0], "completion_tokens": tokens and tokens[1],
            "usage": usage}


def _ledger(rid="r1", reported=(10, 5), delivered=True, seq=1, time=1.0, usage_chunks=3):
    usage = {"prompt_tokens": reported[0], "completion_tokens": reported[1]} if reported else None
    return [{"event": "request", "seq": seq, "time": time, "request_id": rid, "request_id_source": "header",
             "response_id": f"chatcmpl-{seq}", "attempt": 1, "script_id": "t1", "step": 0},
            {"event": "response", "seq": seq, "time": time + 0.1, "request_id": rid, "delivered": delivered,
             "response_id": f"chatcmpl-{seq}", "response_id_sent": True,
             "usage_billed": {"prompt_tokens": 10, "completion_tokens": 5}, "usage_reported": usage,
             "usage_chunks": usage_chunks if reported else 0}]


def _execution(token, pid=100, effect="unknown"):
    return Execution(token, "probe_write", effect, pid, 1.0, 1.0, 2.0, "ok", 0)


def _run(snapshot=None, *, ledger=None, executions=(), extra=None, quiescent=True) -> Evidence:
    rec = Recorder(clock=iter(range(1, 10_000)).__next__)
    op = rec.invoke("submit", {"session_id": "s1", "text": "[[rk-script:t1]] hi", "client_msg_id": "c1"})
    rec.complete(op, "ok", {"work_id": "w1", "input_id": "i-c1"})
    if extra:
        extra(rec)
    rec.observe(snapshot or _snapshot(receipts=[_receipt()], leases=[
        {"work_id": "w1", "owner": {"host_id": "h", "pid": 1, "create_time": 1.0}, "generation": 1,
         "expires_at": None}], turns=[{"turn_id": "t", "work_id": "w1", "continuation_key": "k1",
                                       "predecessor": None, "status": "completed"}]), quiescent=quiescent)
    return Evidence(rec.history, ledger if ledger is not None else _ledger(),
                    WitnessLog([], list(executions), None))


def _verdicts(ev):
    return merge(check(ev))  # a clause several checks judge: any invalid is invalid, else any valid


def _restarted(rec):
    rec.fault("tree_kill", pids=[1])


def test_an_honest_run_is_valid_where_exercised():
    v = _verdicts(_run(executions=[_execution("t1.0.1.0")], extra=_restarted))
    for clause in ("INP-01", "FA-15", "USG-03", "USG-05", "USG-10", "OWN-02", "OWN-06", "RI-02", "UI-05", "REC-06"):
        assert v[clause] is Verdict.VALID, clause
    assert v["RI-03"] is Verdict.UNKNOWN  # nothing was stopped: not exercised, so not a pass


def test_duplicated_input_is_invalid():
    ev = _run(_snapshot(items=[_item(inputs=("c1", "c1"))]))
    (result,) = [r for r in check(ev) if r.clause_id == "INP-01"]
    assert result.verdict is Verdict.INVALID
    assert "acknowledged input 'c1' (op 0) is present 2 times" in result.text


def test_lost_input_is_invalid():
    ev = _run(_snapshot(items=[_item(inputs=())]))
    assert _verdicts(ev)["INP-01"] is Verdict.INVALID


def test_unknown_write_rerun_under_a_new_attempt_is_invalid():
    ev = _run(executions=[_execution("t1.0.1.0"), _execution("t1.0.2.0", pid=101)])
    results = {r.clause_id: r for r in check(ev)}
    assert results["FA-15"].verdict is Verdict.INVALID
    assert "executed 2 times" in results["FA-15"].text


def test_idempotent_reruns_are_not_judged_as_unknown_writes():
    ev = _run(executions=[_execution("t1.0.1.0", effect="idempotent"), _execution("t1.0.2.0", effect="idempotent")])
    assert _verdicts(ev)["FA-15"] is Verdict.UNKNOWN


def test_summed_cumulative_usage_is_invalid():
    ev = _run(_snapshot(receipts=[_receipt(tokens=(30, 12))]))
    results = {r.clause_id: r for r in check(ev)}
    assert results["USG-05"].verdict is Verdict.INVALID
    assert "summed" in results["USG-05"].text


def test_a_receipt_counted_twice_is_invalid():
    ev = _run(_snapshot(receipts=[_receipt(), {**_receipt(), "receipt_id": "dup"}]))
    assert _verdicts(ev)["USG-03"] is Verdict.INVALID


def test_a_parent_total_beside_its_child_receipts_is_counted_twice():
    """The seed's example of counting twice: a total receipt that names no attempt beside the receipts it sums."""
    ledger = _ledger("r1") + _ledger("r2", seq=2, time=2.0)
    receipts = [_receipt("r1"), _receipt("r2"), {**_receipt("turn-1", tokens=(20, 10)), "receipt_id": "total"}]
    results = {r.clause_id: r for r in check(_run(_snapshot(receipts=receipts), ledger=ledger))}
    assert results["USG-03"].verdict is Verdict.INVALID
    assert "adds up receipts ['r1', 'r2']" in results["USG-03"].text
    assert results["USG-10"].verdict is Verdict.VALID  # a double count, not a fabrication
    other = [_receipt("r1"), _receipt("r2"), {**_receipt("turn-1", tokens=(7, 1)), "receipt_id": "total"}]
    results = {r.clause_id: r for r in check(_run(_snapshot(receipts=other), ledger=ledger))}
    assert results["USG-03"].verdict is Verdict.VALID
    assert results["USG-10"].verdict is Verdict.INVALID  # usage no attempt accounts for: fabricated


def test_fabricated_usage_for_a_lost_response_is_invalid():
    ev = _run(ledger=_ledger(reported=None, delivered=False))
    assert _verdicts(ev)["USG-10"] is Verdict.INVALID
    ev = _run(_snapshot(receipts=[_receipt(tokens=None, usage="unknown")]), ledger=_ledger(reported=None,
                                                                                          delivered=False))
    assert _verdicts(ev)["USG-10"] is Verdict.VALID


def test_dropped_receipt_is_invalid():
    ev = _run(_snapshot(receipts=[]))
    assert _verdicts(ev)["USG-10"] is Verdict.INVALID


def test_usage_without_request_ids_is_unknown():
    """No X-Request-Id, and the receipt names neither the provider's request id nor its response id."""
    ledger = _ledger(rid="req_1_abc")
    ledger[0]["request_id_source"] = "generated"
    assert _verdicts(_run(ledger=ledger))["USG-03"] is Verdict.UNKNOWN


def test_paused_work_resumed_by_a_restart_is_invalid():
    def pause_then_restart(rec):
        op = rec.invoke("pause", {"work_id": "w1"})
        rec.complete(op, "ok", {"work_id": "w1", "control_version": 2})
        rec.fault("tree_kill")

    ev = _run(_snapshot(items=[_item(desired="run", status="running")]), extra=pause_then_restart)
    assert _verdicts(ev)["RI-03"] is Verdict.INVALID


def test_pause_that_holds_is_valid():
    def pause(rec):
        op = rec.invoke("pause", {"work_id": "w1"})
        rec.complete(op, "ok", {"work_id": "w1", "control_version": 2})

    ev = _run(_snapshot(items=[_item(desired="paused", status="paused", reason="user_paused")]), extra=pause)
    assert _verdicts(ev)["RI-03"] is Verdict.VALID


def test_provider_request_after_a_settled_stop_is_invalid():
    def pause(rec):
        op = rec.invoke("pause", {"work_id": "w1"})
        rec.complete(op, "ok", {"work_id": "w1", "control_version": 2})
        rec.observe(_snapshot(items=[_item(desired="paused", status="paused", reason="user_paused")]),
                    quiescent=True)

    late = _ledger(rid="r1") + _ledger(rid="r2", seq=2, time=9_000.0)
    ev = _run(_snapshot(items=[_item(desired="paused", status="paused", reason="user_paused")],
                        receipts=[_receipt(), _receipt("r2")]), ledger=late, extra=pause)
    results = {r.clause_id: r for r in check(ev)}
    assert results["RI-03"].verdict is Verdict.INVALID
    assert "r2" in results["RI-03"].text


def test_stuck_or_unexplained_work_is_invalid():
    v = _verdicts(_run(_snapshot(items=[_item(desired="run", status="queued", reason="queued")])))
    assert v["RI-02"] is Verdict.INVALID
    v = _verdicts(_run(_snapshot(items=[_item(desired="run", status="waiting", reason=None)])))
    assert v["UI-05"] is Verdict.INVALID


def test_not_quiescent_is_unknown_not_valid():
    v = _verdicts(_run(quiescent=False))
    assert v["RI-02"] is Verdict.UNKNOWN


def test_two_leases_or_a_generation_going_back_is_invalid():
    lease = {"work_id": "w1", "owner": {"host_id": "h", "pid": 1, "create_time": 1.0}, "generation": 2,
             "expires_at": None}
    v = _verdicts(_run(_snapshot(leases=[lease, {**lease, "generation": 3}])))
    assert v["OWN-02"] is Verdict.INVALID

    def earlier(rec):
        rec.observe(_snapshot(leases=[{**lease, "generation": 5}]))

    v = _verdicts(_run(_snapshot(leases=[lease]), extra=earlier))
    assert v["OWN-06"] is Verdict.INVALID


def test_opaque_fencing_tokens_are_judged_by_identity_not_order():
    """Protocol 1.4: a lease's generation may be an opaque token (DBOS's ``owner_xid``). A new token replacing an
    old one is fine whatever their string order; the old token owning the item again went back."""
    def lease(token):
        return {"work_id": "w1", "owner": {"host_id": "h", "pid": None, "create_time": None}, "generation": token,
                "expires_at": None}

    def owned_by(*tokens):
        def extra(rec):
            for token in tokens:
                rec.observe(_snapshot(leases=[lease(token)]))
        return extra

    v = _verdicts(_run(_snapshot(leases=[lease("a-token")]), extra=owned_by("z-token")))  # "a" < "z": no matter
    assert v["OWN-06"] is Verdict.VALID and v["OWN-02"] is Verdict.VALID
    v = _verdicts(_run(_snapshot(leases=[lease("z-token")]), extra=owned_by("z-token", "a-token")))
    assert v["OWN-06"] is Verdict.INVALID  # z-token was replaced by a-token, then owned the item again
    fenced = {**_snapshot(leases=[lease("t2")]), "fenced_writes": [
        {"work_id": "w1", "generation": "t2", "current_generation": "t2", "what": "step output"}]}
    assert _verdicts(_run(fenced))["OWN-06"] is Verdict.INVALID  # the current token's write is no stale write


def test_duplicate_continuation_is_invalid():
    turn = {"turn_id": "t", "work_id": "w1", "continuation_key": "k", "predecessor": None, "status": "completed"}
    v = _verdicts(_run(_snapshot(turns=[turn, {**turn, "turn_id": "t2"}]), extra=_restarted))
    assert v["REC-06"] is Verdict.INVALID


def test_merge_across_runs():
    from recoverykit.conformance.checker import ClauseResult

    r = lambda v: ClauseResult("INP-01", v, "")  # noqa: E731
    assert merge([r(Verdict.UNKNOWN), r(Verdict.VALID)])["INP-01"] is Verdict.VALID
    assert merge([r(Verdict.VALID), r(Verdict.INVALID)])["INP-01"] is Verdict.INVALID
    assert merge([r(Verdict.UNKNOWN)])["INP-01"] is Verdict.UNKNOWN


def test_history_round_trips_through_disk(tmp_path):
    path = tmp_path / "history.jsonl"
    with Recorder(path) as rec:
        op = rec.invoke("submit", {"text": "x", "session_id": "s", "client_msg_id": "c"})
        rec.complete(op, "info", {"code": "crashed"})
        rec.fault("tree_kill", pids=[1, 2])
        rec.observe({"work_items": []}, quiescent=True)
    with open(path, "a") as f:
        f.write('{"event": "op", "ind')  # a torn last line: the kit was killed mid-write
    loaded = load_history(path)
    assert [type(e).__name__ for e in loaded.events] == ["Op", "Op", "Fault", "Observation"]
    assert loaded.events == rec.history.events


def test_first_turns_without_a_continuation_key_never_collide():
    # The protocol allows a null key for the first turn of a request: several of them are not a duplicate.
    first = {"turn_id": "t", "work_id": "w1", "continuation_key": None, "predecessor": None, "status": "completed"}
    v = _verdicts(_run(_snapshot(turns=[first, {**first, "turn_id": "t2", "work_id": "w2"}])))
    assert v["REC-06"] is Verdict.UNKNOWN  # no keyed turn: nothing judged, never a pass
    keyed = {**first, "turn_id": "t3", "continuation_key": "k"}
    v = _verdicts(_run(_snapshot(turns=[first, {**first, "turn_id": "t2"}, keyed]), extra=_restarted))
    assert v["REC-06"] is Verdict.VALID
    v = _verdicts(_run(_snapshot(turns=[first, {**first, "turn_id": "t2"}, keyed])))
    assert v["REC-06"] is Verdict.UNKNOWN  # no restart: no recovery could admit a continuation twice


def _around(event, after_desired, *, between=None):
    """An observation with w1 running, ``event`` (a fault kind or "reload"), then w1 at ``after_desired``."""
    def extra(rec):
        rec.observe(_snapshot([_item(desired="run", status="running")]), quiescent=False)
        if event == "reload":
            op = rec.invoke("reload", {})
            rec.complete(op, "ok", {})
        else:
            rec.fault(event, pids=[1])
        if between:
            op = rec.invoke(between, {"work_id": "w1"})
            rec.complete(op, "ok", {"work_id": "w1", "control_version": 2})
    return _run(_snapshot([_item(desired=after_desired, status="paused" if after_desired == "paused" else
                                 "finished", reason="user_paused" if after_desired == "paused" else None)]),
                extra=extra)


def test_a_crash_taken_as_a_pause_is_invalid_a_user_pause_is_not():
    assert _verdicts(_around("tree_kill", "paused"))["CTL-03"] is Verdict.INVALID
    assert _verdicts(_around("tree_kill", "done"))["CTL-03"] is Verdict.VALID
    assert _verdicts(_around("tree_kill", "paused", between="pause"))["CTL-03"] is Verdict.VALID
    assert _verdicts(_run())["CTL-03"] is Verdict.UNKNOWN  # no fault: nothing judged


def test_a_reload_that_changes_intent_is_invalid():
    assert _verdicts(_around("reload", "paused"))["CTL-01"] is Verdict.INVALID
    assert _verdicts(_around("reload", "done"))["CTL-01"] is Verdict.VALID  # it finished meanwhile: progress
    assert _verdicts(_run())["CTL-01"] is Verdict.UNKNOWN


def test_a_partial_receipt_claims_no_more_than_the_provider_reported():
    nothing = _ledger(reported=None, delivered=False)
    fabricated = _run(_snapshot(receipts=[_receipt(tokens=(10, 2), usage="partial")]), ledger=nothing)
    assert _verdicts(fabricated)["USG-10"] is Verdict.INVALID  # a lower bound of what was never reported
    zero = _run(_snapshot(receipts=[_receipt(tokens=None, usage="partial")]), ledger=nothing)
    assert _verdicts(zero)["USG-10"] is Verdict.VALID
    above = _run(_snapshot(receipts=[_receipt(tokens=(30, 12), usage="partial")]))
    assert _verdicts(above)["USG-05"] is Verdict.INVALID
    below = _run(_snapshot(receipts=[_receipt(tokens=(10, 3), usage="partial")]))
    assert _verdicts(below)["USG-05"] is Verdict.VALID


def _headerless(ledger):
    for record in ledger:
        record["request_id"] = f"req_{record['seq']}_x"
        if record["event"] == "request":
            record["request_id_source"] = "generated"
    return ledger


def test_without_x_request_id_receipts_match_by_response_id():
    ev = _run(_snapshot(receipts=[_receipt("chatcmpl-1")]), ledger=_headerless(_ledger()))
    assert {c: v for c, v in _verdicts(ev).items() if c in ("USG-03", "USG-05", "USG-10")} == {
        "USG-03": Verdict.VALID, "USG-05": Verdict.VALID, "USG-10": Verdict.VALID}
    dropped = _run(_snapshot(receipts=[]), ledger=_headerless(_ledger()))
    assert _verdicts(dropped)["USG-10"] is Verdict.INVALID


def test_without_x_request_id_an_attempt_lost_before_its_id_is_not_judged_dropped():
    """A reply cut before any chunk never showed its id: the runtime's own-id unknown receipt claims nothing."""
    ledger = _headerless(_ledger() + _ledger(seq=2, time=2.0, reported=None, delivered=False))
    ledger[-1].update(response_id_sent=False, chunks_sent=0)
    ev = _run(_snapshot(receipts=[_receipt("chatcmpl-1"), _receipt("my-own-2", tokens=None, usage="unknown")]),
              ledger=ledger)
    assert _verdicts(ev)["USG-10"] is Verdict.VALID
    # ... and one cut after its first chunk may be the runtime's own-id receipt too, but not when there is none
    ledger[-1].update(response_id_sent=True, chunks_sent=1)
    assert _verdicts(ev)["USG-10"] is Verdict.VALID
    ev = _run(_snapshot(receipts=[_receipt("chatcmpl-1")]), ledger=ledger)
    assert _verdicts(ev)["USG-10"] is Verdict.INVALID
