"""The runtime's database handle: one sqlite3 connection and the three conveniences the runtime uses.

The runtime writes every statement itself (its transactions and generation fencing are the point),
so all it took from sqlite-utils was ``query`` / ``execute`` / ``table_names``; importing sqlite-utils
was ~90 ms of every adapter's start (decision D13).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any


class Database:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: tuple | dict = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def query(self, sql: str, params: tuple | dict = ()) -> Iterator[dict[str, Any]]:
        """Rows as dicts, column name to value."""
        cursor = self.conn.execute(sql, params)
        keys = [d[0] for d in cursor.description or ()]
        for row in cursor:
            yield dict(zip(keys, row, strict=True))

    def table_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
