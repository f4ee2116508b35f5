"""Small results documents for the report tests: a chaos run with a new finding, an accepted one and a pass,
and a certify run of the same adapter, whose adapter-supplied text carries markup that must stay text."""

from __future__ import annotations

from typing import Any

from recoverykit.chaos.shard import Shard
from recoverykit.chaos.systematic import results_document
from recoverykit.conformance.acceptance import Acceptance

HOSTILE = "<script>alert(1)</script><b>x</b>"  # an adapter name and a violation text that must show as text
DECLARED = {"command": "x", "name": HOSTILE, "version": "1", "profiles": ["chat_core"],
            "failpoints": ["tool.result.commit.before", "usage.persist.after"], "restart_kinds": [], "observes": []}


def chaos_case(point: str, kind: str, clause: str, verdict: str, *, bundle: str | None = None) -> dict[str, Any]:
    cid = f"chat_unknown_write/{point}/1/{kind}"
    text = f"broke {clause}: executed 2 times {HOSTILE}" if verdict == "invalid" else f"held {clause}"
    return {"id": cid, "scenario": "chat_unknown_write", "point": point, "hit": 1, "kind": kind,
            "status": "failed" if verdict == "invalid" else "passed", "leftovers": [],
            "clauses": [{"clause": clause, "verdict": verdict, "text": text, "evidence": []}],
            "violations": [text] if verdict == "invalid" else [], "bundle": bundle,
            "replay": f"recoverykit chaos --replay {cid} --adapter x", "timings": {"total": 1.5}}


def chaos_results() -> dict[str, Any]:
    """FA-15 broken at one cell (new), USG-05 broken at another (accepted), a passing case beside each."""
    cases = [chaos_case("tool.result.commit.before", "tree_kill", "FA-15", "invalid", bundle="out/bundles/fa15"),
             chaos_case("tool.result.commit.before", "worker_kill", "FA-15", "valid"),
             chaos_case("usage.persist.after", "tree_kill", "USG-05", "invalid", bundle="out/bundles/usg05"),
             chaos_case("usage.persist.after", "worker_kill", "USG-05", "valid")]
    return results_document(cases, DECLARED, mode="systematic", shard=Shard(1, 1), selection={}, seed=0,
                            started=0.0, wall_s=6.0, acceptance=Acceptance({"USG-05": "--accept"}))


def certify_results() -> dict[str, Any]:
    """A certify run of the same adapter: one scenario broke USG-05 (accepted), one held, lockstep held."""
    result = {"clause": "USG-05", "verdict": "invalid", "text": f"broke USG-05: summed twice {HOSTILE}",
              "evidence": [], "basis": "kit"}
    held = {"clause": "INP-01", "verdict": "valid", "text": "held INP-01", "evidence": [], "basis": "kit"}
    replay = "recoverykit certify --adapter x --seed 7"
    return {"verdict": "valid", "exit_code": 0, "kit_version": "0", "seed": 7, "profiles": ["chat_core"],
            "adapter": {"command": "x", "name": HOSTILE, "version": "1", "profiles": ["chat_core"]},
            "required": ["INP-01"],
            "clauses": {"INP-01": {"verdict": "valid", "required": True},
                        "USG-05": {"verdict": "accepted", "required": False, "accepted_by": "--accept",
                                   "finding": "invalid"},
                        "RI-06": {"verdict": "unknown", "required": False},
                        "GOAL-01": {"verdict": "not_applicable", "required": False}},
            "acceptance": {"accepted": {"USG-05": "--accept"}, "baseline": None, "changed": [], "stale": [],
                           "not_exercised": [], "confirmed": ["USG-05"]},
            "findings": [{"clause": "USG-05", "count": 1, "seen_in": ["chat_stream_usage"], "status": "accepted",
                          "accepted_by": "--accept", "message": result["text"],
                          "shortest": {"case": "chat_stream_usage", "replay": f"{replay} --only chat_stream_usage",
                                       "steps": None, "seconds": 2.0, "message": result["text"]}}],
            "cases": [{"name": "chat_stream_usage", "kind": "scenario", "verdict": "invalid", "clauses": ["USG-05"],
                       "message": result["text"], "program": [], "seconds": 2.0, "run_dirs": [],
                       "bundle": "out/bundles/chat_stream_usage", "results": [result]},
                      {"name": "chat_unknown_write", "kind": "scenario", "verdict": "valid", "clauses": ["INP-01"],
                       "message": "", "program": [], "seconds": 1.0, "run_dirs": [], "bundle": None,
                       "results": [held]}],
            "seconds": 3.0, "replay": replay, "strict_evidence": False}
