"""Does ``recoverykit check`` on a stored bundle give the verdict the run gave it (``bundle.json``)?

A bundle is the evidence of a verdict: every fact certify or chaos judged on is in its history, so a re-check
must never call valid what the run called invalid, nor invalid what it did not (issue 27, item 6).
Used by the adversarial suite (tests/test_adversarial_*.py) on the bundles its cases leave.
"""

from __future__ import annotations

import json
from pathlib import Path

from env_helpers import cli_in_process

EXIT = {"valid": 0, "invalid": 1, "unknown": 2}


def bundles_under(out: Path) -> list[Path]:
    return sorted(p.parent for p in Path(out).rglob("bundle.json"))


def disagreements(out: Path) -> list[str]:
    """One line per bundle under ``out`` whose re-check differs from its stored verdict: invalid must re-check
    invalid; a bundle the run did not find invalid must not re-check invalid; an unknown one never valid."""
    found = []
    for bundle in bundles_under(out):
        stored = json.loads((bundle / "bundle.json").read_text())["verdict"]
        code, text = cli_in_process("check", str(bundle), "--json")
        assert "Traceback" not in text, text
        assert code in (0, 1, 2), f"check {bundle}: exit {code}: {text[-2000:]}"
        rechecked = {v: k for k, v in EXIT.items()}[code]
        if (stored == "invalid") != (rechecked == "invalid") or (stored == "unknown" and rechecked == "valid"):
            found.append(f"{bundle.name}: bundle.json says {stored}, check says {rechecked}")
    return found
