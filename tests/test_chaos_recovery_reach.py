"""Issue 11, defect 16: a recovery-point case of sessions_together must reach its point every time.

The case crashes the runtime while the provider holds a first request, then restarts it armed at the
recovery point. Every session's script holds its first request, so a session that had not been served
before the crash was held after it too: its worker stayed busy until the case gave up, the recovering
item waited for a free worker, and the case ended not_reached (1 of 873 cases in full runs, when the
second worker had not claimed a second item before the crash). With one worker
(``RK_IMPL_WORKERS=1``) that situation is certain, so this test is deterministic: it failed on every
run before the fix and passes after it.
"""

from __future__ import annotations

import os
import time

import pytest
from env_helpers import marked_by
from recoverykit.chaos.cases import parse_case_id
from recoverykit.chaos.runner import run_case


@pytest.mark.parametrize("kind", ["normal_exit", "tree_kill"])
def test_sessions_together_reaches_the_recovery_point_with_one_worker(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("RK_IMPL_WORKERS", "1")  # one worker: the unserved sessions come first after the crash
    monkeypatch.setenv("RECOVERYKIT_WARM_SPARES", "0")
    case = parse_case_id(f"sessions_together/recovery.claim.after/1/{kind}")
    t0 = time.monotonic()
    result = run_case(case, None, base_dir=tmp_path / "runs", bundle_dir=tmp_path / "bundles", timeout_s=20.0)
    took = time.monotonic() - t0
    assert result["status"] == "passed", (result["status"], result.get("why"), result["violations"][:3])
    assert result["verdict"] == "valid"
    assert result["reached"]["via"] == "failpoint" and result["reached"]["hit"] == 1
    assert result["leftovers"] == []
    assert took < 60
    assert [p.pid for p in marked_by(os.getpid())] == []
