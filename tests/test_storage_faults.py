"""Storage faults: the checks fail on bad evidence and pass on good, the kit's fault restores byte for byte,
the protocol admits null sections only while the store is faulted, and the reference runtime never touches a
store it cannot read or migrate. No process is started here: the end-to-end runs are certify's scenarios."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest
from recoverykit.conformance import storage_fault
from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_storage import check_storage_faults
from recoverykit.conformance.errors import ProtocolError
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.protocol import check_snapshot
from recoverykit.conformance.protocol_snapshot import Section, Snapshot
from recoverykit.conformance.witness import Execution, WitnessLog
from recoverykit.impl import observe, schema
from recoverykit.model.catalogue import StorageFault, Verdict

UNREADABLE = {"state": "unreadable", "reason_code": "recovery_failed_storage_unavailable",
              "actions": ["retry", "restore_backup"], "text": "runtime.db cannot be read"}
OK = {"state": "ok", "reason_code": None, "actions": [], "text": ""}
ITEM = {"work_id": "w1", "status": "finished", "desired_state": "done",
        "inputs": [{"input_id": "i1", "client_msg_id": "c-su-1", "text": "hi"}]}


def _evidence(*, found="B", during=UNREADABLE, final=OK, final_items=(ITEM,), lease_during=None, restore=True,
              retry=True, request_during=False, request_after=True, tool_during=False, kind="unreadable"):
    """A storage-fault run at fixed times: fault 10, start 11, observe 12, restore 13, retry 14, final 16."""
    rec = Recorder(clock=lambda: rec.now)
    rec.now = 1.0
    op = rec.invoke("submit", {"session_id": "s", "text": "[[rk-script:su]] hi", "client_msg_id": "c-su-1"})
    rec.complete(op, "ok", {"work_id": "w1", "input_id": "i1"})
    rec.now = 5.0
    rec.observe({"work_items": [], "leases": [{"work_id": "w1", "generation": 1}], "storage": OK})
    rec.now = 10.0
    rec.fault(storage_fault.FAULT, fault=kind, script="su", work_id="w1",
              files={"runtime.db": {"original": "A", "damaged": "B", "size": 4096}})
    rec.now = 11.0
    op = rec.invoke("start", {})
    rec.complete(op, "ok", {})
    rec.now = 12.0
    rec.observe({"work_items": None, "leases": lease_during, "storage": during})
    if restore:
        rec.now = 13.0
        rec.fault(storage_fault.RESTORE, fault=kind, found={"runtime.db": found}, intact=found == "B")
        if retry:
            rec.now = 14.0
            op = rec.invoke("start", {})
            rec.complete(op, "ok", {})
        rec.now = 16.0
        rec.observe({"work_items": list(final_items), "leases": [], "storage": final}, True)
    ledger = [{"event": "request", "seq": 1, "time": 2.0, "script_id": "su"}]
    if request_during:
        ledger.append({"event": "request", "seq": 2, "time": 12.5, "script_id": "su"})
    if request_after:
        ledger.append({"event": "request", "seq": 3, "time": 15.0, "script_id": "su"})
    executions = [Execution("su.1.1.0", "probe_read", "read_only", 99, 12.4, 12.5, None, None, None)] \
        if tool_during else []
    return Evidence(rec.history, ledger, WitnessLog([], executions, None) if tool_during else None, frozenset())


def _v(ev):
    return {r.clause_id: r.verdict for r in check_storage_faults(ev)}


def test_an_honest_storage_fault_run_holds_all_three_clauses():
    assert _v(_evidence()) == {"REC-01": Verdict.VALID, "OWN-04": Verdict.VALID, "RES-05": Verdict.VALID}
    texts = {r.clause_id: r.text for r in check_storage_faults(_evidence())}
    assert "storage part" in texts["OWN-04"] and "storage part" in texts["RES-05"]
    assert "kit evidence" in texts["REC-01"]


def test_a_newer_schema_is_judged_by_its_own_state():
    migration = {**UNREADABLE, "state": "migration_failed", "reason_code": "recovery_failed_migration"}
    assert set(_v(_evidence(kind="newer_schema", during=migration)).values()) == {Verdict.VALID}
    assert _v(_evidence(kind="newer_schema"))["RES-05"] is Verdict.INVALID  # shown as unreadable: not the fault


@pytest.mark.parametrize(("bad", "clause"), [
    ({"found": None}, "REC-01"),  # the faulted file is gone: the store was cleared
    ({"found": "C"}, "REC-01"),  # rewritten
    ({"found": "C"}, "OWN-04"),  # a write reached the store it could not read
    ({"during": OK}, "REC-01"),  # no recovery failure shown (an empty new store, say)
    ({"during": {**UNREADABLE, "reason_code": "paused_unknown_reason"}}, "REC-01"),
    ({"final_items": ()}, "REC-01"),  # acknowledged work gone after the retry
    ({"request_during": True}, "OWN-04"),  # a model request while the store was unreadable
    ({"tool_during": True}, "OWN-04"),  # a tool started
    ({"lease_during": [{"work_id": "w1", "generation": 2}]}, "OWN-04"),  # a new lease
    ({"during": {**UNREADABLE, "actions": []}}, "RES-05"),  # no recoverable action
    ({"during": {**UNREADABLE, "state": "migration_failed"}}, "RES-05"),  # the wrong fault named
    ({"final": UNREADABLE}, "RES-05"),  # retry taken, store back, still failed
    ({"request_after": False}, "RES-05"),  # the held work never went on
    ({"final_items": ({**ITEM, "inputs": []},)}, "RES-05"),  # its input cleared
])
def test_each_check_fails_on_bad_evidence(bad, clause):
    assert _v(_evidence(**bad))[clause] is Verdict.INVALID


@pytest.mark.parametrize("missing", [{"restore": False}, {"retry": False}])
def test_missing_evidence_is_unknown_never_valid(missing):
    verdicts = _v(_evidence(**missing))
    assert Verdict.VALID not in {verdicts["RES-05"]} and verdicts["RES-05"] is Verdict.UNKNOWN
    if "restore" in missing:
        assert verdicts["REC-01"] is Verdict.UNKNOWN and verdicts["OWN-04"] is Verdict.UNKNOWN


def test_a_run_without_a_storage_fault_judges_nothing():
    rec = Recorder()
    rec.observe({"work_items": []})
    assert check_storage_faults(Evidence(rec.history, [], None, frozenset())) == []


# --- the kit's fault itself ------------------------------------------------------------------------


def _store(data: Path) -> None:
    with contextlib.closing(sqlite3.connect(str(data / "runtime.db"), isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("PRAGMA user_version = 3")


def _run(tmp_path: Path, files=("runtime.db",), schema_version="sqlite_user_version"):
    data = tmp_path / "data"
    data.mkdir(parents=True, exist_ok=True)
    decl = SimpleNamespace(files=list(files), schema_version=schema_version)
    return SimpleNamespace(init_ok=SimpleNamespace(storage=decl), data_dir=data, run_dir=tmp_path, recorder=Recorder())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_unreadable_inverts_the_head_and_restores_byte_for_byte(tmp_path):
    run = _run(tmp_path)
    _store(run.data_dir)
    before = _sha(run.data_dir / "runtime.db")
    applied = storage_fault.apply(run, StorageFault.UNREADABLE, script="su")
    assert applied.files["runtime.db"]["original"] == before != applied.files["runtime.db"]["damaged"]
    with pytest.raises(schema.StorageUnavailable):
        schema.check_readable(run.data_dir / "runtime.db")
    out = storage_fault.restore(run, applied)
    assert out["restored"]["runtime.db"] == before and _sha(run.data_dir / "runtime.db") == before
    kinds = [f.kind for f in run.recorder.history.faults]
    assert kinds == [storage_fault.FAULT, storage_fault.RESTORE] and run.recorder.history.faults[1].detail["intact"]


def test_a_store_the_runtime_replaced_gets_the_kits_copy_back(tmp_path):
    run = _run(tmp_path)
    _store(run.data_dir)
    before = _sha(run.data_dir / "runtime.db")
    applied = storage_fault.apply(run, StorageFault.UNREADABLE)
    (run.data_dir / "runtime.db").write_bytes(b"")  # "start again with an empty store"
    storage_fault.restore(run, applied)
    assert not run.recorder.history.faults[1].detail["intact"]
    assert _sha(run.data_dir / "runtime.db") == before


def test_newer_schema_raises_user_version_by_one_and_lowers_it_again(tmp_path):
    run = _run(tmp_path)
    _store(run.data_dir)
    applied = storage_fault.apply(run, StorageFault.NEWER_SCHEMA)

    def version() -> int:
        with contextlib.closing(sqlite3.connect(str(run.data_dir / "runtime.db"))) as conn:
            return conn.execute("PRAGMA user_version").fetchone()[0]
    assert applied.user_version == 3 and version() == 4
    storage_fault.restore(run, applied)
    assert version() == 3


def test_newer_schema_needs_its_declaration(tmp_path):
    assert storage_fault.supports(_run(tmp_path, schema_version=None), StorageFault.NEWER_SCHEMA)
    assert storage_fault.supports(_run(tmp_path, schema_version=None), StorageFault.UNREADABLE) is None
    assert storage_fault.supports(SimpleNamespace(init_ok=SimpleNamespace(storage=None)), StorageFault.UNREADABLE)


@pytest.mark.parametrize("name", ["../outside.db", "/etc/passwd", "link.db"])
def test_the_kit_never_touches_a_file_outside_the_data_dir(tmp_path, name):
    run = _run(tmp_path, files=(name,))
    (tmp_path / "outside.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    os.symlink(tmp_path / "outside.db", run.data_dir / "link.db")
    with pytest.raises(storage_fault.StorageDeclRefused):
        storage_fault.apply(run, StorageFault.UNREADABLE)
    assert (tmp_path / "outside.db").read_bytes().startswith(b"SQLite format 3")


# --- the protocol ----------------------------------------------------------------------------------


def test_declared_sections_may_be_null_only_while_the_store_is_faulted():
    faulted = Snapshot.model_validate({"work_items": None, "storage": UNREADABLE}, strict=False)
    check_snapshot(faulted, [Section.WORK_ITEMS], storage_declared=True)
    with pytest.raises(ProtocolError):
        check_snapshot(Snapshot.model_validate({"work_items": None, "storage": OK}, strict=False),
                       [Section.WORK_ITEMS], storage_declared=True)
    with pytest.raises(ProtocolError):  # declared but not sent
        check_snapshot(Snapshot.model_validate({"work_items": []}, strict=False), [Section.WORK_ITEMS],
                       storage_declared=True)
    with pytest.raises(ProtocolError):  # sent but not declared
        check_snapshot(faulted, [Section.WORK_ITEMS], storage_declared=False)


# --- the reference runtime ---------------------------------------------------------------------------


def test_the_reference_refuses_a_newer_schema_before_writing_anything(tmp_path):
    db = schema.open_runtime_db(tmp_path)
    db.conn.execute(f"PRAGMA user_version = {len(schema.RUNTIME_MIGRATIONS) + 1}")
    db.conn.close()
    before = _sha(tmp_path / "runtime.db")
    with pytest.raises(schema.MigrationFailed):
        schema.open_runtime_db(tmp_path)
    assert _sha(tmp_path / "runtime.db") == before
    state = observe.storage_state(tmp_path)
    assert state["state"] == "migration_failed" and "retry" in state["actions"]
    assert observe.snapshot(tmp_path)["work_items"] is None


def test_the_reference_reports_an_unreadable_store_and_reads_nothing(tmp_path):
    schema.open_runtime_db(tmp_path).conn.close()
    path = tmp_path / "runtime.db"
    head = path.read_bytes()[:100]
    with path.open("r+b") as f:
        f.write(bytes(b ^ 0xFF for b in head))
    snap = observe.snapshot(tmp_path)
    assert snap["storage"]["state"] == "unreadable" and snap["storage"]["reason_code"] == \
        "recovery_failed_storage_unavailable"
    assert snap["work_items"] is None and observe.pending(tmp_path) == []


# --- a runtime that plants links while the fault is in place (issue 27, item 1) ----------------------------


def _outside(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A directory outside the run holding a 0600 file: what a planted link points at."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"someone else's bytes\n")
    (outside / "victim").chmod(0o600)
    return outside, {p.name: p.read_bytes() for p in outside.iterdir()}


@pytest.mark.parametrize("fault", list(StorageFault))
def test_a_restore_never_writes_through_a_link_the_runtime_planted(tmp_path, fault):
    run = _run(tmp_path / "run")
    _store(run.data_dir)
    before = _sha(run.data_dir / "runtime.db")
    outside, kept = _outside(tmp_path)
    applied = storage_fault.apply(run, fault)
    # the runtime, running on the faulted store: a link at the name the kit's copy took, and one byte changed
    for name in ("runtime.db.rk-restore", "runtime.db-wal.rk-restore", ".runtime.db.rk-restore"):
        os.symlink(outside / "victim", run.data_dir / name)
    with (run.data_dir / "runtime.db").open("r+b") as f:
        f.seek(200)
        f.write(b"\x01")
    storage_fault.restore(run, applied)
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == kept  # byte for byte, and nothing beside it
    assert (outside / "victim").stat().st_mode & 0o777 == 0o600
    if fault is StorageFault.UNREADABLE:
        assert _sha(run.data_dir / "runtime.db") == before
    assert not (run.data_dir / "runtime.db").is_symlink()


def test_a_restore_refuses_a_store_directory_the_runtime_turned_into_a_link(tmp_path):
    run = _run(tmp_path / "run", files=("db/runtime.db",))
    (run.data_dir / "db").mkdir()
    with contextlib.closing(sqlite3.connect(str(run.data_dir / "db" / "runtime.db"))) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
    outside, _ = _outside(tmp_path)
    applied = storage_fault.apply(run, StorageFault.UNREADABLE)
    (outside / "runtime.db").write_bytes(b"the outside store\n")
    kept = {p.name: p.read_bytes() for p in outside.iterdir()}
    os.rename(run.data_dir / "db", tmp_path / "moved")
    os.symlink(outside, run.data_dir / "db")  # the store's directory now leads out of the run
    out = storage_fault.restore(run, applied)
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == kept
    assert out["found"]["db/runtime.db"] is None and "db/runtime.db" in out["refused"]


def test_a_restore_never_inverts_a_hard_link_to_a_file_outside(tmp_path):
    run = _run(tmp_path / "run")
    _store(run.data_dir)
    before = _sha(run.data_dir / "runtime.db")
    applied = storage_fault.apply(run, StorageFault.UNREADABLE)
    outside = tmp_path / "outside.db"
    os.link(run.data_dir / "runtime.db", outside)  # same bytes as the damaged store, one inode, two names
    kept = outside.read_bytes()
    storage_fault.restore(run, applied)
    assert outside.read_bytes() == kept and _sha(run.data_dir / "runtime.db") == before


@pytest.mark.parametrize("trap", ["file_link", "dir_link", "fifo"])
def test_the_kits_planted_work_never_goes_through_a_link_the_runtime_planted(tmp_path, trap):
    """The same rule for the other file the kit writes into a runtime's data dir (``disk.plant``, RTY-08)."""
    from recoverykit.conformance import disk
    run = _run(tmp_path / "run")
    outside, kept = _outside(tmp_path)
    if trap == "dir_link":
        os.symlink(outside, run.data_dir / "ws")  # the workspace leads out of the run
    else:
        (run.data_dir / "ws").mkdir()
        if trap == "file_link":
            os.symlink(outside / "victim", run.data_dir / "ws" / disk.PLANTED_NAME)
    rel = disk.plant(run, "ws", "agent work")
    if trap == "fifo":  # later, in place of the planted file: the inspection must not block on it
        os.unlink(run.data_dir / rel)
        os.mkfifo(run.data_dir / rel)
        assert disk.inspect(run, "after")["kept"] == {rel: None}
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == kept
    if trap == "dir_link":
        assert rel is None
    elif trap == "file_link":
        assert not (run.data_dir / rel).is_symlink() and (run.data_dir / rel).read_bytes().startswith(b"work in")
