"""OWN-02 from the provider's record of who called it: two live senders of one script at once are two owners."""

from __future__ import annotations

from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_owners import check_one_sender
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.peer import sender_of
from recoverykit.model.catalogue import Verdict


def _attempt(seq, pid, sent, answered):
    out = [{"event": "request", "seq": seq, "time": sent, "request_id": f"r{seq}", "script_id": "t1", "step": 0,
            "sender_pid": pid, "sender_create_time": 100.0 + pid}]
    if answered is not None:
        out.append({"event": "response", "seq": seq, "time": answered, "delivered": True})
    return out


def _history(fault_at=None):
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 0.5
    rec.complete(rec.invoke("start", {}), "ok", {})
    if fault_at is not None:
        rec.now = fault_at
        rec.fault("tree_kill", pids=[1])
    return rec.history


def _v(history, ledger):
    return {r.clause_id: r.verdict for r in check_one_sender(Evidence(history, ledger))}


def test_one_sender_at_a_time_holds():
    ledger = _attempt(1, 1, 1.0, 2.0) + _attempt(2, 2, 3.0, 3.5)  # handed over after the first finished
    assert _v(_history(), ledger) == {"OWN-02": Verdict.VALID}


def test_two_live_senders_at_once_break_own02():
    ledger = _attempt(1, 1, 1.0, 4.0) + _attempt(2, 2, 2.0, 2.5)
    assert _v(_history(), ledger) == {"OWN-02": Verdict.INVALID}
    assert _v(_history(), _attempt(1, 1, 1.0, None) + _attempt(2, 2, 2.0, 2.5)) == {"OWN-02": Verdict.INVALID}


def test_an_open_request_left_by_a_killed_process_is_no_second_owner():
    ledger = _attempt(1, 1, 1.0, 4.0) + _attempt(2, 2, 2.0, 2.5)
    assert _v(_history(fault_at=1.5), ledger) == {"OWN-02": Verdict.VALID}


def test_a_client_gone_within_the_tolerance_is_no_second_owner():
    ledger = _attempt(1, 1, 1.0, 2.1) + _attempt(2, 2, 2.0, 2.5)
    assert _v(_history(), ledger) == {"OWN-02": Verdict.VALID}


def test_no_sender_is_unknown_never_valid():
    ledger = [{**r, "sender_pid": None} for r in _attempt(1, 1, 1.0, 2.0)]
    assert _v(_history(), ledger) == {"OWN-02": Verdict.UNKNOWN}


def test_the_peer_of_a_local_connection_is_this_process():
    import os
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname()):
            conn, address = server.accept()
            with conn:
                found = sender_of(address, server.getsockname())
    assert found is not None and found["pid"] == os.getpid()
    assert sender_of(("127.0.0.1", 1), ("127.0.0.1", 2)) is None


def _paused_history():
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 0.5
    rec.complete(rec.invoke("start", {}), "ok", {})
    rec.now = 1.5
    rec.fault("process_pause", pids=[1])
    rec.now = 3.0
    rec.fault("process_continue", pids=[1])
    return rec.history


def test_a_paused_owner_keeps_its_work():
    from recoverykit.conformance.checks_owners import check_paused_owner_kept
    kept = _attempt(1, 1, 1.0, 3.5) + _attempt(2, 1, 4.0, 4.5)
    assert {r.clause_id: r.verdict for r in check_paused_owner_kept(Evidence(_paused_history(), kept))} \
        == {"REC-12": Verdict.VALID}
    replaced = _attempt(1, 1, 1.0, 3.5) + _attempt(2, 2, 2.0, 2.5)
    assert {r.clause_id: r.verdict for r in check_paused_owner_kept(Evidence(_paused_history(), replaced))} \
        == {"REC-12": Verdict.INVALID}
    # a pause is no restart: the overlap is two owners at once for OWN-02 as well
    assert _v(_paused_history(), replaced) == {"OWN-02": Verdict.INVALID}
    assert {r.clause_id: r.verdict for r in check_paused_owner_kept(Evidence(_history(), kept))} \
        == {"REC-12": Verdict.UNKNOWN}


def _double_start(kill_at: float | None = None):
    """A start repeated 0.1 s later with no fault between; with ``kill_at``, a tree kill of pid 1 at that time
    comes first, and the start after it is the one repeated."""
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 0.5
    rec.complete(rec.invoke("start", {}), "ok", {})
    if kill_at is not None:
        rec.now = kill_at
        rec.fault("tree_kill", killed=[1])
        rec.now += 0.1
        rec.complete(rec.invoke("start", {}), "ok", {})
    rec.now += 0.1
    rec.complete(rec.invoke("start", {}), "ok", {})
    return rec.history


def test_a_repeated_start_executes_nothing_twice():
    from recoverykit.conformance.checks_owners import check_repeated_start
    once = _attempt(1, 1, 1.0, 2.0)
    assert {r.clause_id: r.verdict for r in check_repeated_start(Evidence(_double_start(), once))} \
        == {"FA-13": Verdict.VALID}
    twice = _attempt(1, 1, 1.0, 2.0) + _attempt(2, 2, 2.5, 3.0)  # the same step delivered again, by another
    assert {r.clause_id: r.verdict for r in check_repeated_start(Evidence(_double_start(), twice))} \
        == {"FA-13": Verdict.INVALID}
    assert {r.clause_id: r.verdict for r in check_repeated_start(Evidence(_history(), once))} \
        == {"FA-13": Verdict.UNKNOWN}


def test_a_late_answer_to_a_killed_sender_is_no_repeat():
    """sessions_together at a durable write: the worker is killed with a request in flight, the kit starts the
    runtime twice, and the provider answers the dead worker's request just after the second start (the write to a
    closed socket succeeds). The retry after the restart is the step's only delivery to a live owner."""
    from recoverykit.conformance.checks_owners import check_repeated_start
    history = _double_start(kill_at=1.1)  # the second start at 1.3, before the late answer at 1.4
    late = _attempt(1, 1, 1.0, 1.4) + _attempt(2, 2, 2.5, 3.0)
    assert {r.clause_id: r.verdict for r in check_repeated_start(Evidence(history, late))} \
        == {"FA-13": Verdict.VALID}
    alive = _attempt(1, 3, 1.0, 1.4) + _attempt(2, 2, 2.5, 3.0)  # the same, from a sender the fault spared
    assert {r.clause_id: r.verdict for r in check_repeated_start(Evidence(history, alive))} \
        == {"FA-13": Verdict.INVALID}


def _run(token, pid, ppid, started):
    from recoverykit.conformance.witness import Execution
    return Execution(token, "probe_read", "read_only", pid, 100.0 + pid, started, started + 0.1, "ok", 0, ppid=ppid,
                     emitted=True)


def test_a_double_run_names_its_processes_and_whether_a_start_came_between():
    """A newcomer read "ran 2 times after the repeated start" and looked at the start, while the witness showed
    one worker running the call again after a cancel. The message names the pids and what came between the runs."""
    from recoverykit.conformance.checks_owners import check_repeated_start
    from recoverykit.conformance.witness import WitnessLog
    rec = Recorder(clock=lambda: rec.now)
    rec.history.events.extend(_double_start().events)  # starts at 0.5 and 0.6; a cancel at 1.5, between the runs
    rec.now = 1.5
    rec.complete(rec.invoke("cancel", {"work_id": "w1"}), "ok", {})
    once = _attempt(1, 1, 1.0, 2.0)
    runs = [_run("t1.0.0.0", 501, 42, 1.2), _run("t1.0.1.0", 502, 42, 1.7)]
    [r] = check_repeated_start(Evidence(rec.history, once, WitnessLog([], runs, None)))
    assert r.verdict == Verdict.INVALID
    assert "pid 501 (spawned by pid 42)" in r.text and "pid 502 (spawned by pid 42)" in r.text
    assert "straddle no start" in r.text and "cancel at event" in r.text
    assert "one process (pid 42)" in r.text
    rec.now = 1.6  # a start between the runs, from another worker
    rec.complete(rec.invoke("start", {}), "ok", {})
    other = [_run("t1.0.0.0", 501, 42, 1.2), _run("t1.0.1.0", 503, 43, 1.7)]
    [r] = check_repeated_start(Evidence(rec.history, once, WitnessLog([], other, None)))
    assert "straddle a start" in r.text and "2 processes ran it" in r.text
