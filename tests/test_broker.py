"""The failpoint broker on its own: records, timeouts, malformed reports, clean shutdown."""

import json
import os
import socket
import threading
from pathlib import Path

import pytest
from env_helpers import short_dir  # noqa: F401  (fixture)
from recoverykit.conformance import broker as broker_module
from recoverykit.conformance.broker import FailpointBroker, FailpointNotHit
from recoverykit.errors import InvalidArgument


def _send(path: str, payload: dict | bytes, wait: bool = False) -> dict | None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)  # a broker that never answers fails the test instead of hanging it
        conn.connect(path)
        conn.sendall(payload if isinstance(payload, bytes) else (json.dumps(payload) + "\n").encode())
        if not wait:
            return None
        data = conn.makefile("rb").readline()
        return json.loads(data) if data else None


def _hit(point="a.b", action="pause", hit=1, work_id="w"):
    return {"v": 1, "type": "hit", "point": point, "pid": os.getpid(), "hit": hit, "work_id": work_id,
            "action": action, "time": 1.0}


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_wait_for_hit_times_out_with_what_was_seen(short_dir):  # noqa: F811
    with FailpointBroker(short_dir) as broker:
        _send(broker.path, _hit("x.y", "sleep"))
        broker.wait_for_hit("x.y", timeout=10)
        with pytest.raises(FailpointNotHit, match=r"point='a.b'.*x\.y"):
            broker.wait_for_hit("a.b", timeout=0.05)


def test_pause_blocks_until_release_from_another_thread(short_dir):  # noqa: F811
    with FailpointBroker(short_dir) as broker:
        answers = []
        t = threading.Thread(target=lambda: answers.append(_send(broker.path, _hit(), wait=True)))
        t.start()
        hit = broker.wait_for_hit("a.b", timeout=10, held=True)
        assert answers == [] and hit.peer_pid == os.getpid()
        assert broker.release(point="other.point") == 0
        assert broker.release(hit) == 1
        t.join(10)
        assert answers == [{"v": 1, "type": "resume", "resume": "continue"}]
        assert hit.resume == "continue" and hit.released is not None and not hit.held
        assert broker.release(hit) == 0  # released once only


def test_release_rejects_an_unknown_resume(short_dir):  # noqa: F811
    with FailpointBroker(short_dir) as broker, pytest.raises(InvalidArgument, match="resume"):
        broker.release(resume="explode")


@pytest.mark.parametrize("garbage", [b"not json\n", b'{"type": "hello"}\n', b'{"type": "hit"}\n', b"[1,2]\n"])
def test_malformed_reports_are_recorded_not_fatal(short_dir, garbage):  # noqa: F811
    with FailpointBroker(short_dir) as broker:
        _send(broker.path, garbage)
        _send(broker.path, _hit("after.garbage", "sleep"))
        broker.wait_for_hit("after.garbage", timeout=10)
        assert len(broker.malformed()) == 1 and broker.hits()[0].point == "after.garbage"


def test_a_long_run_dir_gets_a_short_socket(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    with FailpointBroker(deep) as broker:
        assert len(broker.path) < broker_module.MAX_SOCKET_PATH
        _send(broker.path, _hit("p.q", "sleep"))
        assert broker.wait_for_hit("p.q", timeout=10).point == "p.q"
        temp = Path(broker.path).parent
    assert not temp.exists()


def test_close_leaks_no_thread_socket_or_file(short_dir):  # noqa: F811
    before_threads, before_fds = threading.active_count(), _open_fds()
    broker = FailpointBroker(short_dir)
    held = threading.Thread(target=_send, args=(broker.path, _hit()), kwargs={"wait": True})
    held.start()
    broker.wait_for_hit(timeout=10)
    broker.close()
    held.join(10)
    broker.close()  # idempotent
    assert not held.is_alive()  # the held client saw EOF
    assert threading.active_count() == before_threads
    assert _open_fds() == before_fds
    assert not os.path.exists(broker.path)


def test_wait_ends_when_the_broker_closes(short_dir):  # noqa: F811
    broker = FailpointBroker(short_dir)
    errors = []

    def waiter():
        try:
            broker.wait_for_hit("never.hit", timeout=60)
        except FailpointNotHit as exc:
            errors.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    broker.close()
    t.join(10)
    assert len(errors) == 1


def test_hold_nth_holds_only_an_items_kth_pass_in_any_process(short_dir):  # noqa: F811
    """A task's runs are claimed by whichever worker is free, so each process's hit number depends on the
    scheduler; the broker counts an item's passes over every process and holds only the k-th."""
    with FailpointBroker(short_dir) as broker:
        broker.hold_nth("a.b", 3)
        # item w: its first pass in one process, its second in another (both hit 1 there), then its third
        assert _send(broker.path, _hit(hit=1, work_id="w"), wait=True)["resume"] == "continue"
        assert _send(broker.path, _hit(hit=1, work_id="other"), wait=True)["resume"] == "continue"
        assert _send(broker.path, _hit(hit=1, work_id="w"), wait=True)["resume"] == "continue"
        answers = []
        t = threading.Thread(target=lambda: answers.append(_send(broker.path, _hit(hit=2, work_id="w"), wait=True)))
        t.start()
        held = broker.wait_for_hit("a.b", timeout=10, held=True)
        assert (held.work_id, held.item_pass, held.hit) == ("w", 3, 2) and answers == []
        assert [h.item_pass for h in broker.hits()] == [1, 1, 2, 3]
        broker.release(held)
        t.join(10)
        assert answers[0]["resume"] == "continue"
    with pytest.raises(InvalidArgument):
        FailpointBroker.hold_nth(broker, "a.b", 0)
