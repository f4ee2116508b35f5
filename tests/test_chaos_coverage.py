"""Coverage classification: exercised / not implemented / not reachable / unknown / not selected."""

from __future__ import annotations

from recoverykit.chaos import coverage
from recoverykit.chaos.systematic import verdict_of
from recoverykit.model.catalogue import Verdict

FPS = ["tool.result.commit.before", "recovery.claim.after"]
KINDS = ["normal_exit"]


def case(point, kind, status, **extra):
    return {"id": f"chat_unknown_write/{point}/1/{kind}", "point": point, "kind": kind, "status": status,
            "violations": [], "clauses": [], "leftovers": [], **extra}


def cell(cov, point, kind):
    return next(c for c in cov["cells"] if c["point"] == point and c["kind"] == kind)


def test_each_status():
    results = [case("tool.result.commit.before", "tree_kill", "passed"),
               case("tool.running", "tree_kill", "not_reached", why="never reached"),
               case("input.accept.after", "tree_kill", "not_implemented", why="failpoint not declared")]
    cov = coverage.classify(results, FPS, KINDS)
    assert cell(cov, "tool.result.commit.before", "tree_kill")["status"] == "exercised"
    assert cell(cov, "input.accept.after", "tree_kill")["status"] == "not_implemented"
    assert cell(cov, "tool.running", "frontend_reload")["status"] == "not_implemented"  # kind not declared
    assert cell(cov, "child.delivery.before", "tree_kill")["status"] == "not_implemented"
    unknown = cell(cov, "tool.running", "tree_kill")
    assert unknown["status"] == "unknown" and "never reached" in unknown["why"]
    # a declared point no case ran in this (partial) run is not selected here, never a pass
    assert cell(cov, "tool.result.commit.before", "worker_kill")["status"] == "not_selected"
    assert "tool.running" in cov["declared_never_hit"]


def test_not_reachable_when_no_scenario_combines_point_and_kind():
    # the dry-run trace says which cells have cases: a Jobs point no chat scenario reaches has none
    reachable = {("tool.result.commit.before", "tree_kill")}
    cov = coverage.classify([], [*FPS, "child.delivery.before"], KINDS, reachable=reachable,
                            never_reached=["child.delivery.before"])
    assert cell(cov, "child.delivery.before", "tree_kill")["status"] == "not_reachable"
    assert cell(cov, "tool.result.commit.before", "tree_kill")["status"] == "not_selected"
    assert cov["declared_never_reached"] == ["child.delivery.before"]
    assert "child.delivery.before" not in cov["declared_never_hit"]


def test_crash_during_recovery_counts_only_when_the_second_crash_landed():
    kind = "crash_during_recovery"
    missed = [case("tool.result.commit.before", kind, "passed", second_reached=False),
              case("tool.result.commit.before", kind, "error", why="adapter died")]
    assert cell(coverage.classify(missed, FPS, KINDS), "tool.result.commit.before", kind)["status"] == "unknown"
    landed = [case("tool.result.commit.before", kind, "passed", second_reached=True)]
    assert cell(coverage.classify(landed, FPS, KINDS), "tool.result.commit.before", kind)["status"] == "exercised"


def test_declared_kinds_include_the_kits_kills_only_where_possible():
    assert "crash_during_recovery" not in coverage.declared_kinds([], [])
    assert "crash_during_recovery" in coverage.declared_kinds([], ["recovery.decide.after"])
    assert "tree_kill" in coverage.declared_kinds([], []) and "normal_exit" not in coverage.declared_kinds([], [])


def test_merge_takes_the_most_informative_status_and_sums():
    a = coverage.classify([case("tool.running", "tree_kill", "not_reached", why="x")], FPS, KINDS)
    b = coverage.classify([case("tool.running", "tree_kill", "passed")], FPS, KINDS)
    for merged in (coverage.merge_cells([a, b]), coverage.merge_cells([b, a])):
        got = cell(merged, "tool.running", "tree_kill")
        assert got["status"] == "exercised" and got["cases"] == 2


def test_verdicts():
    passed = [case("tool.running", "tree_kill", "passed")]
    cov = coverage.classify(passed, FPS, KINDS)
    assert verdict_of(passed, {**cov, "declared_never_hit": []})[0] is Verdict.VALID
    failed = [*passed, case("tool.running", "worker_kill", "failed", violations=["broke FA-15: ..."])]
    assert verdict_of(failed, cov)[0] is Verdict.INVALID
    leaked = [case("tool.running", "tree_kill", "passed", leftovers=[123])]
    assert verdict_of(leaked, {"declared_never_hit": []})[0] is Verdict.UNKNOWN
    assert verdict_of(passed, {"declared_never_hit": ["tool.running"]})[0] is Verdict.UNKNOWN
    assert verdict_of([], {"declared_never_hit": []})[0] is Verdict.UNKNOWN


def test_an_unknown_cell_makes_the_run_unknown_even_when_its_point_was_hit_elsewhere():
    results = [case("tool.result.commit.before", "tree_kill", "passed"),
               case("tool.result.commit.before", "worker_kill", "not_reached", why="never reached")]
    cov = coverage.classify(results, FPS, KINDS)
    assert cov["declared_never_hit"] == [] or "tool.result.commit.before" not in cov["declared_never_hit"]
    verdict, reasons = verdict_of(results, cov)
    assert verdict is Verdict.UNKNOWN
    assert any("tool.result.commit.before x worker_kill" in r for r in reasons)


def test_crash_during_recovery_after_a_point_with_nothing_to_recover_is_not_reachable():
    kind = "crash_during_recovery"
    results = [case("tool.result.commit.before", kind, "passed", second_reached=False) for _ in range(3)]
    assert cell(coverage.classify(results, FPS, KINDS), "tool.result.commit.before", kind)["status"] == \
        "not_reachable"


def test_a_declared_point_no_dry_run_reached_keeps_the_run_from_valid():
    results = [case("tool.result.commit.before", "tree_kill", "passed")]
    cov = coverage.classify(results, FPS, ["tree_kill"], reachable={("tool.result.commit.before", "tree_kill")},
                            never_reached=["recovery.claim.after"])
    verdict, reasons = verdict_of(results, cov)
    assert verdict is Verdict.UNKNOWN
    assert any("recovery.claim.after never reached by any scenario's dry run" in r for r in reasons)


def test_points_of_a_profile_without_chaos_cells_are_not_counted_never_reached():
    """The approval scenarios make their moves (a user's decision) and kill at approval.consume.* themselves
    (certify); no dry run can reach those points, so a declared one is not held against a whole chaos run. A
    point of a profile with chaos cells (waits) still is."""
    from recoverykit.chaos.dry_run import TRACE_KIND, Trace
    from recoverykit.chaos.systematic import never_reached
    trace = Trace.from_dict({"kind": TRACE_KIND, "adapter": {}, "reached": {}})
    declared = {"failpoints": ["approval.consume.before", "wait.notify.after"],
                "profiles": ["chat_core", "approvals", "waits"]}
    assert never_reached(trace, declared) == ["wait.notify.after"]
