"""Goal acceptance: prechecks, one independent read-only verifier request, then achieved under optimistic concurrency.

Seed 000 ("Todo and acceptance"): acceptance first checks the current revision, required Todo, unfinished
subtasks and relevant unknown effects; only then does it run one independent, read-only review. Here the review
is a separate provider request marked ``X-Recoverykit-Role: verifier`` that offers no tools, sees the objective,
the requirements and the evidence (each worker answer, by ``step:N``, with the digest of its text as its
version), and answers met / unmet / unknown per requirement with evidence references. Its report is an internal
record (``goal_acceptances``), never a chat message. A requirement called met without evidence that resolves is
unknown (missing evidence), which sends the Goal back to work. Achieved is committed only if the Goal's
revision, its goal version and the work item's control version are those the acceptance was made for, and the
evidence digests are unchanged, in one fenced transaction with the terminal snapshot and transcript anchor.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid

from . import goal_timer, reservations
from .engine import Ctx, Interrupted, check_intent, drain_outbox, never_sent, release, schedule_retry, settle_usage
from .failpoints import failpoint
from .provider import ProviderFault, Request
from .store import emit, fenced, now, one, rows, set_status

ROLE_HEADER = "X-Recoverykit-Role"
VERDICTS = ("met", "unmet", "unknown")
SYSTEM = ("You are an independent verifier of a Goal. You may not change anything. For each requirement answer "
          'met, unmet or unknown with evidence references, as JSON: {"requirements": {"<id>": {"verdict": "met", '
          '"evidence": ["step:N"]}}}.')


def precheck(ctx: Ctx, g: dict) -> str | None:
    """Why acceptance cannot run yet (back to work), or None."""
    open_required = one(ctx.db, "SELECT COUNT(*) AS n FROM goal_todo WHERE goal_id=? AND required=1 AND done=0"
                                " AND removed=0", (g["goal_id"],))["n"]
    if open_required:
        return f"{open_required} required Todo item(s) are not done"
    subtasks = one(ctx.db, "SELECT COUNT(*) AS n FROM work_items WHERE parent_id=? AND desired_state NOT IN"
                           " ('done','cancelled')", (g["work_id"],))["n"]
    if subtasks:
        return f"{subtasks} subtask(s) are unfinished"
    unknown = one(ctx.db, "SELECT COUNT(*) AS n FROM tool_calls WHERE work_id=? AND status='outcome_unknown' AND"
                          " effect_class='unknown'", (g["work_id"],))["n"]
    if unknown:
        return f"{unknown} effect(s) with an unknown outcome are not reconciled"
    return None


def evidence_of(ctx: Ctx, work_id: str) -> list[dict]:
    answers = rows(ctx.db, "SELECT msg_seq, content FROM messages WHERE work_id=? AND role='assistant' AND"
                           " origin='real' ORDER BY msg_seq", (work_id,))
    return [{"ref": f"step:{i}", "msg_seq": a["msg_seq"],
             "sha": hashlib.sha256((a["content"] or "").encode()).hexdigest()[:16], "text": a["content"] or ""}
            for i, a in enumerate(answers)]


def run(ctx: Ctx, item: dict, gen: int, g: dict) -> str:
    """One acceptance of the Goal as it is now: ``achieved`` or ``work`` (back to another work turn)."""
    work_id = item["work_id"]
    why = precheck(ctx, g)
    if why is not None:
        back_to_work(ctx, item, gen, g, why)
        return "work"
    failpoint("acceptance.verifier.before", work_id)
    evidence = evidence_of(ctx, work_id)
    requirements = rows(ctx.db, "SELECT req_id, text FROM goal_requirements WHERE goal_id=? AND waived_reason IS NULL"
                                " ORDER BY req_id", (g["goal_id"],))
    content, request_id = _ask_verifier(ctx, item, gen, g, requirements, evidence)
    failpoint("acceptance.verifier.after", work_id)
    verdicts, outcome = judge(content, requirements, evidence)
    acceptance_id = f"acc-{uuid.uuid4().hex[:12]}"
    anchor = max((e["msg_seq"] for e in evidence), default=0)
    with fenced(ctx.db, work_id, gen, "acceptance.record"):
        cv = one(ctx.db, "SELECT control_version FROM work_items WHERE work_id=?", (work_id,))["control_version"]
        ctx.db.conn.execute("INSERT INTO goal_acceptances VALUES (?,?,?,?,?,?,?,?,?,1,?)",
                            (acceptance_id, g["goal_id"], g["revision"], g["goal_version"], cv, anchor, request_id,
                             outcome, json.dumps(verdicts, sort_keys=True), now()))
        ctx.db.conn.execute("UPDATE goals SET acceptance_id=? WHERE goal_id=? AND revision=?",
                            (acceptance_id, g["goal_id"], g["revision"]))
        emit(ctx.db, work_id, "goal_acceptance", goal_id=g["goal_id"], revision=g["revision"], outcome=outcome,
             request_id=request_id)
    if outcome != "met":
        back_to_work(ctx, item, gen, g, f"acceptance found the Goal {outcome}")
        return "work"
    failpoint("acceptance.achieve.before", work_id)
    return achieve(ctx, item, gen, g, acceptance_id)


def judge(content: str, requirements: list[dict], evidence: list[dict]) -> tuple[dict, str]:
    """Per requirement: the verdict and the evidence it rests on (ref, message, version); met without evidence that
    resolves is unknown. The outcome: met only if every requirement is met."""
    try:
        doc = json.loads(content)
        said = doc.get("requirements") if isinstance(doc, dict) else None
    except ValueError:
        said = None
    said = said if isinstance(said, dict) else {}
    by_ref = {e["ref"]: e for e in evidence}
    out = {}
    for r in requirements:
        entry = said.get(r["req_id"]) if isinstance(said.get(r["req_id"]), dict) else {}
        verdict = entry.get("verdict") if entry.get("verdict") in VERDICTS else "unknown"
        refs = [by_ref[x] for x in entry.get("evidence") or [] if isinstance(x, str) and x in by_ref]
        if verdict == "met" and not refs:
            verdict = "unknown"  # missing evidence is never a fabricated acceptance
        out[r["req_id"]] = {"verdict": verdict, "evidence": [{"ref": e["ref"], "msg_seq": e["msg_seq"],
                                                              "version": e["sha"]} for e in refs]}
    verdicts = [v["verdict"] for v in out.values()]
    outcome = "met" if verdicts and all(v == "met" for v in verdicts) else (
        "unmet" if "unmet" in verdicts else "unknown")
    return out, outcome


def _ask_verifier(ctx: Ctx, item: dict, gen: int, g: dict, requirements: list[dict],
                  evidence: list[dict]) -> tuple[str, str]:
    """The verifier request: a paid attempt of its own (receipt attributed to the Goal), no tools offered."""
    work_id = item["work_id"]
    n = one(ctx.db, "SELECT COUNT(*) AS n FROM provider_requests WHERE work_id=? AND step=-1", (work_id,))["n"] + 1
    request_id, turn_id = f"{work_id}.v{n}", f"{work_id}.acceptance"
    with fenced(ctx.db, work_id, gen, "acceptance.dispatch"):
        check_intent(ctx, work_id)
        ctx.db.conn.execute("INSERT INTO provider_requests VALUES (?,?,?,?,?,'dispatched',?)",
                            (request_id, work_id, turn_id, -1, n, now()))
        payload = {"request_id": request_id, "work_id": work_id, "session_id": item["session_id"],
                   "turn_id": turn_id, "attempt": n, "objective_revision": g["revision"],
                   "reservation": reservations.plan(ctx.db, ctx.udb, work_id)}  # under a hard budget only
        ctx.db.conn.execute("INSERT INTO outbox VALUES (?,?,?,'pending',?,NULL)",
                            (f"usage.open:{request_id}", "usage.open", json.dumps(payload), now()))
        emit(ctx.db, work_id, "verifier_request", request_id=request_id, revision=g["revision"])
    drain_outbox(ctx)
    if not reservations.start(ctx.udb, request_id):  # expired unstarted: never sent (not reached in practice)
        never_sent(ctx, work_id, gen, request_id)
        raise RuntimeError(f"the reservation of {request_id} expired before it was sent")  # a bounded retry
    listing = "\n".join(f"- {r['req_id']}: {r['text']}" for r in requirements)
    shown = "\n".join(f"- {e['ref']} (version {e['sha']}): {e['text'][:400]}" for e in evidence)
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Objective (revision {g['revision']}):\n{g['objective']}\n\n"
                                            f"Requirements:\n{listing}\n\nEvidence:\n{shown or '(none)'}"}]
    api_key = os.environ.get(ctx.cfg.credentials_env) if ctx.cfg.credentials_env else ctx.cfg.api_key
    req = Request(ctx.cfg.provider_base_url, ctx.cfg.model, messages, [], request_id, api_key=api_key)
    req.headers[ROLE_HEADER] = "verifier"
    try:
        req.send()
        ctx.abandonable = True
        try:
            resp = req.receive()
        finally:
            ctx.abandonable = False
            req.close()
    except ProviderFault as fault:
        settle_usage(ctx, work_id, request_id, fault.watermark, complete=False)
        schedule_retry(ctx, item, gen, request_id, fault, turn_id)
        raise Interrupted("provider_fault") from fault
    settle_usage(ctx, work_id, request_id, resp.watermark, complete=True)
    with fenced(ctx.db, work_id, gen, "acceptance.response"):
        ctx.db.conn.execute("UPDATE provider_requests SET status='responded' WHERE request_id=?", (request_id,))
    return resp.content, request_id


def back_to_work(ctx: Ctx, item: dict, gen: int, g: dict, why: str) -> None:
    from .goals import continue_message
    with fenced(ctx.db, item["work_id"], gen, "acceptance.back_to_work"):
        ctx.db.conn.execute("UPDATE goals SET phase='working', updated_at=? WHERE goal_id=? AND state='active'",
                            (now(), g["goal_id"]))
        current = one(ctx.db, "SELECT revision FROM goals WHERE goal_id=?", (g["goal_id"],))
        continue_message(ctx, item, current["revision"])
        emit(ctx.db, item["work_id"], "goal_back_to_work", goal_id=g["goal_id"], why=why)


def achieve(ctx: Ctx, item: dict, gen: int, g: dict, acceptance_id: str) -> str:
    """Commit achieved for exactly the Goal version the acceptance judged, with its terminal record."""
    work_id = item["work_id"]
    with fenced(ctx.db, work_id, gen, "acceptance.achieve"):
        current = check_intent(ctx, work_id)
        acc = one(ctx.db, "SELECT * FROM goal_acceptances WHERE acceptance_id=?", (acceptance_id,))
        now_g = one(ctx.db, "SELECT * FROM goals WHERE goal_id=?", (g["goal_id"],))
        versions = {e["msg_seq"]: e["sha"] for e in evidence_of(ctx, work_id)}
        cited = [e for v in json.loads(acc["verdicts"]).values() for e in v["evidence"]]
        stale = (not acc["valid"] or now_g["revision"] != acc["revision"]
                 or now_g["goal_version"] != acc["goal_version"] or current["control_version"] != acc["control_version"]
                 or any(versions.get(e["msg_seq"]) != e["version"] for e in cited))
        if not stale:
            snapshot = {"goal_id": g["goal_id"], "state": "achieved", "revision": acc["revision"],
                        "objective": now_g["objective"],
                        "acceptance_id": acceptance_id, "result_version": acc["result_version"]}
            done = ctx.db.conn.execute(
                "UPDATE goals SET state='achieved', phase=NULL, reason_code=NULL, terminal_snapshot=?,"
                " transcript_anchor=?, updated_at=? WHERE goal_id=? AND revision=? AND goal_version=? AND"
                " state='active'", (json.dumps(snapshot, sort_keys=True), acc["result_version"], now(),
                                    g["goal_id"], acc["revision"], acc["goal_version"])).rowcount
            stale = done != 1
        if stale:
            ctx.db.conn.execute("UPDATE goal_acceptances SET valid=0 WHERE acceptance_id=?", (acceptance_id,))
            emit(ctx.db, work_id, "goal_acceptance_stale", goal_id=g["goal_id"], acceptance_id=acceptance_id)
        else:
            ctx.db.conn.execute("UPDATE work_items SET desired_state='done' WHERE work_id=?", (work_id,))
            set_status(ctx.db, work_id, "finished", "finished", "the Goal was achieved")
            goal_timer.stop(ctx.db, work_id, "achieved")
            release(ctx, work_id, gen, "achieved")
            emit(ctx.db, work_id, "completed", session_id=item["session_id"], goal_id=g["goal_id"])
    if stale:  # a revision sent it back to work (with its own prompt); else acceptance runs again as it is now
        return "work"
    failpoint("completion.commit.before_projection", work_id)
    return "achieved"
