"""The maintenance retry policy of seed 001 ("Retry policy and historical adoption").

An initial attempt and five retries at 30, 60, 120, 240 and 480 seconds, each with ±20 % jitter drawn once when
the retry is scheduled and persisted with it (a restart reads it back, never draws again). Scheduling stops 30
minutes after the generation's first failure; a longer provider cooldown takes precedence. The budget is the
count of retries the generation has scheduled, kept in the store: restarts, phase changes and rescans never
replenish it. Times are the runtime's clock (``store.now``: wall time plus the kit's offset), so the kit drives
the schedule by moving the clock, not by waiting.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

DELAYS_S = (30.0, 60.0, 120.0, 240.0, 480.0)
JITTER = 0.2
WINDOW_S = 30 * 60.0


@dataclass(frozen=True)
class Planned:
    attempt: int  # which retry of the generation, 1..5
    due_at: float
    jitter: float
    window_end: float
    cooldown_until: float | None
    cooldown_source: str | None


def plan(retries_used: int, first_failure_at: float, failed_at: float, cooldown_until: float | None = None,
         cooldown_source: str | None = None, rng: random.Random | None = None) -> Planned | None:
    """The next retry after a failure at ``failed_at``, or None when the generation is exhausted."""
    if retries_used >= len(DELAYS_S):
        return None
    window_end = first_failure_at + WINDOW_S
    cooled = cooldown_until is not None and cooldown_until > failed_at
    if failed_at >= window_end and not cooled:
        return None  # scheduling stopped 30 minutes after the first failure
    jitter = round((rng or random).uniform(-JITTER, JITTER), 6)
    due = failed_at + DELAYS_S[retries_used] * (1 + jitter)
    if cooled and cooldown_until > due:
        due = cooldown_until  # a longer provider cooldown takes precedence
    else:
        cooldown_until, cooldown_source = None, None
    return Planned(retries_used + 1, due, jitter, window_end, cooldown_until, cooldown_source)
