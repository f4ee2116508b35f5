"""The bundle a failing chaos case leaves: certify's bundle format, so ``recoverykit check`` re-reads it.

Layout (``conformance/bundle.py``, docs/certify.md#bundle-format)::

    bundle.json            seed, kit and adapter versions, case, verdict, clause results, replay command,
                           the observed sections (plus, for chaos, the case's point, hit and restart kind)
    history.jsonl          the kit's operation history (invoke / ok / fail / info, observations, faults)
    provider-ledger.jsonl  every provider request and response
    witness.jsonl          every real probe tool execution
    adapter.messages.jsonl every protocol line both ways; adapter.stderr.log: the adapter's logs
    data/                  a copy of the runtime's data directory at the end of the case
    REPLAY                 the one command that reruns exactly this case
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from recoverykit import __version__ as KIT_VERSION
from recoverykit.conformance.private_files import copy_file, copy_tree, private_dir, privatize, write_private

MANIFEST = "bundle.json"
_COPIES = {"history.jsonl": "history.jsonl", "provider.ledger.jsonl": "provider-ledger.jsonl",
           "witness.jsonl": "witness.jsonl", "adapter/adapter.messages.jsonl": "adapter.messages.jsonl",
           "adapter/adapter.stderr.log": "adapter.stderr.log"}


def safe_name(case_id: str) -> str:
    """The bundle folder's name for a case id."""
    return re.sub(r"[^A-Za-z0-9_.@-]+", "__", case_id)


def write(bundle_root: Path, case: Any, result: dict[str, Any], env: Any, adapter: Any, seed: int) -> Path:
    target = bundle_root / safe_name(case.id)
    if target.exists():
        shutil.rmtree(target)
    private_dir(Path(bundle_root))
    target.mkdir(mode=0o700)
    target.chmod(0o700)
    run_dir = Path(env.run_dir)
    for source, name in _COPIES.items():
        copy_file(run_dir / source, target / name)
    copied = copy_tree(run_dir / "data", target / "data")  # links stay links; bounded, holes kept
    init_ok = getattr(env, "init_ok", None)
    manifest = {
        "case": case.id, "kind": "chaos", "verdict": result.get("verdict"), "status": result.get("status"),
        "message": "; ".join(result.get("violations") or []) or result.get("why"), "seed": seed,
        "kit_version": KIT_VERSION, "adapter": {"command": adapter, **(result.get("adapter") or {})},
        "observes": sorted(s.value for s in init_ok.observes) if init_ok is not None else [],
        "clauses": sorted({c["clause"] for c in result.get("clauses", [])}), "results": result.get("clauses", []),
        "program": None, "replay": result.get("replay"), "run_dir": str(run_dir), "chaos": case.as_dict(),
        "run_marker": env.marker, "data_copy": copied,
    }
    write_private(target / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
    write_private(target / "REPLAY", str(result.get("replay")) + "\n")
    privatize(target)  # as private as the run it comes from: dirs 0700, files 0600
    return target
