"""Whether the chaos results given to ``merge`` or ``report`` make up whole runs: complete and homogeneous.

A shard's results say nothing of the shards that are missing: shards 1/3 and 2/3 merged alone look like
a smaller, complete run, since a shard's coverage counts only the cells its own cases reach. So every
results document names its part (``shard``: K/N) and the whole run it belongs to (``run``: the ids of
every case of the selection before ``--shard`` took its part, and the digest of the dry-run trace they
were enumerated from); a merged document keeps the identity of every part it was made of (``parts``),
so merging merges checks the same as merging the shards. The parts are checked before their cases are
joined:

- one kit version, one adapter name and version; otherwise: ``InvalidArgument`` (exit 64);
- the parts of one selection (the same ``--scenarios/--points/--kinds``, mode) are shards of one run: the
  same seed, trace digest, case list and N, each K at most once; otherwise 64. Runs of different selections
  may be merged (a run with ``--durable-writes`` beside one without): each must then be complete itself;
- complete: every K of each run present, every case of its list in some part, no part cut short by a
  signal. Otherwise ``check`` names what is missing, and the merged verdict is unknown at best (exit 2):
  missing evidence is never valid.

Results that name no shard are taken as a whole run (1/1), as written before shards existed; a document
merged before ``parts`` was recorded counts each K it names once.
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
IDENTITY = ("shard", "seed", "mode", "selection", "run", "incomplete", "interrupted_by")


def parts_of(shard: Any) -> tuple[int, list[int]]:
    """(N, the Ks) a shard field names: ``2/3``, or ``1/3+2/3`` once merged; none named: (1, [1])."""
    if shard is None:
        return 1, [1]
    found = [_PART.match(p) for p in str(shard).split("+")]
    if any(m is None for m in found):
        raise InvalidArgument(f"results name their shard {str(shard)[:60]!r}, not K/N (e.g. 2/3)")
    counts = {int(m.group(2)) for m in found if m is not None}
    ks = [int(m.group(1)) for m in found if m is not None]
    if len(counts) != 1 or not all(1 <= k <= min(counts) for k in ks):
        raise InvalidArgument(f"results name their shard {str(shard)[:60]!r}: each part must be K/N with 1 <= K <= N "
                              "and one N")
    return counts.pop(), ks


def identity(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The identities of the original parts a results document is made of (itself, or a merge's ``parts``)."""
    parts = doc.get("parts")
    if isinstance(parts, list) and parts:
        return [dict(p) for p in parts]
    return [{k: doc.get(k) for k in IDENTITY}]


def _digest(ids: Any) -> str | None:
    return None if ids is None else hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def _same(docs: Sequence[dict[str, Any]], what: str, value) -> None:
    first = value(docs[0])
    for i, doc in enumerate(docs[1:], start=2):
        if value(doc) != first:
            raise InvalidArgument(f"these results are not parts of one run: their {what} differs (part 1: "
                                  f"{str(first)[:80]}, part {i}: {str(value(doc))[:80]}); merge the shards of one run "
                                  "(the same seed, kit, adapter and selection; give every shard the same --trace)")


def check(docs: Sequence[dict[str, Any]]) -> list[str]:
    """What is missing from these results for whole runs (empty: complete); ``InvalidArgument`` when they are not
    parts of runs of one kit and adapter, or overlap."""
    _same(docs, "kit version", lambda d: d.get("kit_version"))
    _same(docs, "adapter name", lambda d: (d.get("adapter") or {}).get("name"))
    _same(docs, "adapter version", lambda d: (d.get("adapter") or {}).get("version"))
    runs: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, doc in enumerate(docs, start=1):
        for part in identity(doc):
            key = json.dumps([part.get("mode"), part.get("selection")], sort_keys=True, default=str)
            runs.setdefault(key, []).append((i, part))
    have = {c["id"] for d in docs for c in d["cases"]}
    missing: list[str] = []
    expected: set[str] = set()
    listed = True
    for n, parts in enumerate(runs.values(), start=1):
        where = f" of run {n} (selection {parts[0][1].get('selection')})" if len(runs) > 1 else ""
        idents = [p for _, p in parts]
        _same(idents, "seed", lambda p: p.get("seed"))
        _same(idents, "dry-run trace", lambda p: (p.get("run") or {}).get("trace_sha256"))
        _same(idents, "case list", lambda p: _digest((p.get("run") or {}).get("case_ids")))
        counts = {parts_of(p.get("shard"))[0] for p in idents}
        if len(counts) > 1:
            raise InvalidArgument(f"these results split one run in different numbers of shards ({sorted(counts)}); "
                                  "merge the K/N shards of one split")
        count = counts.pop()
        seen: dict[int, int] = {}
        for i, part in parts:
            for k in sorted(set(parts_of(part.get("shard"))[1])):
                if k in seen:
                    raise InvalidArgument(f"shard {k}/{count}{where} is given twice (parts {seen[k]} and {i}): the "
                                          "shards overlap; give each shard once")
                seen[k] = i
        missing += [f"shard {k}/{count}{where} is missing: its results were not merged, so the run is incomplete"
                    for k in range(1, count + 1) if k not in seen]
        missing += [f"part {i} (shard {p.get('shard')}) is incomplete: interrupted by "
                    f"{p.get('interrupted_by') or 'a signal'}" for i, p in parts if p.get("incomplete")]
        ids = (idents[0].get("run") or {}).get("case_ids")
        if ids is None:
            listed = False
            continue
        expected |= set(ids)
        absent = sorted(set(ids) - have)
        if absent:
            more = f" and {len(absent) - SHOWN} more" if len(absent) > SHOWN else ""
            missing.append(f"{len(absent)} of the {len(ids)} cases{where} are in no merged results: "
                           f"{', '.join(a[:100] for a in absent[:SHOWN])}{more}")
    foreign = sorted(have - expected) if listed else []
    if foreign:
        raise InvalidArgument(f"case {foreign[0][:120]} is in no run's case list ({len(foreign)} such): these "
                              "results are not parts of one run")
    return missing
