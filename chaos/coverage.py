"""Coverage: every (interruption point, restart kind) cell, and what the run could say about it.

Per adapter, each cell of the catalogue's points x seed 000's restart kinds is one of:

- ``exercised``: at least one case stopped the runtime there and restarted it that way (for a crash
  during recovery: the second crash landed at a recovery point too);
- ``not_implemented``: the adapter does not declare the failpoint, the restart kind or the profile;
- ``not_reachable``: no scenario passes through the point (e.g. a Jobs point in a chat-only catalogue);
- ``unknown``: cases ran but never reached the point, or ended in an error. A point the adapter
  declares and no case ever hit lands here: reported, never silently skipped;
- ``not_selected``: outside this run's --points / --kinds / --shard (a shard's partial view; merge
  the shards for the whole picture).

Cells combine across shards by precedence (``merge_cells``), so merging is order-independent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from recoverykit.chaos.cases import ADAPTER_KINDS
from recoverykit.model.catalogue import INTERRUPTION_POINTS, RECOVERY_POINTS, Reach, RestartKind

EXERCISED, NOT_IMPLEMENTED, NOT_REACHABLE, UNKNOWN, NOT_SELECTED = (
    "exercised", "not_implemented", "not_reachable", "unknown", "not_selected")
# when shards disagree about a cell, the more informative status wins
_NOTABLE = ("failed", "error", "not_reached")
PRECEDENCE = (EXERCISED, UNKNOWN, NOT_IMPLEMENTED, NOT_REACHABLE, NOT_SELECTED)


def declared_kinds(restart_kinds: Iterable[str], failpoints: Iterable[str]) -> list[str]:
    """Kinds this adapter can be put through: the adapter's own declared ones plus the kit's kills."""
    declared, points = {str(k) for k in restart_kinds}, set(failpoints)
    out = []
    for kind in RestartKind:
        if kind in ADAPTER_KINDS and kind.value not in declared:
            continue
        if kind is RestartKind.CRASH_DURING_RECOVERY and not points & set(RECOVERY_POINTS):
            continue
        out.append(kind.value)
    return out


def declared_points(failpoints: Iterable[str]) -> list[str]:
    """Points the adapter can be stopped at: its declared failpoints plus the environment's own holds."""
    mine = set(failpoints)
    return [p.name for p in INTERRUPTION_POINTS if p.reach is Reach.ENVIRONMENT or p.name in mine]


def classify(results: Iterable[dict[str, Any]], failpoints: Iterable[str], restart_kinds: Iterable[str],
             selected_points: Iterable[str] | None = None, selected_kinds: Iterable[str] | None = None,
             reachable: set[tuple[str, str]] | None = None, never_reached: Iterable[str] = ()
             ) -> dict[str, Any]:
    """The coverage section of a results document.

    ``reachable``: the (point, kind) cells the dry-run trace gives cases (None: every declared cell,
    as for random waves, which follow no trace). ``never_reached``: declared points no scenario's dry
    run reached; they are listed, and they keep a run from being valid.
    """
    fps, kinds_declared = list(failpoints), list(restart_kinds)
    dpoints, dkinds = set(declared_points(fps)), set(declared_kinds(kinds_declared, fps))
    sel_points = set(selected_points) if selected_points is not None else None
    sel_kinds = set(selected_kinds) if selected_kinds is not None else None
    if reachable is None:
        reachable = {(p, k) for p in dpoints for k in dkinds}
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        by_cell[(r["point"], r["kind"])].append(r)
    cells = []
    for p in INTERRUPTION_POINTS:
        for kind in RestartKind:
            cases = by_cell.get((p.name, kind.value), [])
            status, why = _cell_status(p.name, kind.value, cases, dpoints, dkinds, reachable, sel_points, sel_kinds)
            cells.append({"point": p.name, "kind": kind.value, "status": status, "why": why, "cases": len(cases),
                          "failed": sum(c["status"] == "failed" for c in cases),
                          "case_ids": [c["id"] for c in cases if c["status"] in _NOTABLE][:5]})
    out = summarize(cells, sorted(dpoints), sorted(dkinds))
    out["declared_never_reached"] = sorted(set(never_reached))
    return out


def _cell_status(point, kind, cases, dpoints, dkinds, reachable, sel_points, sel_kinds) -> tuple[str, str]:
    ran = [c for c in cases if c["status"] in ("passed", "failed") and not c.get("refused")]  # refused: no kill
    if kind == RestartKind.CRASH_DURING_RECOVERY.value:
        ran = [c for c in ran if c.get("second_reached")]
    if ran:
        return EXERCISED, f"{len(ran)} case(s) reached the point and restarted"
    if point not in dpoints:
        return NOT_IMPLEMENTED, "failpoint not declared by the adapter"
    if kind not in dkinds:
        return NOT_IMPLEMENTED, "restart kind not declared by the adapter"
    if (point, kind) not in reachable:
        return NOT_REACHABLE, "no scenario's dry run passes through this point with this restart kind"
    if (sel_points is not None and point not in sel_points) or (sel_kinds is not None and kind not in sel_kinds):
        return NOT_SELECTED, "outside this run's selection"
    if not cases:
        return NOT_SELECTED, "its cases belong to another shard or scenario selection"
    if kind == RestartKind.CRASH_DURING_RECOVERY.value and cases and all(
            c["status"] in ("passed", "failed") and c.get("second_reached") is False for c in cases):
        # the first crash landed and the runtime came back without running any recovery phase there
        # (nothing to recover after this point), so no second crash during recovery can exist
        return NOT_REACHABLE, "no recovery phase runs after a crash at this point (nothing to recover)"
    if any(c["status"] == "not_implemented" for c in cases) and not any(
            c["status"] in ("error", "not_reached") for c in cases):
        return NOT_IMPLEMENTED, cases[0].get("why", "")
    whys = sorted({c.get("why", c["status"]) for c in cases})
    return UNKNOWN, "declared but never exercised: " + "; ".join(w[:200] for w in whys[:3])


def summarize(cells: list[dict[str, Any]], dpoints: list[str], dkinds: list[str]) -> dict[str, Any]:
    counts: dict[str, int] = defaultdict(int)
    for c in cells:
        counts[c["status"]] += 1
    wanted = [c for c in cells if c["point"] in dpoints and c["kind"] in dkinds
              and c["status"] not in (NOT_REACHABLE, NOT_SELECTED)]
    done = [c for c in wanted if c["status"] == EXERCISED]
    points_hit = sorted({c["point"] for c in done})
    never = sorted({c["point"] for c in wanted} - set(points_hit))
    unknown = [f"{c['point']} x {c['kind']}" for c in wanted if c["status"] == UNKNOWN]
    return {"declared_points": dpoints, "declared_kinds": dkinds, "counts": dict(counts),
            "unknown_cells": unknown,
            "declared_cells": len(wanted), "exercised_cells": len(done),
            "percent": round(100.0 * len(done) / len(wanted), 1) if wanted else 0.0,
            "points_exercised": points_hit, "declared_never_hit": never, "cells": cells}


def merge_cells(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Combine shard coverages cell by cell (the most informative status wins)."""
    parts = list(parts)
    if not parts:
        return summarize([], [], [])
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for part in parts:
        for cell in part["cells"]:
            key = (cell["point"], cell["kind"])
            now = merged.get(key)
            if now is None:
                merged[key] = dict(cell)
                continue
            better = cell if PRECEDENCE.index(cell["status"]) < PRECEDENCE.index(now["status"]) else now
            merged[key] = {**better, "cases": now["cases"] + cell["cases"], "failed": now["failed"] + cell["failed"],
                           "case_ids": (now["case_ids"] + cell["case_ids"])[:5]}
    dpoints = sorted({p for part in parts for p in part["declared_points"]})
    dkinds = sorted({k for part in parts for k in part["declared_kinds"]})
    never = sorted({p for part in parts for p in part.get("declared_never_reached", [])})
    order = {(p.name, k.value): i for i, (p, k) in enumerate((p, k) for p in INTERRUPTION_POINTS for k in RestartKind)}
    out = summarize(sorted(merged.values(), key=lambda c: order.get((c["point"], c["kind"]), 0)), dpoints, dkinds)
    out["declared_never_reached"] = never
    for key in ("dry_run_failed", "dry_run_broken"):  # a shard's broken dry run keeps the merge from valid
        found = {k: v for part in parts for k, v in (part.get(key) or {}).items()}
        if found:
            out[key] = found
    return out
