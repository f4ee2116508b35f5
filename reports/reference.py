"""The committed failure-acceptance report of the reference runtime (``reports/reference/``).

``results.json.gz`` is the results document of a whole systematic run against the bundled reference
runtime; ``report.md`` and ``report.html`` are rendered from it. A test rebuilds both from the stored
results, so the committed report can never drift from its evidence or from the report code.
Regenerate after a new run with::

    python -m recoverykit.reports.reference path/to/results.json

and re-render the stored results after a change of the report's layout (no new run) with::

    python -m recoverykit.reports.reference --rerender
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

from recoverykit.reports import readable, render

FOLDER = Path(__file__).resolve().parent / "reference"
COMMAND = "python -m recoverykit.reports.reference path/to/results.json"


def load() -> dict[str, Any]:
    with gzip.open(FOLDER / "results.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)


def rendered(results: dict[str, Any]) -> dict[str, str]:
    page = readable.view(results)
    return {"report.md": render.markdown(page, generated_by=COMMAND), "report.html": render.html(page)}


def rerender() -> None:
    """report.md and report.html rendered again from the stored results.json.gz (a new layout, same evidence)."""
    for name, text in rendered(load()).items():
        (FOLDER / name).write_text(text, encoding="utf-8")


def regenerate(results_path: str | Path) -> None:
    results = json.loads(Path(results_path).read_text(encoding="utf-8"))
    FOLDER.mkdir(exist_ok=True)
    # mtime=0: the same results always give the same bytes, so the file only changes when they do
    with gzip.GzipFile(FOLDER / "results.json.gz", "wb", mtime=0) as f:
        f.write((json.dumps(results, sort_keys=True, indent=0) + "\n").encode())
    rerender()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {COMMAND}, or --rerender to render the stored results again")
    if sys.argv[1] == "--rerender":
        rerender()
    else:
        regenerate(sys.argv[1])
