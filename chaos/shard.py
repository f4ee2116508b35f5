"""Splitting the case list across CI machines: ``--shard K/N`` takes a fixed, disjoint part.

A case belongs to shard ``sha256(case id) mod N``: the assignment depends only on the id, so it is
the same on every machine, does not move when other cases are added or filtered out, and the N
shards together hold every case exactly once. ``recoverykit merge`` joins the shards' results.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from recoverykit.chaos.cases import Case
from recoverykit.model.errors import InvalidArgument

_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based, as people write it: 1/4 .. 4/4
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, case_id: str) -> bool:
        return shard_of(case_id, self.count) == self.index


def parse_shard(text: str | None) -> Shard:
    """``K/N`` with 1 <= K <= N; None or empty means the whole run (1/1)."""
    if text is None or not str(text).strip():
        return Shard(1, 1)
    match = _SHARD_RE.match(str(text))
    if match is None:
        raise InvalidArgument(f"--shard {text!r} is not K/N (e.g. --shard 2/4: the second of four shards)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise InvalidArgument(f"--shard {text!r}: K must be between 1 and N, and N at least 1 (e.g. 1/{max(count, 1)})")
    return Shard(index, count)


def shard_of(case_id: str, count: int) -> int:
    digest = hashlib.sha256(case_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def select(cases: Iterable[Case], shard: Shard) -> list[Case]:
    return [c for c in cases if shard.owns(c.id)]
