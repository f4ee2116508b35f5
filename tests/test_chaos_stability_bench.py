"""benchmarks/chaos_stability.py: its comparison and exit code, on canned run results (no processes).

The benchmark itself runs whole systematic runs; here ``systematic.run`` is replaced by canned
documents so the listing of differing cases, the final line and the exit code are checked quickly.
"""

from __future__ import annotations

import importlib.util
import signal
from pathlib import Path

import pytest
from recoverykit.model.errors import Interrupted

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "chaos_stability.py"
IDS = ["sessions_together/recovery.claim.after/1/normal_exit", "sessions_together/recovery.claim.after/1/tree_kill"]


def load():
    spec = importlib.util.spec_from_file_location("chaos_stability", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def canned(statuses_per_run):
    calls = iter(statuses_per_run)

    def run(adapter, **kwargs):
        statuses = next(calls)
        if statuses is None:
            raise RuntimeError("the run broke")
        if statuses == "SIGTERM":  # the signal handler raises this in the main thread (recoverykit.signals)
            raise Interrupted(signal.SIGTERM, "SIGTERM")
        cases = [{"id": i, "status": s, "why": None if s == "passed" else "point never reached", "leftovers": []}
                 for i, s in zip(IDS, statuses, strict=True)]
        return {"verdict": "valid" if set(statuses) == {"passed"} else "unknown", "cases": cases}
    return run


@pytest.mark.parametrize(("runs", "code", "line"), [
    ([("passed", "passed"), ("passed", "passed")], 0, "stable: 2 of 2 cases same status in 2 of 2 runs"),
    ([("passed", "passed"), ("not_reached", "passed"), ("passed", "passed")], 1,
     "stable: 1 of 2 cases same status in 3 of 3 runs"),
    ([("passed", "passed"), None], 1, "stable: 0 of 2 cases same status in 2 of 2 runs"),
])
def test_stability_lists_differing_cases_and_exits_nonzero(tmp_path, monkeypatch, capsys, runs, code, line):
    bench = load()
    monkeypatch.setattr(bench.systematic, "run", canned(runs))
    argv = ["--runs", str(len(runs)), "--scenarios", "sessions_together", "--points", "recovery.claim.after",
            "--kinds", "normal_exit,tree_kill", "--out", str(tmp_path / "o")]
    assert bench.main(argv) == code
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == line
    assert "Traceback" not in out
    if code and runs[1] is not None:
        assert f"{IDS[0]}: run 1 passed, run 2 not_reached, run 3 passed" in out
        assert "run 2: point never reached" in out


def test_stability_refuses_a_bad_selection(capsys):
    assert load().main(["--scenarios", "nope"]) == 64
    assert "unknown scenarios" in capsys.readouterr().err


def test_a_signal_compares_the_runs_that_finished_then_exits_143(tmp_path, monkeypatch, capsys):
    """SIGTERM during run 2: run 1 is still reported and compared, and the benchmark leaves through
    ``signals.finish`` (every process of the run reaped, exit 128 + signum), not with a traceback."""
    bench = load()
    monkeypatch.setattr(bench.systematic, "run", canned([("passed", "passed"), "SIGTERM"]))
    finished = []

    def finish(exc, results):
        finished.append((exc.signum, results))
        raise SystemExit(128 + exc.signum)
    monkeypatch.setattr(bench, "finish", finish)
    with pytest.raises(SystemExit) as exited:
        bench.main(["--runs", "3", "--scenarios", "sessions_together", "--out", str(tmp_path / "o")])
    assert exited.value.code == 143 and finished == [(signal.SIGTERM, tmp_path / "o")]
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == "stable: 2 of 2 cases same status in 1 of 1 runs"
