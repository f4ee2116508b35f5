"""Recovery decisions from observe, and FA-01 over a run's safety verdicts: each check holds, breaks and is unknown."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_acceptance import check_safety_after_restarts
from recoverykit.conformance.checks_decisions import (
    check_completion_converges,
    check_completion_not_rerun,
    check_continuation_keys,
    check_monotonic_versions,
    check_originals,
    check_recovery_modes,
)
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.provider_script import script_tag
from recoverykit.model.catalogue import Verdict


def turn(tid, status, pred=None, key=None, work="w1"):
    return {"turn_id": tid, "work_id": work, "continuation_key": key or f"k-{tid}", "predecessor": pred,
            "status": status}


def work(status="running", cv=1, desired="run", inputs=(("i1", "c1", "hello"),), wid="w1"):
    return {"work_id": wid, "session_id": "s1", "kind": "chat_request", "desired_state": desired,
            "control_version": cv, "status": status, "reason_code": None, "recovery_policy": "automatic",
            "host_id": "h", "parent_id": None, "last_progress": None,
            "inputs": [{"input_id": i, "client_msg_id": c, "text": t} for i, c, t in inputs]}


def call(cid, tid, status, repair_key=None):
    return {"call_id": cid, "work_id": "w1", "turn_id": tid, "tool": "probe_unknown", "effect_class": "unknown",
            "status": status, "pid": None, "create_time": None, "repair_key": repair_key}


def history(*steps, submit=None):
    """steps: a snapshot dict (observed; quiescent if it says so) or a fault kind (a restart)."""
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 1.0
    if submit is not None:
        rec.complete(rec.invoke("submit", {"text": f"{script_tag(submit)} hi", "client_msg_id": "c1"}), "ok",
                     {"work_id": "w1", "input_id": "i1"})
    for step in steps:
        rec.now += 1.0
        if isinstance(step, str):
            rec.fault(step)
        else:
            snap = {k: v for k, v in step.items() if k != "quiescent"}
            rec.observe(snap, quiescent=step.get("quiescent"))
    return rec.history


def verdicts(fn, hist, **ev):
    return {r.clause_id: r.verdict for r in fn(Evidence(hist, **ev))}


def snap(items, turns, calls=None, quiescent=None):
    out = {"work_items": items, "turns": turns, "tool_calls": calls or []}
    if quiescent is not None:
        out["quiescent"] = quiescent
    return out


# --- REC-11 / REC-14 ---------------------------------------------------------------------------------


def test_one_mode_per_recovery_holds():
    h = history(snap([work()], [turn("t1", "active")]), "tree_kill",
                snap([work("finished", desired="done")], [turn("t1", "interrupted"), turn("t2", "completed", "t1")],
                     [call("c1", "t1", "outcome_unknown", "repair:c1")], quiescent=True))
    assert verdicts(check_recovery_modes, h) == {"REC-11": Verdict.VALID, "REC-14": Verdict.VALID}


def test_a_checkpoint_resumed_beside_a_new_turn_breaks_rec11():
    h = history("tree_kill", snap([work("finished", desired="done")],
                                  [turn("t1", "completed"), turn("t2", "active", "t1")], quiescent=True))
    assert verdicts(check_recovery_modes, h)["REC-11"] is Verdict.INVALID
    both = history("tree_kill", snap([work()], [turn("t1", "active"), turn("t2", "active", "t1")], quiescent=True))
    assert verdicts(check_recovery_modes, both)["REC-11"] is Verdict.INVALID
    moment = history("tree_kill", snap([work()], [turn("t1", "active"), turn("t2", "active", "t1")]))
    assert verdicts(check_recovery_modes, moment)["REC-11"] is Verdict.VALID  # not settled: one may be ending
    goal = history("tree_kill", snap([work("finished", desired="done")],
                                     [turn("t1", "completed"), turn("t2", "completed", "t1")], quiescent=True))
    assert verdicts(check_recovery_modes, goal)["REC-11"] is Verdict.VALID  # a completed turn continued: a Goal's
    forked = history("tree_kill", snap([work()], [turn("t1", "interrupted"), turn("t2", "active", "t1"),
                                                  turn("t3", "active", "t1")]))
    assert verdicts(check_recovery_modes, forked)["REC-11"] is Verdict.INVALID


def test_a_repair_without_its_key_or_new_turn_breaks_rec14():
    no_key = history("tree_kill", snap([work("finished", desired="done")],
                                       [turn("t1", "interrupted"), turn("t2", "completed", "t1")],
                                       [call("c1", "t1", "outcome_unknown")]))
    assert verdicts(check_recovery_modes, no_key)["REC-14"] is Verdict.INVALID
    no_turn = history("tree_kill", snap([work("finished", desired="done")], [turn("t1", "interrupted")]))
    assert verdicts(check_recovery_modes, no_turn)["REC-14"] is Verdict.INVALID
    unlinked = history("tree_kill", snap([work("finished", desired="done")],
                                         [turn("t1", "interrupted"), turn("t2", "completed")]))
    assert verdicts(check_recovery_modes, unlinked)["REC-14"] is Verdict.VALID  # the new turn, without its link


def test_without_a_restart_recovery_modes_are_unknown():
    h = history(snap([work()], [turn("t1", "interrupted"), turn("t2", "completed", "t1")]))
    assert set(verdicts(check_recovery_modes, h).values()) == {Verdict.UNKNOWN}


# --- REC-05 / REC-15 ---------------------------------------------------------------------------------


def test_a_key_that_changes_across_a_restart_breaks_rec05():
    before = snap([work()], [turn("t1", "active", key="a")])
    assert verdicts(check_continuation_keys, history(before, "tree_kill", before))["REC-05"] is Verdict.VALID
    after = snap([work()], [turn("t1", "active", key="b")])
    assert verdicts(check_continuation_keys, history(before, "tree_kill", after))["REC-05"] is Verdict.INVALID
    assert verdicts(check_continuation_keys, history(before, before))["REC-05"] is Verdict.UNKNOWN  # no restart


def test_a_turn_completing_under_a_later_control_version_breaks_rec15():
    h = history(snap([work(cv=2, desired="paused", status="paused")], [turn("t1", "active")]), "tree_kill",
                snap([work("finished", cv=3, desired="done")], [turn("t1", "completed")]))
    assert verdicts(check_continuation_keys, h)["REC-15"] is Verdict.INVALID
    ended = history(snap([work(cv=1)], [turn("t1", "active")]),
                    snap([work(cv=2, desired="paused", status="paused")], [turn("t1", "active")]),  # not yet seen
                    snap([work(cv=2, desired="paused", status="paused")], [turn("t1", "interrupted")]),
                    snap([work("finished", cv=3, desired="done")], [turn("t1", "interrupted"),
                                                                    turn("t2", "completed", "t1")]))
    assert verdicts(check_continuation_keys, ended)["REC-15"] is Verdict.VALID
    assert verdicts(check_continuation_keys, history(snap([work()], [turn("t1", "active")])))["REC-15"] \
        is Verdict.UNKNOWN


# --- UI-01 / UI-02 / UI-03 ---------------------------------------------------------------------------


def test_control_versions_only_move_forward_with_every_change_of_intent():
    ok = history(snap([work(cv=1)], []), snap([work(cv=2, desired="paused", status="paused")], []),
                 snap([work("finished", cv=3, desired="done")], []))
    assert verdicts(check_monotonic_versions, ok) == {"UI-01": Verdict.VALID}
    back = history(snap([work(cv=3)], []), "tree_kill", snap([work(cv=2)], []))
    assert verdicts(check_monotonic_versions, back) == {"UI-01": Verdict.INVALID}
    same = history(snap([work(cv=2, desired="paused", status="paused")], []), snap([work(cv=2)], []))
    assert verdicts(check_monotonic_versions, same) == {"UI-01": Verdict.INVALID}
    done = history(snap([work(cv=1)], []), snap([work("finished", cv=1, desired="done")], []))
    assert verdicts(check_monotonic_versions, done) == {"UI-01": Verdict.VALID}  # completion is no control


def _controls(*replies):
    rec = Recorder(clock=lambda: 1.0)
    for op, cv in replies:
        rec.complete(rec.invoke(op, {"work_id": "w1"}), "ok", {"work_id": "w1", "control_version": cv})
    return rec.history


def test_control_replies_order_the_intents():
    assert verdicts(check_monotonic_versions, _controls(("pause", 2), ("resume", 3))) == {"UI-01": Verdict.VALID}
    assert verdicts(check_monotonic_versions, _controls(("pause", 2), ("resume", 2))) == {"UI-01": Verdict.INVALID}
    assert verdicts(check_monotonic_versions, _controls(("pause", 4), ("pause", 3))) == {"UI-01": Verdict.INVALID}
    assert verdicts(check_monotonic_versions, _controls(("end", 2), ("end", 2))) == {"UI-01": Verdict.VALID}
    assert verdicts(check_monotonic_versions, _controls(("pause", 2))) == {"UI-01": Verdict.UNKNOWN}


def test_an_original_record_overwritten_breaks_ui02_and_ui03():
    first = snap([work()], [turn("t1", "interrupted")], [call("c1", "t1", "result_committed")])
    assert set(verdicts(check_originals, history(first, first)).values()) == {Verdict.VALID}
    closed = snap([work()], [turn("t1", "completed")], [call("c1", "t1", "result_committed")])
    assert set(verdicts(check_originals, history(first, closed)).values()) == {Verdict.INVALID}
    gone = snap([work()], [], [call("c1", "t1", "result_committed")])
    assert set(verdicts(check_originals, history(first, gone)).values()) == {Verdict.INVALID}
    edited = snap([work(inputs=(("i1", "c1", "hello!"),))], [turn("t1", "interrupted")],
                  [call("c1", "t1", "result_committed")])
    assert set(verdicts(check_originals, history(first, edited)).values()) == {Verdict.INVALID}
    assert set(verdicts(check_originals, history(first)).values()) == {Verdict.UNKNOWN}


# --- FA-09 -------------------------------------------------------------------------------------------


def _request(seq, at, script="pj"):
    return [{"event": "request", "seq": seq, "time": at, "request_id": f"r{seq}", "script_id": script, "step": 0}]


def test_a_completion_before_a_restart_stands():
    finished = snap([work("finished", desired="done")], [turn("t1", "completed")], quiescent=True)
    h = history(finished, "tree_kill", finished, submit="pj")
    assert verdicts(check_completion_converges, h) == {"FA-09": Verdict.VALID}
    assert verdicts(check_completion_not_rerun, h, ledger=_request(1, 0.5)) == {"FA-09": Verdict.VALID}


def test_a_completion_run_again_after_a_restart_breaks_fa09():
    finished = snap([work("finished", desired="done")], [turn("t1", "completed")], quiescent=True)
    again = snap([work("finished", desired="done")], [turn("t1", "completed"), turn("t2", "completed", "t1")],
                 quiescent=True)
    h = history(finished, "tree_kill", again, submit="pj")
    assert verdicts(check_completion_converges, h) == {"FA-09": Verdict.INVALID}
    asked = history(finished, "tree_kill", finished, submit="pj")
    assert verdicts(check_completion_not_rerun, asked, ledger=_request(1, 0.5) + _request(2, 9.0)) \
        == {"FA-09": Verdict.INVALID}
    waiting = history(finished, "tree_kill", snap([work("waiting")], [turn("t1", "completed")], quiescent=True),
                      submit="pj")
    assert verdicts(check_completion_converges, waiting) == {"FA-09": Verdict.INVALID}


def test_no_completion_before_a_restart_is_unknown():
    running = snap([work()], [turn("t1", "active")], quiescent=True)
    h = history(running, "tree_kill", running, submit="pj")
    assert verdicts(check_completion_converges, h) == {"FA-09": Verdict.UNKNOWN}
    assert verdicts(check_completion_not_rerun, h, ledger=_request(1, 9.0)) == {"FA-09": Verdict.UNKNOWN}


# --- FA-01 -------------------------------------------------------------------------------------------


def test_fa01_follows_the_safety_verdicts_of_a_run_that_restarted():
    first = snap([work()], [turn("t1", "interrupted")])
    held = history(first, "normal_exit", first)
    result = check_safety_after_restarts(Evidence(held))
    assert [r.verdict for r in result] == [Verdict.VALID] and "normal_exit" in result[0].text
    closed = snap([work()], [turn("t1", "completed")])
    broke = check_safety_after_restarts(Evidence(history(first, "normal_exit", closed)))
    assert [r.verdict for r in broke] == [Verdict.INVALID] and "UI-03" in broke[0].text
    assert [r.verdict for r in check_safety_after_restarts(Evidence(history(first, closed)))] == [Verdict.UNKNOWN]
