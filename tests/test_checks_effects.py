"""Effect classes, the safety boundary and live tool children, judged from the kit's evidence (checks_effects)."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_effects import (
    check_interrupted_turn_ends,
    check_live_child_awaited,
    check_not_blocked,
    check_recovery_turn,
)
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.witness import Execution, WitnessLog
from recoverykit.model.catalogue import Verdict

TOOLS = [{"name": n, "effect_class": c} for n, c in (("probe_read", "read_only"), ("probe_idempotent", "idempotent"),
                                                       ("sync_notes", "unknown"), ("read_notes", "unknown"),
                                                       ("grep", "unknown"))]
UPGRADED = [t if t["name"] != "sync_notes" else {**t, "effect_class": "read_only"} for t in TOOLS]


def _history(*, fault="tree_kill", killed=(1,), upgraded=False, settled=True, snapshot=None, stop_at=None,
             other_session="s-ebi"):
    """start (the tools), a fault at 1.5, a start at 1.6 (tools upgraded or not), a settled observation at 9."""
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 0.5
    rec.complete(rec.invoke("start", {"probe_tools": TOOLS}), "ok", {})
    rec.complete(rec.invoke("submit", {"session_id": "s-eb", "text": "[[rk-script:eb]] request 1"}), "ok",
                 {"work_id": "w1"})
    rec.now = 1.5
    rec.fault(fault, pids=list(killed))
    rec.now = 1.6
    rec.complete(rec.invoke("start", {"probe_tools": UPGRADED if upgraded else None}), "ok", {})
    rec.complete(rec.invoke("submit", {"session_id": other_session, "text": "[[rk-script:ebi]] request 1"}), "ok",
                 {"work_id": "w2"})
    if stop_at is not None:
        rec.now = stop_at
        rec.complete(rec.invoke("end", {"work_id": "w1"}), "ok", {"work_id": "w1"})
    rec.now = 9.0
    rec.observe(snapshot or {"work_items": []}, settled)
    return rec.history


def _call(seq, script, time, offered, asked=(), claims=None, results_for=()):
    names = [n for n, _ in asked]
    return [{"event": "request", "seq": seq, "time": time, "request_id": f"r{seq}", "script_id": script,
             "messages": [], "tools_offered": list(offered), "tool_results_for": list(results_for)},
            {"event": "response", "seq": seq, "time": time + 0.01, "delivered": True,
             "probe_tokens": [tok for _, tok in asked], "tool_names": names,
             "call_ids": [f"c{tok}" for _, tok in asked],
             "read_only_claims": claims if claims is not None else [False] * len(names)}]


def _e(token, tool, cls, *, started=1.0, finished=1.2, emitted=False, pid=9, ppid=8):
    return Execution(token, tool, cls, pid, 1.0, started, finished, "ok" if finished else None, 0 if finished else None,
                     ppid=ppid, emitted=emitted)


WRITE = _e("eb.0.1.0", "sync_notes", "unknown")
ASKED = (("read_notes", "eb.1.1.0"), ("grep", "eb.1.1.1"), ("probe_read", "eb.1.1.2"))


def _v(results):
    return {r.clause_id: r.verdict for r in results}


def _witness(*executions):
    return WitnessLog([], list(executions), None)


def test_a_restricted_recovery_turn_holds_the_boundary_clauses():
    ledger = _call(1, "eb", 2.0, ["probe_read"], ASKED, claims=[True, True, False])
    ev = Evidence(_history(), ledger, _witness(WRITE, _e("eb.1.1.2", "probe_read", "read_only", started=2.1,
                                                         finished=2.2, emitted=True)))
    assert _v(check_recovery_turn(ev)) == {"EFF-08": Verdict.VALID, "EFF-06": Verdict.VALID,
                                           "EFF-10": Verdict.VALID, "EFF-05": Verdict.UNKNOWN,
                                           "EFF-07": Verdict.UNKNOWN}


def test_a_disguised_read_that_runs_breaks_eff06_and_eff08():
    ledger = _call(1, "eb", 2.0, ["probe_read"], ASKED)
    ran = _e("eb.1.1.0", "read_notes", "unknown", started=2.1, finished=2.2, emitted=True)
    verdicts = _v(check_recovery_turn(Evidence(_history(), ledger, _witness(WRITE, ran))))
    assert verdicts["EFF-06"] is Verdict.INVALID and verdicts["EFF-08"] is Verdict.INVALID
    assert verdicts["EFF-10"] is Verdict.VALID  # grep did not run, and was not offered


def test_a_tool_named_like_a_built_in_offered_or_run_breaks_eff10():
    offered = Evidence(_history(), _call(1, "eb", 2.0, ["probe_read", "grep"]), _witness(WRITE))
    assert _v(check_recovery_turn(offered))["EFF-10"] is Verdict.INVALID
    ran = _e("eb.1.1.1", "grep", "unknown", started=2.1, finished=2.2, emitted=True)
    verdicts = _v(check_recovery_turn(Evidence(_history(), _call(1, "eb", 2.0, ["probe_read"], ASKED),
                                               _witness(WRITE, ran))))
    assert verdicts["EFF-10"] is Verdict.INVALID and verdicts["EFF-06"] is Verdict.VALID


def _hinted_history(hints):
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 0.5
    search = {"name": "search", "effect_class": None, "plugin_hints": hints}
    rec.complete(rec.invoke("start", {"probe_tools": [*TOOLS, search]}), "ok", {})
    rec.now = 1.5
    rec.fault("tree_kill", pids=[1])
    return rec.history


def test_a_plugin_declaration_does_not_qualify_a_tool():
    ran = _e("eb.1.1.3", "search", "unclassified", started=2.1, finished=2.2, emitted=True)
    ledger = _call(1, "eb", 2.0, ["probe_read"], (("search", "eb.1.1.3"),))
    declared = Evidence(_hinted_history({"readOnlyHint": True}), ledger, _witness(WRITE, ran))
    assert _v(check_recovery_turn(declared))["EFF-10"] is Verdict.INVALID
    plain = Evidence(_hinted_history(None), ledger, _witness(WRITE, ran))  # no declaration: EFF-08's alone
    assert _v(check_recovery_turn(plain))["EFF-10"] is Verdict.VALID  # (grep, registered unknown, not offered)
    assert _v(check_recovery_turn(plain))["EFF-08"] is Verdict.INVALID


def test_a_model_claim_does_not_make_a_call_read_only():
    asked = (("grep", "eb.1.1.1"),)
    ran = _e("eb.1.1.1", "grep", "unknown", started=2.1, finished=2.2, emitted=True)
    claimed = Evidence(_history(), _call(1, "eb", 2.0, ["probe_read"], asked, claims=[True]), _witness(WRITE, ran))
    assert _v(check_recovery_turn(claimed))["EFF-06"] is Verdict.INVALID


def test_the_class_at_execution_restricts_after_a_re_registration():
    ok = Evidence(_history(upgraded=True), _call(1, "eb", 2.0, ["probe_read", "sync_notes"]), _witness(WRITE))
    assert _v(check_recovery_turn(ok))["EFF-05"] is Verdict.VALID
    assert _v(check_recovery_turn(ok))["EFF-08"] is Verdict.VALID  # sync_notes is registered read_only now
    rederived = Evidence(_history(upgraded=True), _call(1, "eb", 2.0, ["probe_read", "probe_idempotent"]),
                         _witness(WRITE))
    assert _v(check_recovery_turn(rederived))["EFF-05"] is Verdict.INVALID


def test_a_tool_registered_without_a_class_is_unknown_by_default():
    bare = _e("eb.0.1.0", "sync_notes", "unclassified")
    ok = Evidence(_history(), _call(1, "eb", 2.0, ["probe_read"]), _witness(bare))
    assert _v(check_recovery_turn(ok))["EFF-07"] is Verdict.VALID
    taken_safe = Evidence(_history(), _call(1, "eb", 2.0, ["probe_read", "probe_idempotent", "sync_notes"]),
                          _witness(bare))
    assert _v(check_recovery_turn(taken_safe))["EFF-07"] is Verdict.INVALID


def test_no_unknown_write_says_nothing():
    emitted = _e("eb.0.1.0", "sync_notes", "unknown", emitted=True)
    ev = Evidence(_history(), _call(1, "eb", 2.0, ["probe_read", "grep"], ASKED), _witness(emitted))
    assert set(_v(check_recovery_turn(ev)).values()) == {Verdict.UNKNOWN}
    assert _v(check_not_blocked(ev)) == {"EFF-03": Verdict.UNKNOWN}
    assert _v(check_interrupted_turn_ends(ev)) == {"EFF-11": Verdict.UNKNOWN}


def test_investigation_and_independent_work_go_on():
    ledger = [*_call(1, "eb", 2.0, ["probe_read"], ASKED), *_call(2, "ebi", 2.5, ["probe_idempotent"],
                                                                    (("probe_idempotent", "ebi.0.1.0"),))]
    read = _e("eb.1.1.2", "probe_read", "read_only", started=2.1, finished=2.2, emitted=True)
    other = _e("ebi.0.1.0", "probe_idempotent", "idempotent", started=2.6, finished=2.7, emitted=True)
    assert _v(check_not_blocked(Evidence(_history(), ledger, _witness(WRITE, read, other)))) == {
        "EFF-03": Verdict.VALID}
    assert _v(check_not_blocked(Evidence(_history(), ledger, _witness(WRITE, read)))) == {"EFF-03": Verdict.INVALID}
    assert _v(check_not_blocked(Evidence(_history(), ledger, _witness(WRITE, other)))) == {"EFF-03": Verdict.INVALID}
    ended = Evidence(_history(stop_at=3.0), ledger, _witness(WRITE))  # a user stop after: nothing to say
    assert _v(check_not_blocked(ended)) == {"EFF-03": Verdict.UNKNOWN}
    same = Evidence(_history(other_session="s-eb"), ledger, _witness(WRITE, read))  # one session: related
    assert _v(check_not_blocked(same)) == {"EFF-03": Verdict.VALID}  # the read counts; ebi's call is not judged
    unsettled = Evidence(_history(settled=False), ledger, _witness(WRITE))
    assert _v(check_not_blocked(unsettled)) == {"EFF-03": Verdict.UNKNOWN}


def _observed(turn_status):
    return {"work_items": [], "turns": [{"turn_id": "w1.t1", "work_id": "w1", "status": turn_status}],
            "tool_calls": [{"call_id": "k1", "work_id": "w1", "turn_id": "w1.t1", "tool": "sync_notes",
                            "effect_class": "unknown", "status": "outcome_unknown", "pid": 8}]}


def test_the_turn_of_an_unknown_write_ends_interrupted():
    went_on = _call(1, "eb", 2.0, ["probe_read"])
    ok = Evidence(_history(snapshot=_observed("interrupted")), went_on, _witness(WRITE))
    assert _v(check_interrupted_turn_ends(ok)) == {"EFF-11": Verdict.VALID}
    kept = Evidence(_history(snapshot=_observed("active")), went_on, _witness(WRITE))
    assert _v(check_interrupted_turn_ends(kept)) == {"EFF-11": Verdict.INVALID}
    blind = Evidence(_history(snapshot={"work_items": []}), went_on, _witness(WRITE))
    assert _v(check_interrupted_turn_ends(blind)) == {"EFF-11": Verdict.UNKNOWN}
    held = Evidence(_history(snapshot=_observed("active")), [], _witness(WRITE))  # its work never went on
    assert _v(check_interrupted_turn_ends(held)) == {"EFF-11": Verdict.UNKNOWN}


def test_a_live_child_spared_by_the_restart_is_waited_for():
    child = _e("long.0.1.0", "probe_unknown", "unknown", started=1.4, finished=3.0, emitted=True, pid=50)
    answered_after = _call(2, "long", 3.1, ["probe_read"], results_for=["clong.0.1.0"])
    opened = _call(1, "long", 1.0, ["probe_read"], (("probe_unknown", "long.0.1.0"),))
    ok = Evidence(_history(fault="worker_kill", killed=(7,)), [*opened, *answered_after], _witness(child))
    assert _v(check_live_child_awaited(ok)) == {"OWN-07": Verdict.VALID}
    early = Evidence(_history(fault="worker_kill", killed=(7,)),
                     [*opened, *_call(2, "long", 2.0, ["probe_read"], results_for=["clong.0.1.0"])], _witness(child))
    assert _v(check_live_child_awaited(early)) == {"OWN-07": Verdict.INVALID}
    cut = _e("long.0.1.0", "probe_unknown", "unknown", started=1.4, finished=None, pid=50)
    killed = Evidence(_history(fault="worker_kill", killed=(7,)), opened, _witness(cut))
    assert _v(check_live_child_awaited(killed)) == {"OWN-07": Verdict.INVALID}
    rerun = Evidence(_history(fault="worker_kill", killed=(7,)), opened,
                     _witness(child, _e("long.0.1.0", "probe_unknown", "unknown", started=3.2, finished=3.3, pid=51)))
    assert _v(check_live_child_awaited(rerun)) == {"OWN-07": Verdict.INVALID}


def test_a_child_the_kit_killed_or_the_user_ended_is_not_judged():
    cut = _e("long.0.1.0", "probe_unknown", "unknown", started=1.4, finished=None, pid=50)
    by_kit = Evidence(_history(killed=(50,)), [], _witness(cut))
    assert _v(check_live_child_awaited(by_kit)) == {"OWN-07": Verdict.UNKNOWN}
    history = _history(killed=(50,))  # killed by the kit's first kill, then a second restart spares nothing of it
    history.events.append(type(history.faults[0])(99, 2.0, "crash_during_recovery", {"killed": [7]}))
    assert _v(check_live_child_awaited(Evidence(history, [], _witness(cut)))) == {"OWN-07": Verdict.UNKNOWN}
    mine = _e("eb.0.1.0", "probe_unknown", "unknown", started=1.4, finished=None, pid=50)
    ended = Evidence(_history(fault="worker_kill", killed=(7,), stop_at=2.0), [], _witness(mine))
    assert _v(check_live_child_awaited(ended)) == {"OWN-07": Verdict.UNKNOWN}  # End cancels it explicitly
    unended = Evidence(_history(fault="worker_kill", killed=(7,)), [], _witness(mine))
    assert _v(check_live_child_awaited(unended)) == {"OWN-07": Verdict.INVALID}
