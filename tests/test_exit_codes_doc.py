"""docs/exit-codes.md gives the exit code of every way a certify or chaos run can end (issue 27), and both
commands' pages link to it. Grep-level: each ending's row names its code; the codes are the kit's own."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
from recoverykit.cli import Exit
from recoverykit.conformance.interrupts import exit_code

DOCS = Path(__file__).resolve().parent.parent / "docs"

# (words that must be in the row, the exit code the row must give)
ENDINGS = [
    ("valid:", int(Exit.VALID)),
    ("invalid:", int(Exit.INVALID)),
    ("unknown:", int(Exit.UNKNOWN)),
    ("usage error", int(Exit.USAGE)),
    ("kit defect", int(Exit.SOFTWARE)),
    ("SIGINT", exit_code(signal.SIGINT)),
    ("SIGTERM", exit_code(signal.SIGTERM)),
    ("SIGHUP", exit_code(signal.SIGHUP)),
    ("disk full", int(Exit.UNKNOWN)),
    ("hung adapter", int(Exit.UNKNOWN)),
    ("protocol break", int(Exit.INVALID)),
]


def _rows() -> dict[str, int]:
    rows = {}
    for line in (DOCS / "exit-codes.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.fullmatch(r"\d+", cells[1]):
            rows[cells[0]] = int(cells[1])
    return rows


@pytest.mark.parametrize("words,code", ENDINGS, ids=[w for w, _ in ENDINGS])
def test_the_exit_code_table_lists_every_way_a_run_ends(words, code):
    matching = [exit for ending, exit in _rows().items() if ending.startswith(words)]
    assert matching, f"docs/exit-codes.md has no row for {words!r}"
    assert matching == [code], f"docs/exit-codes.md gives {words!r} exit {matching}, the kit exits {code}"


@pytest.mark.parametrize("page", ["certify.md", "chaos.md"])
def test_certify_and_chaos_docs_link_the_table_and_name_sighup(page):
    text = (DOCS / page).read_text()
    assert "(exit-codes.md)" in text
    assert "129" in text and "SIGHUP" in text
