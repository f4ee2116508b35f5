"""CrossHair verifies the contracts of recoverykit.model.decisions, and can fail.

The second test runs the same check on deliberately wrong copies (tests/crosshair_wrong/) and
expects a counterexample for each, so a passing first test means something.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WRONG = ROOT / "tests" / "crosshair_wrong" / "wrong_decisions.py"
PER_CONDITION_S = "4"  # per postcondition; the whole module stays well under a minute
TOTAL_S = 180  # a hard stop for a pathological machine; the check normally takes seconds

pytestmark = pytest.mark.crosshair


def _crosshair(*targets: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("crosshair", path=str(Path(sys.executable).parent)) or shutil.which("crosshair")
    if exe is None:
        pytest.fail("crosshair is not installed; install the test extras: pip install -e '.[test]'")
    return subprocess.run(
        [exe, "check", "--analysis_kind=PEP316", f"--per_condition_timeout={PER_CONDITION_S}", "--report_all",
         *targets],
        cwd=cwd, capture_output=True, text=True, timeout=TOTAL_S,
    )


def test_decisions_contracts_hold(tmp_path):
    result = _crosshair("recoverykit.model.decisions", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "error" not in result.stdout
    # the contracts were really analysed, not skipped
    assert result.stdout.count("Confirmed over all paths") >= 20, result.stdout


def test_wrong_variant_is_caught(tmp_path):
    result = _crosshair(str(WRONG), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stdout.splitlines() if ": error: " in line]
    assert any("usage_watermark" in line for line in errors), result.stdout
    assert any("next_retry_at_ms" in line for line in errors), result.stdout
