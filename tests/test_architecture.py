"""The house rules that a machine can check: layer contracts and lint."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; install the test extras: pip install -e '.[test]'")
    return found


def test_import_contracts_hold(unpacked_wheel):
    # import-linter walks the package on disk; an editable install maps recoverykit.model to a
    # sibling folder that it cannot walk, so the contracts are checked against the built wheel.
    env = {**os.environ, "PYTHONPATH": str(unpacked_wheel)}
    result = subprocess.run(
        [_tool("lint-imports"), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=unpacked_wheel, env=env, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def test_ruff_is_clean():
    result = subprocess.run([_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_cli_usage_error_exits_64():
    result = subprocess.run([sys.executable, "-m", "recoverykit", "no-such-command"],
                            capture_output=True, text=True)
    assert result.returncode == 64, result.stderr
    assert "No such command" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_internal_defect_is_a_short_message_not_a_traceback(monkeypatch, capsys):
    from recoverykit import cli

    monkeypatch.setitem(cli.COMMANDS, "boom", "recoverykit.no_such_module_for_test:cmd")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["boom"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 70
    assert "internal error" in err and "Traceback" not in err
    saved = err.split("traceback is in ")[1].split(".txt")[0] + ".txt"
    assert "ModuleNotFoundError" in Path(saved).read_text()
    Path(saved).unlink()
