"""Warm spare adapters: adopted only when they are exactly what a cold start would be, never leaked."""

from __future__ import annotations

import contextlib
import os

import psutil
from recoverykit.chaos import spares
from recoverykit.chaos.cases import parse_case_id
from recoverykit.chaos.reaper import ENV_RUN_MARKER
from recoverykit.chaos.runner import run_case

FAST_CASE = parse_case_id("chat_unknown_write/completion.commit.before_projection/1/frontend_reload")


def mine() -> list[psutil.Process]:
    """Live processes carrying a run marker owned by this test process."""
    prefix = f"recoverykit-{os.getpid()}-"
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(ENV_RUN_MARKER, "").startswith(prefix) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def test_outside_a_block_nothing_is_pooled(tmp_path):
    result = run_case(FAST_CASE, base_dir=tmp_path)
    assert result["status"] == "passed", result
    assert result["adapter"]["warm_spare"] is False
    assert mine() == [] and list(tmp_path.iterdir()) == []


def test_the_next_case_adopts_the_spare_and_the_block_leaves_nothing(tmp_path):
    with spares.warm_spares():
        first = run_case(FAST_CASE, base_dir=tmp_path)
        second = run_case(FAST_CASE, base_dir=tmp_path)
        assert [first["status"], second["status"]] == ["passed", "passed"], (first, second)
        assert [first["adapter"]["warm_spare"], second["adapter"]["warm_spare"]] == [False, True]
        assert len(list(tmp_path.iterdir())) == 1  # the spare for a third case, in its own private dir
    assert mine() == [], "an idle spare outlived its block"
    assert list(tmp_path.iterdir()) == [], "a spare's run directory outlived its block"


def test_a_spare_started_under_another_environment_is_not_adopted(tmp_path, monkeypatch):
    with spares.warm_spares():
        assert run_case(FAST_CASE, base_dir=tmp_path)["status"] == "passed"
        monkeypatch.setenv("RK_IMPL_WORKERS", "1")  # the spare has the old environment: it is not that adapter
        second = run_case(FAST_CASE, base_dir=tmp_path)
        assert second["status"] == "passed" and second["adapter"]["warm_spare"] is False
    assert mine() == [] and list(tmp_path.iterdir()) == []


def test_a_spare_that_died_while_idle_is_replaced_by_a_cold_start(tmp_path):
    with spares.warm_spares() as pool:
        assert run_case(FAST_CASE, base_dir=tmp_path)["status"] == "passed"
        (idle,) = [s for queue in pool._idle.values() for s in queue]
        psutil.Process(idle.client.pid).kill()
        psutil.Process(idle.client.pid).wait(timeout=10)
        second = run_case(FAST_CASE, base_dir=tmp_path)
        assert second["status"] == "passed" and second["adapter"]["warm_spare"] is False
    assert mine() == [] and list(tmp_path.iterdir()) == []


def test_switched_off_by_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(spares.ENV_SWITCH, "0")
    with spares.warm_spares():
        run_case(FAST_CASE, base_dir=tmp_path)
        second = run_case(FAST_CASE, base_dir=tmp_path)
        assert second["adapter"]["warm_spare"] is False
    assert mine() == []
