"""docs/failpoints.md and docs/environment.md stay true to the code."""

from pathlib import Path

import pytest
from recoverykit.chaos import runenv
from recoverykit.chaos.failpoints import DOC_BEGIN, DOC_END, points_table, refresh_doc
from recoverykit.conformance import failpoint_client
from recoverykit.errors import InvalidArgument
from recoverykit.model.catalogue import INTERRUPTION_POINTS

ROOT = Path(__file__).resolve().parent.parent
FAILPOINTS_DOC = ROOT / "docs" / "failpoints.md"
ENVIRONMENT_DOC = ROOT / "docs" / "environment.md"


def test_the_generated_point_table_is_fresh():
    text = FAILPOINTS_DOC.read_text(encoding="utf-8")
    assert refresh_doc(text) == text, "docs/failpoints.md is stale: run `recoverykit env docs --write`"


def test_the_table_lists_every_point_with_its_reach():
    table = points_table()
    for point in INTERRUPTION_POINTS:
        assert f"| `{point.name}` | {point.reach.value}" in table


def test_refresh_needs_the_markers():
    with pytest.raises(InvalidArgument, match="generated region"):
        refresh_doc("no markers here")
    assert refresh_doc(f"a\n{DOC_BEGIN}\nold\n{DOC_END}\nb") == f"a\n{DOC_BEGIN}\n{points_table()}\n{DOC_END}\nb"


def test_the_docs_name_every_variable_and_the_wire_shapes():
    text = FAILPOINTS_DOC.read_text(encoding="utf-8") + ENVIRONMENT_DOC.read_text(encoding="utf-8")
    for name in runenv.ALL_VARIABLES:
        assert name in text
    assert '{"v": 1, "type": "hit"' in text and '"resume": "continue"' in text
    for action in failpoint_client.ACTIONS:
        assert f"`{action}" in text


def test_run_environment_and_clock_offset():
    env = runenv.run_environment("recoverykit-1-2-0123abcd", failpoints={"tool.dispatch.after": "1*pause"},
                                 socket_path="/tmp/s", clock_offset_s=7500, base={"PATH": "/bin",
                                                                                 "RECOVERYKIT_FAILPOINTS": "old"})
    assert env == {"PATH": "/bin", "RECOVERYKIT_RUN_MARKER": "recoverykit-1-2-0123abcd",
                   "RECOVERYKIT_FAILPOINTS": "tool.dispatch.after=1*pause",
                   "RECOVERYKIT_FAILPOINT_SOCKET": "/tmp/s", "RECOVERYKIT_CLOCK_OFFSET_S": "7500.0"}
    assert runenv.clock_offset(env) == 7500.0 and runenv.clock_offset({}) == 0.0
    with pytest.raises(InvalidArgument, match="not a number"):
        runenv.clock_offset({"RECOVERYKIT_CLOCK_OFFSET_S": "two hours"})
    with pytest.raises(InvalidArgument, match="finite"):
        runenv.run_environment("recoverykit-1-2-0123abcd", clock_offset_s=float("inf"))


def test_a_run_environment_is_torn_down_with_its_processes(tmp_path):
    import subprocess
    import sys
    import time

    from recoverykit.conformance.killer import ProcRef
    from recoverykit.conformance.reaper import leftovers

    script = {"scripts": [{"id": "s", "steps": [{"text": "x"}]}]}
    with runenv.RunEnvironment(tmp_path / "run", script) as world:
        env = world.env(failpoints={"tool.dispatch.after": "pause"}, clock_offset_s=60)
        assert env["RECOVERYKIT_FAILPOINT_SOCKET"] == world.broker.path
        assert [t.name for t in world.probe_tools] == ["probe_read", "probe_idempotent", "probe_unknown",
                                                       "probe_external"]
        assert world.provider.base_url.startswith("http://127.0.0.1:")
        straggler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)
        ref = ProcRef.of(straggler.pid)
        deadline = time.monotonic() + 30
        while ref not in leftovers(world.marker) and time.monotonic() < deadline:
            time.sleep(0.01)  # the marker is readable once the child has exec'd
    try:
        assert world.reaped.killed == [ref] and world.reaped.ok
        assert straggler.wait(timeout=10) < 0
    finally:
        if straggler.poll() is None:
            straggler.kill()
            straggler.wait()


@pytest.mark.parametrize("relative", ["conformance/failpoint_client.py", "conformance/probe.py"])
def test_vendorable_files_use_the_standard_library_only(relative):
    import ast
    import sys

    tree = ast.parse((ROOT / relative).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert imported and imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
