"""Adversarial: the honest reference runtime performs every request, and a proxy loses the reply.

``tests/adapters/proxy_adapter.py --mode indefinite:REQUEST`` passes the request through, lets the runtime do it,
and answers ``{"type": "error", "code": "internal", "definite": false}``: "it may have happened" (docs/protocol.md,
Errors). The kit must judge it like Jepsen's indeterminate operation: either world is allowed, so an honest
runtime is valid or unknown (exit 0 or 2), never invalid (1). Each test asserts the exit code, no traceback, a
time bound (no hang) and no process of the run left behind (``run_kit``).
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest
from env_helpers import marked_by
from recoverykit.conformance.lockstep import LockstepConfig
from recoverykit.conformance.lockstep_run import run_program
from recoverykit.model.catalogue import RestartKind, Verdict
from test_adversarial_verdicts import PROXY, results, run_kit

pytestmark = pytest.mark.slow

CONTROLS = ("pause", "resume", "end", "stop_all")
# the reads and the lifecycle a user never sends: their replies stay honest
SPARED = ("init", "observe", "quiesce", "processes", "start", "stop", "restart")


def indefinite(*requests: str, spare: tuple[str, ...] = ()) -> str:
    args = [sys.executable, str(PROXY), *[f"--mode=indefinite:{r}" for r in requests]]
    return shlex.join([*args, *[f"--spare={s}" for s in spare]])


def _certify(adapter: str, out: Path, *only: str) -> dict:
    code, text = run_kit("certify", "--adapter", adapter, "--seed", "1", *[f"--only={o}" for o in only],
                         "--out", str(out), bound_s=400)
    assert code in (0, 2), text  # valid or unknown: the runtime did what it was asked
    doc = results(out)
    broken = {r["clause"] for c in doc["cases"] for r in c["results"] if r["verdict"] == "invalid"}
    assert not broken, broken
    return doc


def test_lost_control_replies_are_never_a_failure(tmp_path):
    # before the fix: exit 1, RI-08, REC-03, RI-02, FA-01 ("is paused with reason_code user_paused ... though the
    # kit never stopped it"), USG-11 (a Goal's time grew after a Resume whose reply was lost)
    _certify(indefinite(*CONTROLS), tmp_path / "out", "stop_all_restart", "pause_then_restart", "approval_deny",
             "goal_pause_verifying")


def test_lost_submit_replies_are_never_a_failure(tmp_path):
    # before the fix: exit 1, CTX-12 and FA-01 ("ran ... with no approval" though the kit approved it) and RI-02
    # (recovery_disabled: the item held for the kit's own setting, the Resume never sent without a work_id)
    _certify(indefinite("submit"), tmp_path / "out", "approval_pending_restart", "recovery_disabled")


def test_every_user_operation_losing_its_reply_is_never_a_failure(tmp_path):
    _certify(indefinite("*", spare=SPARED), tmp_path / "out", "pause_restart", "approval_deny", "lockstep")


def test_lockstep_submit_pause_kill_with_the_pause_reply_lost(tmp_path):
    """The model forks on the lost Pause (paused or running afterwards); the history checks accept either world.
    Before the fix: broke RI-08 (w is paused with reason_code user_paused after a restart ...)."""
    config = LockstepConfig(indefinite("pause"), out=tmp_path)
    outcome = run_program(config, (("submit", {"script": "lk-hold"}), ("pause", {"i": 0}),
                                   ("kill", {"kind": RestartKind.TREE_KILL})))
    assert outcome.verdict is Verdict.VALID, (outcome.message, outcome.report)
    assert not [r.text for r in config.results if r.verdict is Verdict.INVALID]
    history = (outcome.runs[0] / "history.jsonl").read_text()
    assert '"type": "info", "value": {"code": "internal"' in history  # the pause's reply really was lost
    assert not marked_by(os.getpid())
