"""Each recovery step of the reference runtime, in-process against a real SQLite data directory.

These call the runtime's own modules directly (ownership, fencing, repair, decision, admission,
load facts, storage failures); the end-to-end path through the adapter is in test_impl_kill.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import psutil
import pytest
from recoverykit.impl import control, observe, recovery
from recoverykit.impl.config import Config, ToolSpec
from recoverykit.impl.engine import Ctx
from recoverykit.impl.projection import ProjectionLost, project, rebuild
from recoverykit.impl.schema import (
    RUNTIME_MIGRATIONS,
    MigrationFailed,
    StorageUnavailable,
    connect,
    current_version,
    migrate,
    open_runtime_db,
    open_usage_db,
)
from recoverykit.impl.store import Fenced, Identity, fenced, one, rows, tx

TOOLS = [ToolSpec("probe_unknown", ["/bin/true"], "unknown", "1"),
         ToolSpec("probe_read", ["/bin/true"], "read_only", "1")]


def make_ctx(path, host="host-a", **cfg) -> Ctx:
    conf = Config(data_dir=str(path), tools=TOOLS, host_id=host, **cfg)
    conf.save()
    return Ctx(conf, open_runtime_db(path), open_usage_db(path), Identity.me(host), lambda: False)


def submit(ctx: Ctx, msg="m1", **kw) -> str:
    return control.submit(ctx.db, ctx.cfg, "s1", "hello", msg, **kw)["work_id"]


def item(ctx: Ctx, work_id: str) -> dict:
    return one(ctx.db, "SELECT * FROM work_items WHERE work_id=?", (work_id,))


def set_lease(ctx: Ctx, work_id: str, host: str, pid: int, ctime: float, gen: int = 1) -> None:
    with tx(ctx.db):
        ctx.db.conn.execute("INSERT OR REPLACE INTO leases VALUES (?,?,?,?,?,0,0,0,0)",
                            (work_id, host, pid, ctime, gen))
        ctx.db.conn.execute("UPDATE work_items SET status='running' WHERE work_id=?", (work_id,))


def dead_process() -> tuple[int, float]:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    ctime = psutil.Process(proc.pid).create_time()
    proc.wait()
    return proc.pid, ctime


# --- step 2: ownership -------------------------------------------------------------------------------


def test_two_concurrent_claims_exactly_one_wins(tmp_path):
    first = make_ctx(tmp_path)
    work_id = submit(first)
    second = make_ctx(tmp_path)  # its own connection, as another worker would have
    barrier, results = threading.Barrier(2), []

    def racer(ctx):
        barrier.wait()
        results.append(recovery.claim(ctx, work_id))

    threads = [threading.Thread(target=racer, args=(c,)) for c in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results, key=str) == [1, None]
    assert [a["generation"] for a in rows(first.db, "SELECT * FROM owner_attempts")] == [1]


def test_stale_generation_write_is_rejected_and_recorded(tmp_path):
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    assert recovery.claim(ctx, work_id) == 1
    with tx(ctx.db):  # another recoverer took over meanwhile
        ctx.db.conn.execute("UPDATE leases SET generation=2 WHERE work_id=?", (work_id,))
    with pytest.raises(Fenced), fenced(ctx.db, work_id, 1, "tool.result.commit"):
        ctx.db.conn.execute("UPDATE work_items SET last_progress='stale' WHERE work_id=?", (work_id,))
    assert item(ctx, work_id)["last_progress"] is None
    (row,) = rows(ctx.db, "SELECT * FROM fenced_writes")
    assert (row["stale_generation"], row["current_generation"], row["op"]) == (1, 2, "tool.result.commit")
    assert observe.snapshot(tmp_path)["fenced_writes"] == [
        {"work_id": work_id, "generation": 1, "current_generation": 2, "what": "tool.result.commit"}]


def test_dead_owner_is_replaced_under_the_next_generation(tmp_path):
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    set_lease(ctx, work_id, "host-a", *dead_process(), gen=4)
    assert recovery.claim(ctx, work_id) == 5


def test_recycled_pid_with_another_start_time_is_not_the_owner(tmp_path):
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    me = psutil.Process()
    set_lease(ctx, work_id, "host-a", me.pid, me.create_time() - 1000.0)  # our pid, but not our start time
    assert recovery.claim(ctx, work_id) == 2


def test_live_owner_is_left_alone(tmp_path):
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        set_lease(ctx, work_id, "host-a", sleeper.pid, psutil.Process(sleeper.pid).create_time())
        assert recovery.claim(ctx, work_id) is None
        assert item(ctx, work_id)["status"] == "running"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_owner_on_another_host_is_an_explicit_wait_not_a_takeover(tmp_path):
    ctx = make_ctx(tmp_path, host="host-b")
    work_id = submit(ctx)
    set_lease(ctx, work_id, "host-a", *dead_process())
    assert recovery.claim(ctx, work_id) is None
    got = item(ctx, work_id)
    assert (got["status"], got["reason_code"]) == ("waiting", "owner_on_other_host")
    assert "host-a" in got["reason_text"]
    assert one(ctx.db, "SELECT generation FROM leases")["generation"] == 1


# --- step 3: repair ----------------------------------------------------------------------------------


def _turn_with_calls(ctx: Ctx, work_id: str, gen: int) -> dict:
    turn = recovery.admit(ctx, item(ctx, work_id), gen, recovery=False)
    calls = [{"id": "call_a", "name": "probe_unknown", "arguments": "{}"},
             {"id": "call_b", "name": "probe_read", "arguments": "{}"}]
    with tx(ctx.db):
        ctx.db.conn.execute("INSERT INTO messages (work_id, session_id, turn_id, role, content, tool_calls, at)"
                            " VALUES (?,?,?,'assistant','',?,0)", (work_id, "s1", turn["turn_id"], json.dumps(calls)))
        for c, status in zip(calls, ("outcome_unknown", "never_started"), strict=True):
            ctx.db.conn.execute(
                "INSERT INTO tool_calls (call_id, work_id, turn_id, provider_call_id, tool_name, arguments,"
                " effect_class, impl_identity, status, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,0,0)",
                (f"{turn['turn_id']}.{c['id']}", work_id, turn["turn_id"], c["id"], c["name"], "{}",
                 "unknown" if c["name"] == "probe_unknown" else "read_only",
                 json.dumps({"argv": ["/bin/true"], "version": "1"}), status))
    return turn


def test_repair_fills_missing_results_once_under_stable_keys(tmp_path):
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    gen = recovery.claim(ctx, work_id)
    turn = _turn_with_calls(ctx, work_id, gen)
    for _ in range(3):  # a repeated repair (a crash during recovery) changes nothing
        recovery.repair(ctx, item(ctx, work_id), gen, turn, "interrupted")
    msgs = rows(ctx.db, "SELECT role, origin, repair_key, content FROM messages WHERE work_id=? ORDER BY msg_seq",
                (work_id,))
    assert [(m["role"], m["origin"]) for m in msgs] == [
        ("user", "real"), ("assistant", "real"), ("tool", "placeholder"), ("tool", "placeholder"),
        ("system", "recovery_notice")]
    assert msgs[2]["repair_key"] == f"repair:{turn['turn_id']}.call_a"
    assert "never started: probe_read (call_b)" in msgs[4]["content"]
    assert "outcome is unknown: probe_unknown (call_a)" in msgs[4]["content"]
    assert one(ctx.db, "SELECT status FROM turns")["status"] == "interrupted"
    assert [m["content"] for m in msgs if m["role"] == "user"] == ["hello"]  # input never appended again


def test_real_result_wins_over_placeholder_in_the_request(tmp_path):
    from recoverykit.impl import history
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    gen = recovery.claim(ctx, work_id)
    turn = _turn_with_calls(ctx, work_id, gen)
    recovery.repair(ctx, item(ctx, work_id), gen, turn, "interrupted")
    with tx(ctx.db):  # a late, verifiable receipt for call_a arrives as a reconciliation
        ctx.db.conn.execute("INSERT INTO messages (work_id, session_id, role, content, tool_call_id, at)"
                            " VALUES (?,?,'tool','real output','call_a',0)", (work_id, "s1"))
    sent = history.build(ctx.db, "s1")
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "system"]
    assert sent[2] == {"role": "tool", "tool_call_id": "call_a", "content": "real output"}
    assert sent[3]["tool_call_id"] == "call_b" and "never started" in sent[3]["content"]


def test_a_reused_call_id_gets_its_own_calls_result(tmp_path):
    """Providers that number calls per response repeat ids across responses: each call keeps its own answer."""
    from recoverykit.impl import history
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    gen = recovery.claim(ctx, work_id)
    turn = _turn_with_calls(ctx, work_id, gen)
    recovery.repair(ctx, item(ctx, work_id), gen, turn, "interrupted")  # call_a unknown, call_b never started
    with tx(ctx.db):  # the next response calls call_a again, and that call is refused
        ctx.db.conn.execute("INSERT INTO messages (work_id, session_id, role, content, tool_calls, at) VALUES"
                            " (?,?,'assistant','',?,0)", (work_id, "s1", json.dumps(
                                [{"id": "call_a", "name": "probe_unknown", "arguments": "{}"}])))
        ctx.db.conn.execute("INSERT INTO messages (work_id, session_id, role, content, tool_call_id, origin, at)"
                            " VALUES (?,?,'tool','[runtime] not executed','call_a','refused',0)", (work_id, "s1"))
    sent = history.build(ctx.db, "s1")
    answers = [m["content"] for m in sent if m["role"] == "tool" and m["tool_call_id"] == "call_a"]
    assert len(answers) == 2 and "outcome of the call to probe_unknown is unknown" in answers[0]
    assert answers[1] == "[runtime] not executed"


def _sent_after(tmp_path, *messages: tuple[str, str, str | None, str]) -> list[dict]:
    """The request projection of session s1 after its input and these (role, content, tool_call_id, origin)."""
    from recoverykit.impl import history
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    with tx(ctx.db):
        for role, content, call_id, origin in messages:
            ctx.db.conn.execute("INSERT INTO messages (work_id, session_id, role, content, tool_call_id, origin, at)"
                                " VALUES (?,'s1',?,?,?,?,0)", (work_id, role, content, call_id, origin))
    return history.build(ctx.db, "s1")


def test_an_interrupted_partial_is_sent_with_its_marker(tmp_path):
    sent = _sent_after(tmp_path, ("assistant", "The answer [interrupted]", None, "interrupted_partial"))
    assert sent[-1] == {"role": "assistant", "content": "The answer [interrupted]"}


# --- steps 4 and 5: decide, admit ----------------------------------------------------------------------


def test_admission_is_once_per_continuation_key(tmp_path):
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    gen = recovery.claim(ctx, work_id)
    turns = {recovery.admit(ctx, item(ctx, work_id), gen, recovery=True)["turn_id"] for _ in range(3)}
    assert len(turns) == 1
    (turn,) = rows(ctx.db, "SELECT * FROM turns")
    assert turn["continuation_key"] == f"{work_id}|v1|m1"


def test_unknown_effect_restricts_the_next_turn(tmp_path):
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    gen = recovery.claim(ctx, work_id)
    turn = _turn_with_calls(ctx, work_id, gen)
    recovery.repair(ctx, item(ctx, work_id), gen, turn, "interrupted")
    nxt = recovery.admit(ctx, item(ctx, work_id), gen, recovery=True)
    assert nxt["restricted"] == 1 and nxt["predecessor"] == turn["turn_id"]


@pytest.mark.parametrize("case", ["directory", "credentials", "tool_version"])
def test_missing_resources_are_explicit_waits_with_actions(tmp_path, case, monkeypatch):
    extra = {"credentials_env": "RK_TEST_NO_SUCH_CREDENTIAL"} if case == "credentials" else {}
    monkeypatch.delenv("RK_TEST_NO_SUCH_CREDENTIAL", raising=False)
    ctx = make_ctx(tmp_path, **extra)
    work_id = submit(ctx, working_dir=str(tmp_path / "gone") if case == "directory" else None)
    gen = recovery.claim(ctx, work_id)
    if case == "tool_version":
        _turn_with_calls(ctx, work_id, gen)
        ctx.cfg.tools = [ToolSpec("probe_unknown", ["/bin/true"], "unknown", "2"), TOOLS[1]]
    reason = recovery.decide(ctx, item(ctx, work_id), gen, recovering=True)
    expected = {"directory": "resource_missing_directory", "credentials": "resource_missing_credentials",
                "tool_version": "resource_tool_version_changed"}[case]
    got = item(ctx, work_id)
    assert reason == expected == got["reason_code"] and got["status"] == "waiting"
    assert json.loads(got["actions"]) == ["Retry", "Pause", "End"]
    assert one(ctx.db, "SELECT reason_code FROM pending_recovery")["reason_code"] == expected
    assert one(ctx.db, "SELECT released FROM leases")["released"] == 1


def test_resume_accepting_a_changed_tool_lets_the_work_go_on_still_restricted(tmp_path):
    """The Retry a changed tool's wait offers works: the user accepts the tool as it is now, and the work goes on,
    its next turn restricted by the class the unknown write ran under (not by the tool's new registration)."""
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    gen = recovery.claim(ctx, work_id)
    recovery.repair(ctx, item(ctx, work_id), gen, _turn_with_calls(ctx, work_id, gen), "interrupted")
    ctx.cfg.tools = [ToolSpec("probe_unknown", ["/bin/true"], "read_only", "2"), TOOLS[1]]
    ctx.cfg.save()
    assert recovery.decide(ctx, item(ctx, work_id), gen, recovering=True) == "resource_tool_version_changed"
    control.control(ctx.db, "resume", work_id, ctx.cfg)
    gen = recovery.claim(ctx, work_id)
    assert recovery.decide(ctx, item(ctx, work_id), gen, recovering=False) is None
    assert recovery.admit(ctx, item(ctx, work_id), gen, recovery=False)["restricted"] == 1


def test_automatic_recovery_disabled_is_honoured_until_resume(tmp_path):
    ctx = make_ctx(tmp_path, automatic_recovery=False)
    work_id = submit(ctx)
    gen = recovery.claim(ctx, work_id)
    assert recovery.decide(ctx, item(ctx, work_id), gen, recovering=True) == "automatic_recovery_disabled"
    assert (item(ctx, work_id)["status"], item(ctx, work_id)["reason_code"]) == ("paused",
                                                                                 "automatic_recovery_disabled")
    control.control(ctx.db, "resume", work_id)
    gen = recovery.claim(ctx, work_id)
    assert recovery.decide(ctx, item(ctx, work_id), gen, recovering=True) is None


def test_decision_yields_to_a_user_control_that_arrived_meanwhile(tmp_path):
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    gen = recovery.claim(ctx, work_id)
    control.control(ctx.db, "pause", work_id)
    assert recovery.decide(ctx, item(ctx, work_id), gen, recovering=True) == "control"
    assert item(ctx, work_id)["status"] == "paused"


# --- step 1: load facts, storage failures ---------------------------------------------------------------


def test_old_paused_record_with_unknown_reason_stays_paused_with_explanation(tmp_path):
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    with tx(ctx.db):
        ctx.db.conn.execute("UPDATE work_items SET desired_state='paused', status='paused',"
                            " reason_code='paused_recoverable' WHERE work_id=?", (work_id,))
    recovery.load_facts(ctx)
    got = item(ctx, work_id)
    assert (got["status"], got["reason_code"], got["desired_state"]) == ("paused", "paused_unknown_reason", "paused")
    assert "paused_recoverable" in got["reason_text"]
    assert recovery.claim(ctx, work_id) is None


def test_failed_migration_changes_nothing_and_says_why(tmp_path):
    path = tmp_path / "runtime.db"
    db = connect(path)
    migrate(db, path, RUNTIME_MIGRATIONS)
    broken = (*RUNTIME_MIGRATIONS, "CREATE TABLE extra (x INTEGER); CREATE TABLE work_items (x INTEGER)")
    with pytest.raises(MigrationFailed) as err:
        migrate(db, path, broken)
    assert err.value.version == len(RUNTIME_MIGRATIONS) + 1 and "work_items" in str(err.value)
    assert current_version(db) == len(RUNTIME_MIGRATIONS)
    assert "extra" not in db.table_names()  # the whole migration rolled back


def test_worker_start_on_a_newer_schema_is_recovery_failed_and_clears_nothing(tmp_path):
    ctx = make_ctx(tmp_path)
    work_id = submit(ctx)
    with tx(ctx.db):
        ctx.db.conn.execute("INSERT INTO schema_version VALUES (99, 0)")
    env = {"RK_IMPL_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "recoverykit.impl.worker"], env=env, capture_output=True, timeout=60)
    assert done.returncode == 3, done.stderr
    state = json.loads((tmp_path / "recovery_failed.json").read_text())
    assert state["reason_code"] == "recovery_failed_migration" and "99" in state["text"]
    snap = observe.snapshot(tmp_path)  # a schema this runtime does not know is not interpreted: its state says so
    assert snap["storage"]["state"] == "migration_failed" and snap["work_items"] is None
    assert snap["storage"]["reason_code"] == "recovery_failed_migration" and "retry" in snap["storage"]["actions"]
    assert [r["work_id"] for r in rows(ctx.db, "SELECT * FROM inputs")] == [work_id]


def test_unreadable_database_is_storage_unavailable(tmp_path):
    (tmp_path / "runtime.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StorageUnavailable):
        open_runtime_db(tmp_path)
    storage = observe.snapshot(tmp_path)["storage"]
    assert (storage["state"], storage["reason_code"]) == ("unreadable", "recovery_failed_storage_unavailable")
    assert (tmp_path / "runtime.db").read_bytes() == b"this is not a database" * 100  # left exactly as it was


def test_lost_projection_events_are_explicit_and_rebuildable(tmp_path):
    ctx = make_ctx(tmp_path)
    submit(ctx)
    assert project(ctx.db) > 0
    with tx(ctx.db):
        ctx.db.conn.execute("UPDATE meta SET value='100000' WHERE key='projection_cursor'")
    with pytest.raises(ProjectionLost):
        project(ctx.db)
    state = json.loads(one(ctx.db, "SELECT value FROM meta WHERE key='projection_state'")["value"])
    assert state["reason_code"] == "projection_events_lost" and state["actions"] == ["Rebuild"]
    assert rebuild(ctx.db) == one(ctx.db, "SELECT MAX(seq) AS m FROM events")["m"]
    assert len(rows(ctx.db, "SELECT * FROM inputs")) == 1  # the original records are untouched


# --- admission: fairness and quota ----------------------------------------------------------------------


def _worker_view(ctx: Ctx):
    from recoverykit.impl.worker import Worker
    view = Worker.__new__(Worker)  # only the scheduling query, without sockets or signals
    view.ctx = ctx
    return view


def test_admission_is_fair_across_sessions_and_ordered_within_one(tmp_path):
    ctx = make_ctx(tmp_path)
    a1, a2 = (control.submit(ctx.db, ctx.cfg, "A", "x", m)["work_id"] for m in ("a1", "a2"))
    b1 = control.submit(ctx.db, ctx.cfg, "B", "x", "b1")["work_id"]
    view = _worker_view(ctx)
    assert [w["work_id"] for w in view.candidates()] == [a1, b1]  # a2 waits behind a1 in its session
    assert recovery.claim(ctx, a1) == 1
    with tx(ctx.db):
        ctx.db.conn.execute("UPDATE work_items SET status='finished', desired_state='done' WHERE work_id=?", (a1,))
        ctx.db.conn.execute("UPDATE leases SET released=1")
    assert [w["work_id"] for w in view.candidates()] == [b1, a2]  # session A was just served: B goes first


def test_concurrency_quota_is_shared_by_all_workers(tmp_path):
    ctx = make_ctx(tmp_path, concurrency=1)
    first = control.submit(ctx.db, ctx.cfg, "A", "x", "a1")["work_id"]
    second = control.submit(ctx.db, ctx.cfg, "B", "x", "b1")["work_id"]
    assert recovery.claim(ctx, first) == 1
    other = make_ctx(tmp_path, concurrency=1)
    assert recovery.claim(other, second) is None  # the quota is full while the first owner lives
    assert one(ctx.db, "SELECT status FROM work_items WHERE work_id=?", (second,))["status"] == "queued"


def test_an_internal_fault_becomes_a_bounded_durable_retry_then_pending_recovery(tmp_path, monkeypatch):
    from recoverykit.impl import worker as worker_module
    ctx = make_ctx(tmp_path, retry_delays_s=[5.0, 10.0])
    work_id = submit(ctx)
    view = _worker_view(ctx)

    def broken(*args, **kwargs):
        raise RuntimeError("simulated defect")

    monkeypatch.setattr(worker_module, "provider_step", broken)
    for attempt in (1, 2, 3):
        with tx(ctx.db):  # the retry time has come (as if the clock moved on)
            ctx.db.conn.execute("UPDATE work_items SET retry_at=0 WHERE work_id=?", (work_id,))
        gen = recovery.claim(ctx, work_id)
        assert gen == attempt
        view.run_item(work_id, gen)
        got = item(ctx, work_id)
        if attempt < 3:
            assert (got["status"], got["reason_code"], got["retry_count"]) == ("waiting", "retry_scheduled", attempt)
            assert got["retry_at"] > 0 and "simulated defect" in got["reason_text"]
    assert (got["status"], got["reason_code"]) == ("waiting", "retry_exhausted")
    assert json.loads(one(ctx.db, "SELECT actions FROM pending_recovery")["actions"]) == ["Retry", "Pause", "End"]
    assert recovery.claim(ctx, work_id) is None  # no idle retries once a person must act
    control.control(ctx.db, "resume", work_id)  # the Retry action
    assert recovery.claim(ctx, work_id) == 4


def test_a_result_without_its_call_is_never_sent(tmp_path):
    sent = _sent_after(tmp_path, ("tool", "orphan", "call_nobody_made", "real"), ("user", "second", None, "real"))
    assert sent == [{"role": "user", "content": "hello"}, {"role": "user", "content": "second"}]


def test_waking_a_busy_worker_never_blocks_the_control_process(tmp_path):
    import socket

    from recoverykit.impl.worker import wake_all
    busy = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # a worker that is not reading its pokes
    busy.bind(str(tmp_path / "wake-1.sock"))
    try:
        done = threading.Event()

        def poke():
            for _ in range(5000):  # far more than any datagram queue holds
                wake_all(tmp_path)
            done.set()

        threading.Thread(target=poke, daemon=True).start()
        assert done.wait(60), "wake_all blocked on a full wake queue (a submit would hang with it)"
        assert busy.recv(8) == b"w"
    finally:
        busy.close()


def test_controls_on_a_database_at_an_unknown_schema_are_refused_definitely(tmp_path):
    ctx = make_ctx(tmp_path)
    with tx(ctx.db):
        ctx.db.conn.execute("INSERT INTO schema_version VALUES (99, 0)")
    with pytest.raises(control.ControlError) as err:
        control._open(ctx.cfg)
    assert (err.value.code, err.value.definite) == ("temporarily_unavailable", True)
    assert "recovery_failed_migration" in err.value.text
    (tmp_path / "runtime.db").unlink()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"runtime.db{suffix}").unlink(missing_ok=True)
    (tmp_path / "runtime.db").write_bytes(b"garbage" * 1000)
    with pytest.raises(control.ControlError, match="recovery_failed_storage_unavailable"):
        control._open(ctx.cfg)
