"""A run's results as a SQLite database (``results.db``), for questions results.json makes awkward.

Which (point, restart kind) cells failed, which clauses broke where, which cases were slowest: one
query each, with ``sqlite-utils query results.db "..."``, Datasette or any SQLite client. The
database is derived from results.json and rewritten with it (``write_all``); results.json stays
the record that reports are checked against.

Tables: ``cases`` (one row per case, its timings flattened to ``t_<mark>`` columns), ``clauses``
(case_id, clause, verdict, text) and ``cells`` (the coverage matrix).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlite_utils

RESULTS_DB = "results.db"
TIMING_MARKS = ("started", "reached", "restarted", "recovered", "verified", "total")


CASE_COLUMNS: dict[str, type] = {
    "id": str, "scenario": str, "point": str, "hit": int, "kind": str, "second": str, "status": str, "verdict": str,
    "why": str, "violations": int, "leftovers": int, "reached_via": str, "warm_spare": int, "replay": str,
    **{f"t_{mark}": float for mark in TIMING_MARKS}}


def case_row(case: dict[str, Any]) -> dict[str, Any]:
    timings = case.get("timings") or {}
    adapter = case.get("adapter") or {}
    return {"id": case["id"], "scenario": case.get("scenario"), "point": case.get("point"), "hit": case.get("hit"),
            "kind": case.get("kind"), "second": case.get("second"), "status": case.get("status"),
            "verdict": case.get("verdict"), "why": case.get("why"), "violations": len(case.get("violations") or []),
            "leftovers": len(case.get("leftovers") or []), "reached_via": (case.get("reached") or {}).get("via"),
            "warm_spare": adapter.get("warm_spare"), "replay": case.get("replay"),
            **{f"t_{mark}": timings.get(mark) for mark in TIMING_MARKS}}


def write(results: dict[str, Any], path: str | Path) -> Path:
    """(Re)create the database at ``path`` from a results document."""
    path = Path(path)
    path.unlink(missing_ok=True)
    db = sqlite_utils.Database(path)
    try:
        # Every table exists even when it has no rows (insert_all([]) creates none): a run where no case
        # produced a clause result still gets its database, and a query on it finds nothing, not an error.
        db["cases"].create(CASE_COLUMNS, pk="id", if_not_exists=True)
        db["clauses"].create({"case_id": str, "clause": str, "verdict": str, "text": str},
                             foreign_keys=[("case_id", "cases", "id")], if_not_exists=True)
        db["cells"].create({"point": str, "kind": str, "why": str}, pk=("point", "kind"), if_not_exists=True)
        db["cases"].insert_all((case_row(c) for c in results.get("cases", [])), pk="id", alter=True)
        clauses = ({"case_id": c["id"], **{k: cl.get(k) for k in ("clause", "verdict", "text")}}
                   for c in results.get("cases", []) for cl in c.get("clauses", []))
        db["clauses"].insert_all(clauses, alter=True)
        db["cells"].insert_all(({k: v for k, v in cell.items() if k != "case_ids"}
                                for cell in (results.get("coverage") or {}).get("cells", [])),
                               pk=("point", "kind"), alter=True)
        for table, column in (("clauses", "clause"), ("clauses", "case_id"), ("cases", "status")):
            db[table].create_index([column], if_not_exists=True)
    finally:
        db.close()
    return path
