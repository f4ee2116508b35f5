"""Whether the chaos results given to ``merge`` or ``report`` make up one whole run: complete and homogeneous.

A shard's results say nothing of the shards that are missing: shards 1/3 and 2/3 merged alone look like
a smaller, complete run, since a shard's coverage counts only the cells its own cases reach. So every
results document names its part (``shard``: K/N) and the whole run it belongs to (``run``: the ids of
every case of the selection before ``--shard`` took its part, and the digest of the dry-run trace they
were enumerated from), and the parts are checked before their cases are joined:

- homogeneous: one N, and the same seed, kit version, adapter name and version, mode, selection, trace
  digest and case list; otherwise they are parts of different runs (``InvalidArgument``: exit 64);
- each K of 1..N at most once (twice: 64); a case that is not in the run's case list: 64;
- complete: every K of 1..N present, every case of the run's list in some part, no part cut short by a
  signal. Otherwise ``missing`` names what is missing, and the merged verdict is unknown at best (exit 2):
  missing evidence is never valid.

Results that name no shard are taken as a whole run (1/1), as written before shards existed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from recoverykit.model.errors import InvalidArgument

_PART = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
SHOWN = 5  # case ids named in a message; the rest are counted


def parts_of(doc: dict[str, Any]) -> tuple[int, list[int]]:
    """(N, the Ks) a results document holds: ``2/3``, or ``1/3+2/3`` once merged; none named: (1, [1])."""
    text = doc.get("shard")
    if text is None:
        return 1, [1]
    found = [_PART.match(p) for p in str(text).split("+")]
    if not found or any(m is None for m in found):
        raise InvalidArgument(f"results name their shard {str(text)[:60]!r}, not K/N (e.g. 2/3)")
    counts = {int(m.group(2)) for m in found if m is not None}
    ks = [int(m.group(1)) for m in found if m is not None]
    if len(counts) != 1 or not all(1 <= k <= min(counts) for k in ks):
        raise InvalidArgument(f"results name their shard {str(text)[:60]!r}: each part must be K/N with 1 <= K <= N "
                              "and one N")
    return counts.pop(), ks


def _identity(doc: dict[str, Any]) -> dict[str, Any]:
    adapter = doc.get("adapter") or {}
    run = doc.get("run") or {}
    ids = run.get("case_ids")
    return {"kit version": doc.get("kit_version"), "seed": doc.get("seed"), "mode": doc.get("mode"),
            "adapter name": adapter.get("name"), "adapter version": adapter.get("version"),
            "selection": json.dumps(doc.get("selection"), sort_keys=True, default=str),
            "dry-run trace": run.get("trace_sha256"),
            "case list": None if ids is None else hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]}


def _shown(values: Sequence[Any]) -> str:
    return ", ".join(str(v)[:80] for v in values)


def check(parts: Sequence[dict[str, Any]]) -> list[str]:
    """What is missing from these parts for a whole run (empty: complete); ``InvalidArgument`` when they are not
    the parts of one run or overlap."""
    first = _identity(parts[0])
    for i, part in enumerate(parts[1:], start=2):
        for key, value in _identity(part).items():
            if value != first[key]:
                raise InvalidArgument(f"these results are not shards of one run: their {key} differs (part 1: "
                                      f"{str(first[key])[:80]}, part {i}: {str(value)[:80]}); merge the shards of one "
                                      "run (the same seed, kit, adapter and selection; give every shard the same "
                                      "--trace)")
    counts = {parts_of(p)[0] for p in parts}
    if len(counts) > 1:
        raise InvalidArgument(f"these results split the run in different numbers of shards ({sorted(counts)}); merge "
                              "the K/N shards of one split")
    count = counts.pop()
    seen: dict[int, int] = {}
    for i, part in enumerate(parts, start=1):
        for k in parts_of(part)[1]:
            if k in seen:
                raise InvalidArgument(f"shard {k}/{count} is given twice (parts {seen[k]} and {i}): the shards "
                                      "overlap; give each shard once")
            seen[k] = i
    missing = [f"shard {k}/{count} is missing: its results were not merged, so the run is incomplete"
               for k in range(1, count + 1) if k not in seen]
    missing += [f"part {i} (shard {p.get('shard')}) is incomplete: "
                f"{'interrupted by ' + str(p.get('interrupted_by')) if p.get('interrupted_by') else 'cut short'}"
                for i, p in enumerate(parts, start=1) if p.get("incomplete")]
    expected = (parts[0].get("run") or {}).get("case_ids")
    if expected is not None:
        have = {c["id"] for p in parts for c in p["cases"]}
        foreign = sorted(have - set(expected))
        if foreign:
            raise InvalidArgument(f"case {foreign[0][:120]} is not in the run's case list ({len(foreign)} such): "
                                  "these results are not shards of one run")
        absent = sorted(set(expected) - have)
        if absent:
            more = f" and {len(absent) - SHOWN} more" if len(absent) > SHOWN else ""
            missing.append(f"{len(absent)} of the run's {len(expected)} cases are in no merged results: "
                           f"{_shown(absent[:SHOWN])}{more}")
    return missing
