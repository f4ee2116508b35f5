"""How the reference runtime starts its processes: forked from the adapter's zygote, or (on request)
as plain interpreters. Either way the kit sees the same roles, identities and markers."""

from __future__ import annotations

import psutil
import test_impl_harness
from test_impl_harness import tool_then_text

harness_factory = test_impl_harness.harness_factory


def _role(p) -> str:
    return str(p.role.value if hasattr(p.role, "value") else p.role)


def _parents(h) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for p in h.call("processes").processes:
        out.setdefault(_role(p), set()).add(psutil.Process(p.pid).ppid())
    return out


def test_control_and_workers_fork_from_one_server_that_outlives_a_tree_kill(harness_factory):
    h = harness_factory(tool_then_text(), workers=2)
    h.start()
    parents = _parents(h)
    (server,) = parents["control"] | parents["worker"]  # one parent for every runtime process
    assert server != h.client.pid and psutil.Process(server).ppid() == h.client.pid  # the adapter's zygote
    for p in h.call("processes").processes:
        h.kill(p.pid)  # the whole runtime, as the chaos tree kill does (the adapter and its zygote live on)
    h.start()
    assert _parents(h) == {"control": {server}, "worker": {server}}
    h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")
    assert h.quiesce().quiescent
    assert h.observe().work_items[0].status == "finished"


def test_spawn_mode_starts_plain_interpreters(harness_factory, monkeypatch):
    monkeypatch.setenv("RK_IMPL_START", "spawn")
    h = harness_factory(tool_then_text(), workers=1)
    h.start()
    assert _parents(h) == {"control": {h.client.pid}, "worker": {h.client.pid}}
    for p in h.call("processes").processes:
        assert f"recoverykit.impl.{_role(p)}" in psutil.Process(p.pid).cmdline()
    h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")
    assert h.quiesce().quiescent
    assert h.observe().work_items[0].status == "finished"


def test_a_dead_zygote_falls_back_to_interpreters_and_loses_nothing(harness_factory):
    h = harness_factory(tool_then_text(), workers=1)
    h.start()
    (zygote,) = _parents(h)["worker"]
    h.kill(zygote)  # its children live on as orphans; the adapter must still stop them and start anew
    h.call("stop", graceful=True)
    assert h.call("processes").processes == []
    h.start()
    assert _parents(h) == {"control": {h.client.pid}, "worker": {h.client.pid}}  # plain interpreters now
    h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")
    assert h.quiesce().quiescent
    assert h.observe().work_items[0].status == "finished"


def _standbys(zygote: int, known: set[int], timeout_s: float = 20.0) -> set[int]:
    """The zygote's children that are not runtime processes, once there are STANDBYS of them."""
    import time

    from recoverykit.impl.zygote import STANDBYS
    deadline = time.monotonic() + timeout_s
    while True:
        idle = {c.pid for c in psutil.Process(zygote).children() if c.pid not in known}
        if len(idle) >= STANDBYS or time.monotonic() > deadline:
            return idle
        time.sleep(0.02)


def test_a_start_is_served_by_standbys_forked_ahead_and_they_leave_with_the_zygote(harness_factory):
    h = harness_factory(tool_then_text(), workers=2)
    h.start()
    (zygote,) = _parents(h)["worker"]
    running = {p.pid for p in h.call("processes").processes}
    ready = _standbys(zygote, running)
    assert len(ready) == 3, ready  # refilled while nothing was asked of the zygote
    for pid in running:
        h.kill(pid)
    h.start()
    restarted = {p.pid for p in h.call("processes").processes}
    assert restarted == ready  # control and both workers: the standbys, no fork on the start's path
    h.call("submit", session_id="s1", text="go [[rk-script:t1]]", client_msg_id="m1")
    assert h.quiesce().quiescent and h.observe().work_items[0].status == "finished"
    spare = _standbys(zygote, restarted)
    h.kill(zygote)
    _, alive = psutil.wait_procs([psutil.Process(pid) for pid in spare], timeout=10)
    assert not alive, f"standbys {[p.pid for p in alive]} outlived their zygote"
