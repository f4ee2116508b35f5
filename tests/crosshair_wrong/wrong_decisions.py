"""Deliberately wrong copies of decisions from recoverykit.model.decisions, with the same contracts.

tests/test_model_crosshair.py runs CrossHair on this file and expects a counterexample for each,
which shows the CrossHair check can fail. Not part of the package; never import it from model/.
"""

from __future__ import annotations


def usage_watermark(current: int, snapshot: int) -> int:
    """WRONG: sums cumulative snapshots instead of keeping the maximum.

    pre: current >= 0 and snapshot >= 0
    post: __return__ >= current and __return__ >= snapshot
    post: __return__ in (current, snapshot)
    """
    return current + snapshot


def next_retry_at_ms(failures: int, first_failure_ms: int, now_ms: int, jitter_permille: int,
                     cooldown_until_ms: int) -> int:
    """WRONG: ignores the 30-minute window after the first failure.

    pre: failures >= 1
    pre: 0 <= first_failure_ms <= now_ms
    pre: -200 <= jitter_permille <= 200
    post: failures <= 5 or __return__ == -1
    post: __return__ == -1 or __return__ >= cooldown_until_ms
    post: __return__ == -1 or __return__ <= first_failure_ms + 1800000
    """
    if failures > 5:
        return -1
    base_ms = (30, 60, 120, 240, 480)[failures - 1] * 1000
    at = now_ms + base_ms + base_ms * jitter_permille // 1000
    return max(at, cooldown_until_ms)
