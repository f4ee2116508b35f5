"""The durable-write hook (recoverykit.adapter.durable_writes, docs/failpoints.md section 7): a tiny SQLite
program started with the SDK's environment reports every commit with its hit number and file; with the
option off nothing is injected and nothing reported; an unreachable broker never breaks the program; a
process not of the run is left alone; the runtime's own sitecustomize still runs. And the chaos side: the
opt-in points are counted only when asked, never "undeclared" or "never reached" otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from recoverykit.adapter import DURABLE_WRITE_POINTS, RuntimeEnv
from recoverykit.adapter.durable_writes import armed, environ_for, hook_dir
from recoverykit.chaos.cases import enumerate_cases
from recoverykit.chaos.dry_run import Trace, _undeclared
from recoverykit.chaos.systematic import never_reached
from recoverykit.conformance.broker import FailpointBroker
from recoverykit.conformance.scenarios import scenario_named
from recoverykit.model.catalogue import OPT_IN_POINTS

SPEC = "durable.write.before=sleep(0);durable.write.after=sleep(0)"
PROGRAM = """
import os, sqlite3, sys
d = sys.argv[1]
c = sqlite3.connect(os.path.join(d, "a.sqlite"))
c.execute("CREATE TABLE t (x)")                       # DDL outside a transaction: commits by itself
c.execute("INSERT INTO t VALUES (1)")
c.commit()                                           # SqliteSaver's path
with c:
    c.execute("INSERT INTO t VALUES (2)")
c.commit()                                           # nothing open: no write, no report
b = sqlite3.connect(os.path.join(d, "b.sqlite"), isolation_level=None)
b.execute("BEGIN IMMEDIATE")
b.execute("CREATE TABLE u (x)")                      # inside the transaction: no commit of its own
b.cursor().execute("commit")                         # an SQL COMMIT through a cursor
b.execute("INSERT INTO u VALUES (2)")                # autocommit
m = sqlite3.connect(":memory:"); m.execute("CREATE TABLE z (x)"); m.commit()   # not durable: not reported
with open(os.path.join(d, "f.tmp"), "w") as f:
    f.write("x"); f.flush(); os.fsync(f.fileno())
os.replace(os.path.join(d, "f.tmp"), os.path.join(d, "f.txt"))
print("hooked" if type(c).__name__.startswith("Hooked") else "plain", flush=True)
"""
EXPECTED = [("a.sqlite", "autocommit CREATE"), ("a.sqlite", "commit"), ("a.sqlite", "with"),
            ("b.sqlite", "COMMIT"), ("b.sqlite", "autocommit INSERT"), ("f.tmp", "fsync"), ("f.txt", "replace")]


def _run(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    data = Path(tempfile.mkdtemp(prefix="data-", dir=tmp_path))
    return subprocess.run([sys.executable, str(program), str(data)], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)


def _env(broker_path: str, spec: str, **extra: str) -> dict[str, str]:
    runtime = RuntimeEnv(data_dir=Path("."), provider_base_url="http://127.0.0.1:1", probe_tools=[],
                         failpoint_socket=broker_path, run_marker="rk-test-durable", failpoints=spec)
    return {**runtime.environ(), **extra}


def _settled(broker: FailpointBroker, count: int, limit_s: float = 5.0) -> list:
    """The broker's hits once ``count`` arrived (the program has exited: its reports are sent)."""
    deadline = time.monotonic() + limit_s
    while len(broker.hits()) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)
    return broker.hits()


def test_every_commit_fsync_and_replace_is_reported_with_its_hit_and_file(tmp_path):
    with FailpointBroker(tmp_path / "broker") as broker:
        result = _run(tmp_path, _env(broker.path, SPEC))
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "hooked"
        hits = _settled(broker, 2 * len(EXPECTED))
    for point in DURABLE_WRITE_POINTS:
        mine = [h for h in hits if h.point == point]
        assert [h.hit for h in mine] == list(range(1, len(EXPECTED) + 1))
        assert [(Path(h.detail["file"]).name, h.detail["op"]) for h in mine] == EXPECTED
        assert all(h.work_id is None and h.peer_pid == h.pid for h in mine)
    # before and after alternate: each write is bracketed
    assert [h.point for h in hits] == list(DURABLE_WRITE_POINTS) * len(EXPECTED)


def test_off_nothing_is_injected_and_a_stray_hook_stays_off(tmp_path):
    other = "tool.dispatch.before=sleep(0)"
    assert not armed(other) and environ_for(other, dict(os.environ)) == {}
    with FailpointBroker(tmp_path / "broker") as broker:
        env = _env(broker.path, other)
        assert hook_dir() not in env.get("PYTHONPATH", "")
        assert _run(tmp_path, env).stdout.strip() == "plain"
        # even with the hook on the path (a leaked PYTHONPATH), nothing armed means nothing installed
        env["PYTHONPATH"] = hook_dir()
        result = _run(tmp_path, env)
        assert result.returncode == 0 and result.stdout.strip() == "plain", result.stderr
        assert _settled(broker, 1, limit_s=0.3) == []


def test_a_process_not_of_the_run_is_left_alone(tmp_path):
    with FailpointBroker(tmp_path / "broker") as broker:
        env = _env(broker.path, SPEC)
        env.pop("RECOVERYKIT_RUN_MARKER")
        result = _run(tmp_path, env)
        assert result.returncode == 0 and result.stdout.strip() == "plain", result.stderr
        assert _settled(broker, 1, limit_s=0.3) == []


def test_an_unreachable_broker_never_breaks_the_program(tmp_path):
    env = _env(str(tmp_path / "no-broker.sock"), "durable.write.before=1*pause->sleep(0)")
    result = _run(tmp_path, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hooked"
    assert "unreachable" in result.stderr and "continuing" in result.stderr
    [data] = tmp_path.glob("data-*")
    assert sorted(os.listdir(data)) == ["a.sqlite", "b.sqlite", "f.txt"]


def test_the_runtimes_own_sitecustomize_still_runs(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITECUSTOMIZE'] = 'ran'\n")
    (tmp_path / "show.py").write_text("import os, sqlite3\nprint(os.environ.get('OWN_SITECUSTOMIZE'), "
                                      "hasattr(sqlite3.connect, '__wrapped__'))\n")
    with FailpointBroker(tmp_path / "broker") as broker:
        env = _env(broker.path, SPEC, PYTHONPATH=str(own))
        env.update(environ_for(SPEC, env))
        assert env["PYTHONPATH"].split(os.pathsep) == [hook_dir(), str(own)]
        result = subprocess.run([sys.executable, str(tmp_path / "show.py")], env=env, capture_output=True,
                                text=True, timeout=60)
    assert result.stdout.split() == ["ran", "True"], result.stderr


def test_chaos_counts_opt_in_points_only_when_asked():
    declared = {"failpoints": ["provider.request.before", *DURABLE_WRITE_POINTS], "profiles": ["chat_core"],
                "restart_kinds": []}
    off = Trace({}, reached={"chat_unknown_write": {"provider.request.before": 1}})
    assert never_reached(off, declared) == []  # not armed without the flag: not "declared, never reached"
    on = Trace({}, reached={"chat_unknown_write": {"provider.request.before": 1}}, durable_writes=True)
    assert never_reached(on, declared) == sorted(DURABLE_WRITE_POINTS)
    assert not set(OPT_IN_POINTS) & set(_undeclared(scenario_named("chat_unknown_write"), {"failpoints": []}))
    # a scenario whose cells aim at a few points still gets a case for every commit boundary it passes
    assert scenario_named("chat_read_tool").chaos_points({"durable.write.after": 3, "tool.running": 1}) == {
        "durable.write.after": 3}
    back = Trace.from_dict({**Trace({"name": "x"}, reached={"s": {"durable.write.before": 2}}, durable_writes=True,
                                    labels={"s": {"durable.write.before": ["a.sqlite commit", "b COMMIT"]}}).as_dict()})
    assert back.durable_writes and back.labels == {"s": {"durable.write.before": ["a.sqlite commit", "b COMMIT"]}}


def test_writes_made_while_the_runtime_starts_get_no_case():
    trace = Trace({}, reached={"chat_read_tool": {"durable.write.before": 3, "durable.write.after": 2}},
                  durable_writes=True, startup={"chat_read_tool": {"durable.write.before": 1}})
    ids = [c.id for c in enumerate_cases(trace, "chat_read_tool", kinds="tree_kill")]
    assert ids == ["chat_read_tool/durable.write.before/2/tree_kill", "chat_read_tool/durable.write.before/3/tree_kill",
                   "chat_read_tool/durable.write.after/1/tree_kill", "chat_read_tool/durable.write.after/2/tree_kill"]
    assert Trace.from_dict(trace.as_dict()).startup == trace.startup
