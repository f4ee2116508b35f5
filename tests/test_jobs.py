"""The Jobs profile's pieces: checks_jobs on hand-made evidence, and the reference runtime's ``job_start`` on a store.

The end-to-end run (certify's ``job_restart``, chaos over it, each Job mutant killed naming its clause) is in
tests/test_mutants.py and benchmarks; these tests pin what they rest on, without starting a process.
"""

from __future__ import annotations

import pytest
from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.checks_jobs import check_delivery, check_provenance, check_receipts, check_subtasks
from recoverykit.conformance.history import Recorder
from recoverykit.conformance.provider_script import script_tag
from recoverykit.model.catalogue import Verdict


def _run(requests: list[tuple[str, int, float, float, str | None]], *, quota: int = 1, session: str = "s-job",
         observed: list[dict] | None = None, receipts: list[dict] | None = None) -> Evidence:
    """A caller c1 in session s-c, a Job j1 with subtasks a and b (script jp), then ``requests``: (script, step,
    asked at, answered at, text of the answer) on the ledger."""
    clock = iter(range(100, 10_000))
    rec = Recorder(clock=lambda: float(next(clock)))
    sub = rec.invoke("submit", {"session_id": "s-c", "text": f"{script_tag('c')} go", "client_msg_id": "m1"})
    rec.complete(sub, "ok", {"work_id": "c1", "input_id": "i1"})
    start = rec.invoke("job_start", {"caller_work_id": "c1", "session_id": session, "text": f"{script_tag('jp')} x",
                                     "subtasks": [f"{script_tag('a')} 1", f"{script_tag('b')} 2"],
                                     "concurrency": quota, "client_job_id": "k"})
    rec.complete(start, "ok", {"job_id": "j1"})
    steps = {"a": 2, "b": 2, "jp": 1}
    ledger = []
    for seq, (sid, step, asked, answered, text) in enumerate(requests, start=1):
        messages = [{"role": "user", "head": t, "len": len(t)} for t in (text or "").split("|") if t]
        ledger.append({"event": "request", "seq": seq, "time": asked, "script_id": sid, "step": step,
                       "script_steps": steps[sid], "request_id": f"r{seq}", "response_id": f"chatcmpl-{seq}",
                       "messages": messages if sid == "jp" else []})
        ledger.append({"event": "response", "seq": seq, "time": answered, "delivered": True,
                       "text_sent": None if sid == "jp" else f"result of {sid}"})
    rec.observe({"work_items": observed or [], "usage_receipts": receipts})
    return Evidence(rec.history, ledger, None, frozenset({"work_items", "usage_receipts"}))


def _verdict(results, clause_id: str) -> Verdict:
    return next(r.verdict for r in results if r.clause_id == clause_id)


DONE = [("a", 0, 1.0, 1.1, None), ("a", 1, 1.2, 1.3, None), ("b", 0, 1.4, 1.5, None), ("b", 1, 1.6, 1.7, None),
        ("jp", 0, 1.8, 1.9, "[1] result of a|[2] result of b")]


def test_subtasks_started_once_within_the_quota_hold():
    ev = _run(DONE)
    assert _verdict(check_subtasks(ev), "JOB-01") is Verdict.VALID
    assert _verdict(check_delivery(ev), "FA-07") is Verdict.VALID


def test_a_subtask_asked_its_first_step_again_after_going_on_is_an_additional_subtask():
    ev = _run([*DONE[:2], ("a", 0, 1.35, 1.36, None), ("a", 1, 1.37, 1.38, None), *DONE[2:]])
    assert _verdict(check_subtasks(ev), "JOB-01") is Verdict.INVALID


def test_a_first_request_sent_again_after_a_lost_answer_is_the_same_subtask():
    ev = _run([("a", 0, 0.9, 0.95, None), *DONE])
    assert _verdict(check_subtasks(ev), "JOB-01") is Verdict.VALID


def test_two_subtasks_at_once_under_a_quota_of_one_break_it_and_not_under_two():
    overlap = [("a", 0, 1.0, 1.1, None), ("b", 0, 1.15, 1.2, None), ("a", 1, 1.25, 1.3, None),
               ("b", 1, 1.35, 1.4, None), ("jp", 0, 1.8, 1.9, "result of a|result of b")]
    assert _verdict(check_subtasks(_run(overlap)), "JOB-01") is Verdict.INVALID
    assert _verdict(check_subtasks(_run(overlap, quota=2)), "JOB-01") is Verdict.VALID


@pytest.mark.parametrize("carried, verdict", [("result of a|result of a|result of b", Verdict.INVALID),
                                              ("result of b", Verdict.INVALID),
                                              ("result of a|result of b", Verdict.VALID)])
def test_each_subtask_answer_reaches_the_job_once(carried, verdict):
    ev = _run([*DONE[:4], ("jp", 0, 1.8, 1.9, carried)])
    assert _verdict(check_delivery(ev), "FA-07") is verdict


def test_provenance_and_the_cross_session_parent_are_judged_on_the_runtime_s_word():
    job = {"work_id": "j1", "parent_id": None, "provenance": "c1"}
    child = {"work_id": "j1.c0", "parent_id": "j1", "provenance": "c1"}
    good = check_provenance(_run(DONE, observed=[job, child]))
    assert _verdict(good, "JOB-02") is Verdict.VALID and _verdict(good, "JOB-03") is Verdict.VALID
    bad = check_provenance(_run(DONE, observed=[dict(job, parent_id="c1"), dict(child, provenance="c2")]))
    assert _verdict(bad, "JOB-02") is Verdict.INVALID and _verdict(bad, "JOB-03") is Verdict.INVALID
    unsaid = check_provenance(_run(DONE, observed=[{"work_id": "j1", "parent_id": None}]))
    assert _verdict(unsaid, "JOB-02") is Verdict.UNKNOWN
    same_session = check_provenance(_run(DONE, session="s-c", observed=[dict(job, parent_id="c1"), child]))
    assert _verdict(same_session, "JOB-03") is Verdict.UNKNOWN


def test_receipts_of_a_job_s_requests_carry_the_job():
    receipts = [{"receipt_id": f"r{n}", "request_id": f"r{n}", "job_id": "j1"} for n in range(1, 6)]
    assert _verdict(check_receipts(_run(DONE, receipts=receipts)), "JOB-04") is Verdict.VALID
    receipts[1] = dict(receipts[1], job_id=None)
    assert _verdict(check_receipts(_run(DONE, receipts=receipts)), "JOB-04") is Verdict.INVALID
    untold = [{"receipt_id": "r1", "request_id": "r1"}]
    assert _verdict(check_receipts(_run(DONE, receipts=untold)), "JOB-04") is Verdict.UNKNOWN


def test_no_job_started_judges_nothing():
    rec = Recorder()
    ev = Evidence(rec.history, [], None, frozenset())
    for results in (check_subtasks(ev), check_delivery(ev), check_provenance(ev), check_receipts(ev)):
        assert {r.verdict for r in results} == {Verdict.UNKNOWN}


def test_job_start_is_saved_once_per_client_id_and_refuses_an_unknown_caller(tmp_path):
    from recoverykit.impl import jobs
    from recoverykit.impl.config import Config
    from recoverykit.impl.control import submit
    from recoverykit.impl.schema import open_runtime_db

    cfg = Config(data_dir=str(tmp_path))
    cfg.save()
    db = open_runtime_db(tmp_path)
    try:
        caller = submit(db, cfg, "s-c", "go", "m1")["work_id"]
        first = jobs.start(db, cfg, caller, "s-job", "x", ["one", "two"], 1, "k")
        assert jobs.start(db, cfg, caller, "s-job", "x", ["one", "two"], 1, "k") == first
        row = db.conn.execute("SELECT kind, parent_id, provenance FROM work_items WHERE work_id=?",
                              (first["job_id"],)).fetchone()
        assert tuple(row) == ("job", None, caller)  # another session: provenance, no canonical parent
        same = jobs.start(db, cfg, caller, "s-c", "x", ["one"], 1, "k2")
        assert db.conn.execute("SELECT parent_id FROM work_items WHERE work_id=?",
                               (same["job_id"],)).fetchone()[0] == caller
        with pytest.raises(jobs.JobError) as refused:
            jobs.start(db, cfg, "w-nobody", "s-job", "x", ["one"], 1, "k3")
        assert refused.value.code == "unknown_work_item"
    finally:
        db.conn.close()
