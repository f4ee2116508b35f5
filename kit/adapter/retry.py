"""A bounded retry policy with a waiting reason, for runtimes whose framework retries nothing by itself.

A failed provider call or tool step is retried after a wait that grows (exponential backoff, capped), and
only so many times: past ``max_attempts`` the work item fails with ``retry_exhausted`` and a person decides
(the contract's Retry). While it waits, the work item says so: status ``waiting``, reason ``retry_scheduled``
(the seeds' vocabulary, docs/contract.md), with the time of the next attempt kept durably
(``RunIntentStore.retry_later``), so a restarted runtime honours the wait instead of retrying at once.

A framework that has its own step retries (DBOS's ``retries_allowed``) keeps them: pass it the numbers of a
``RetryPolicy`` so one policy is written down, and let the framework do the retrying.
"""

from __future__ import annotations

from dataclasses import dataclass

RETRY_SCHEDULED = "retry_scheduled"  # status waiting: the next attempt is due at a durable time
RETRY_EXHAUSTED = "retry_exhausted"  # status failed: max_attempts failed; a person decides


@dataclass(frozen=True)
class RetryPolicy:
    """``delay(n)``: the wait after the n-th failed attempt, ``initial_s * factor**(n-1)`` capped at ``cap_s``;
    None once ``max_attempts`` attempts have failed (no retry left)."""

    initial_s: float = 0.3
    factor: float = 2.0
    cap_s: float = 10.0
    max_attempts: int = 8

    def __post_init__(self) -> None:
        if self.initial_s < 0 or self.cap_s < self.initial_s or self.factor < 1 or self.max_attempts < 1:
            raise ValueError(f"bad retry policy {self}: need 0 <= initial_s <= cap_s, factor >= 1, "
                             "max_attempts >= 1")

    def delay(self, failed_attempts: int) -> float | None:
        if failed_attempts < 1:
            raise ValueError(f"failed_attempts counts from 1, not {failed_attempts}")
        if failed_attempts >= self.max_attempts:
            return None
        return min(self.cap_s, self.initial_s * self.factor ** (failed_attempts - 1))

    def delays(self) -> list[float]:
        """Every wait the policy allows, in order (``max_attempts - 1`` of them)."""
        return [self.delay(n) for n in range(1, self.max_attempts)]  # type: ignore[misc]
