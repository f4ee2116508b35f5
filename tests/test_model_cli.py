"""``recoverykit model explore``: exit codes, JSON shape, human summary, shortest path on failure."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from recoverykit import cli_model
from recoverykit.model import abstract as a
from recoverykit.model import abstract_events as ev
from recoverykit.model.explore import explore as real_explore


def _run(*args):
    return CliRunner().invoke(cli_model.model, list(args), catch_exceptions=False)


def test_explore_json_exits_0_with_zero_violations():
    result = _run("explore", "--depth", "4", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["ok"] is True and data["violations"] == [] and data["depth"] == 4
    for key in ("states", "transitions", "max_depth_reached", "invariants_checked", "goal_graph"):
        assert key in data
    assert all(inv["clause"] for inv in data["invariants_checked"])


def test_explore_one_configuration():
    for config in ("goal-with-budget", "chat-unknown-tool"):  # a chat-only start reaches no Goal state: fine
        result = _run("explore", "--depth", "3", "--config", config, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["configurations"] == [config]


def test_explore_human_summary():
    result = _run("explore", "--depth", "3")
    assert result.exit_code == 0
    assert "states" in result.output and "valid: no invariant broke" in result.output


def _broken_explore(depth, **kwargs):
    def summing(s, i):
        w = s[a.ITEMS][i]
        if s[a.RT] != a.UP or not w[a.PROV] or w[a.ATT_L] >= 2:
            return []
        w = list(w)
        w[a.ATT_L] += 1
        w[a.ATT_W] += w[a.ATT_L]
        return [(f"provider_usage({i})", ev.put(s, i, w))]

    return real_explore(depth, handlers={"provider_usage": summing}, **kwargs)


@pytest.mark.parametrize("as_json", [False, True])
def test_a_violation_exits_1_and_prints_the_shortest_path(monkeypatch, as_json):
    monkeypatch.setattr(sys.modules["recoverykit.model.explore"], "explore", _broken_explore)
    result = _run("explore", "--depth", "4", *(["--json"] if as_json else []))
    assert result.exit_code == 1
    if as_json:
        data = json.loads(result.output)
        assert data["ok"] is False
        assert any(v["path"][-1] == "provider_usage(0)" and v["clause"] == "USG-05" for v in data["violations"])
    else:
        assert "broke USG-05" in result.output
        assert "admit(0) -> provider_request(0) -> provider_usage(0) -> provider_usage(0)" in result.output


@pytest.mark.parametrize("args", [["explore", "--depth", "-1"], ["explore", "--depth", "x"],
                                  ["explore", "--depth", "99"], ["explore", "--bogus"],
                                  ["explore", "--config", "no-such-config"]])
def test_usage_errors_exit_64_without_traceback(args):
    result = subprocess.run([sys.executable, "-m", "recoverykit", "model", *args], capture_output=True, text=True)
    assert result.returncode == 64, result.stderr
    assert "Traceback" not in result.stderr


def test_installed_command_runs_depth_2():
    result = subprocess.run([sys.executable, "-m", "recoverykit", "model", "explore", "--depth", "2", "--json"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ok"] is True
