"""Warm spare adapters: adopted only when they are exactly what a cold start would be, never leaked."""

from __future__ import annotations

import os
import time

import psutil
from env_helpers import marked_by
from recoverykit.chaos import spares
from recoverykit.chaos.case_env import private_dir
from recoverykit.chaos.cases import parse_case_id
from recoverykit.chaos.runner import run_case

FAST_CASE = parse_case_id("chat_unknown_write/completion.commit.before_projection/1/frontend_reload")


def mine() -> list[psutil.Process]:
    """Live processes carrying a run marker owned by this test process."""
    return marked_by(os.getpid())


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
        assert len(list(tmp_path.iterdir())) == spares.DEPTH  # spares for the next cases, in private dirs
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
        idle = pool.idle()
        assert len(idle) == spares.DEPTH
        for spare in idle:
            psutil.Process(spare.client.pid).kill()
            psutil.Process(spare.client.pid).wait(timeout=10)
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


def test_pytests_per_item_variable_does_not_make_another_adapter(tmp_path, monkeypatch):
    # pytest sets PYTEST_CURRENT_TEST anew for every item: under xdist, every case would miss its spare
    with spares.warm_spares():
        monkeypatch.setenv("PYTEST_CURRENT_TEST", "case-1 (call)")
        run_case(FAST_CASE, base_dir=tmp_path)
        monkeypatch.setenv("PYTEST_CURRENT_TEST", "case-2 (call)")
        assert run_case(FAST_CASE, base_dir=tmp_path)["adapter"]["warm_spare"] is True
    assert mine() == []


def test_idle_spares_are_capped_across_environments(tmp_path, monkeypatch):
    with spares.warm_spares() as pool:
        for i in range(spares.MAX_IDLE + 2):  # every environment differs: no spare is ever adopted
            monkeypatch.setenv("RK_TEST_SPARE_ROUND", str(i))
            pool.launch(["python3", "-c", "import sys; sys.stdin.read()"], tmp_path, private_dir)
        assert len(pool.idle()) == spares.MAX_IDLE
    assert mine() == [] and list(tmp_path.iterdir()) == []


def test_an_xdist_worker_runs_its_cases_on_warm_spares(tmp_path):
    from recoverykit.chaos import systematic

    doc = systematic.run(None, workers=1, out_dir=tmp_path / "out", scenarios="chat_unknown_write",
                         points="completion.commit.before_projection", kinds="frontend_reload,normal_exit,tree_kill")
    ran = [c for c in doc["cases"] if c["status"] == "passed"]
    assert len(ran) == 3, doc["cases"]
    assert [c["adapter"]["warm_spare"] for c in ran] == [False, True, True]
    assert not (tmp_path / "out" / "runs").exists()  # no idle spare's directory outlived the run


def _may_raise_priority() -> bool:
    """Can this process lower a child's nice value (root, or CAP_SYS_NICE)? Asked of a real child."""
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        os.setpriority(os.PRIO_PROCESS, child.pid, os.getpriority(os.PRIO_PROCESS, 0) + 5)
        try:
            os.setpriority(os.PRIO_PROCESS, child.pid, os.getpriority(os.PRIO_PROCESS, 0))
            return True
        except PermissionError:
            return False
    finally:
        child.kill()
        child.wait()


def test_an_idle_spare_yields_the_cpu_and_an_adopted_one_gets_it_back(tmp_path):
    kit = os.getpriority(os.PRIO_PROCESS, 0)
    with spares.warm_spares() as pool:
        assert run_case(FAST_CASE, base_dir=tmp_path)["status"] == "passed"
        idle = pool.idle()[0]
        adapter = psutil.Process(idle.client.pid)
        assert adapter.nice() == min(kit + spares.SPARE_NICE, 19)
        deadline = time.monotonic() + 30
        while len(adapter.children(recursive=True)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # its imports done, its zygote forked (what it starts later inherits either way)
        assert {p.nice() for p in adapter.children(recursive=True)} == {adapter.nice()}
        adopted = pool.take(idle.client.argv, tmp_path)
        assert adopted is idle
        tree = [psutil.Process(idle.client.pid), *psutil.Process(idle.client.pid).children(recursive=True)]
        assert len(tree) >= 2  # the adapter and its zygote (and the zygote's standbys)
        expected = kit if _may_raise_priority() else min(kit + spares.SPARE_NICE, 19)
        assert {p.nice() for p in tree} == {expected}
        spares._discard(adopted)
    assert mine() == []
