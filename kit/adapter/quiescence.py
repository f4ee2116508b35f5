"""``quiesce`` that always answers in time, whatever happens to the runtime meanwhile.

The kit may kill runtime processes while a ``quiesce`` is waiting (that is what chaos does), and a read of
the store may then fail half-way (a locked or half-written SQLite file, a vanished socket). Such a read
counts as "not quiescent yet", never as an error and never as quiescent; the answer comes by the deadline
with what was last seen pending. ``busy`` covers what the store cannot show yet, such as a submit the
adapter is still forwarding.
"""

from __future__ import annotations

import time
from collections.abc import Callable

MARGIN_S = 0.5  # answer this much before the kit's timeout_s, so the reply is never late


def quiesce(timeout_s: float, pending: Callable[[], list[dict[str, str]]],
            busy: Callable[[], bool] = lambda: False, poll_s: float = 0.02) -> dict:
    deadline = time.monotonic() + max(0.0, timeout_s - MARGIN_S)
    last: list[dict[str, str]] = []
    while True:
        try:
            last = [{"work_id": p["work_id"], "status": p["status"]} for p in pending()]
            readable = True
        except Exception:  # a read torn by a kill: not quiescent yet; try again
            readable = False
        quiet = readable and not last and not busy()
        if quiet or time.monotonic() >= deadline:
            return {"quiescent": quiet, "pending": last}
        time.sleep(poll_s)
