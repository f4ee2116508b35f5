"""Which clauses a mutant of the reference runtime has proven the kit's checks can fail on.

A check that cannot fail is a defect: a clause the kit calls ``valid`` means something only if some realistic
bug makes the same check say ``invalid`` for that clause. The mutant library lives outside the product
(``tests/mutants/``); its result ships here, in ``proofs.json`` ({clause: [mutant names]}), written by
``python benchmarks/mutants.py --write-proofs`` and kept honest by CI: ``tests/test_mutants.py`` runs every
mutant against its case and fails when the file names a mutant that no longer kills its clause, or misses one.

A clause judged ``valid`` with no entry here is reported ``unproven``: judged, but by a check nobody has yet
seen fail, so it does not count as judged in ``recoverykit contract coverage``.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

PROOFS = Path(__file__).with_name("proofs.json")


@cache
def proven() -> dict[str, tuple[str, ...]]:
    """clause id -> the mutants whose kill names it (empty when the file is missing or unreadable)."""
    try:
        data = json.loads(PROOFS.read_text())
    except (OSError, ValueError):
        return {}
    return {c: tuple(names) for c, names in data.get("clauses", {}).items()}


def proof_of(clause_id: str) -> str:
    """``mutant`` when a killing mutant proves the clause's check, else ``unproven``."""
    return "mutant" if proven().get(clause_id) else "unproven"
