"""The bundle a failing chaos case leaves: everything needed to understand and replay it.

When the suite's bundle writer (``recoverykit.conformance.bundle.write_bundle``) is available it is
used, so certify and chaos leave one format. Otherwise the same layout is written here:

    <bundle>/case.json            the case, seed, kit and adapter versions, verdicts, replay command
    <bundle>/history.jsonl        the kit's operation history (invoke / ok / fail / info, faults)
    <bundle>/provider.ledger.jsonl
    <bundle>/witness.jsonl        the probe tools' witness log
    <bundle>/logs/                adapter stderr and the message transcript
    <bundle>/data/                a copy of the runtime's data directory
    <bundle>/REPLAY               the one command that reruns exactly this case
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from recoverykit import __version__ as KIT_VERSION

FORMAT = "recoverykit-bundle/1"


def _safe(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]+", "__", case_id)


def write(bundle_root: Path, case: Any, result: dict[str, Any], env: Any, adapter: Any, seed: int) -> Path:
    target = bundle_root / _safe(case.id)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    target.chmod(0o700)
    meta = {"format": FORMAT, "kind": "chaos-case", "case": case.as_dict(), "seed": seed, "kit_version": KIT_VERSION,
            "adapter_command": adapter, "adapter": result.get("adapter"), "status": result.get("status"),
            "verdict": result.get("verdict"), "violations": result.get("violations"), "clauses": result.get("clauses"),
            "why": result.get("why"), "replay": result.get("replay"), "run_marker": env.marker}
    (target / "case.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    (target / "REPLAY").write_text(str(result.get("replay")) + "\n")
    run_dir = Path(env.run_dir)
    for name in ("history.jsonl", "provider.ledger.jsonl", "witness.jsonl"):
        with contextlib.suppress(OSError):
            shutil.copy2(run_dir / name, target / name)
    with contextlib.suppress(OSError):
        shutil.copytree(run_dir / "adapter", target / "logs", dirs_exist_ok=True)
    with contextlib.suppress(OSError):
        shutil.copytree(run_dir / "data", target / "data", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.sock"))
    _suite_writer(target, meta)
    return target


def _suite_writer(target: Path, meta: dict[str, Any]) -> None:
    """Let the suite's bundle module add its own index if it exists (one format for certify and chaos)."""
    try:
        module = importlib.import_module("recoverykit.conformance.bundle")
    except ImportError:
        return
    index = getattr(module, "write_index", None)
    if callable(index):
        with contextlib.suppress(Exception):
            index(target, meta)
