"""How the kit's environment reaches the interruption points of reach ``environment``.

No runtime code is involved: the provider holds a request, a probe runs long or holds its result.
Each function returns the script fault or the probe arguments to use; the kit then waits for the
matching signal (``provider.wait_for_held``, ``witness.wait_for_execution``, the broker's
``tool.finished.uncommitted`` hit) and kills or releases. A catalogue point of reach ``environment``
without an entry here fails a test, so the vocabulary and the environment cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from recoverykit.conformance.provider_script import Fault
from recoverykit.model.catalogue import INTERRUPTION_POINTS, Reach
from recoverykit.model.errors import InvalidArgument

PROVIDER_POINTS = ("provider.request.inflight", "provider.response.midstream")
PROBE_POINTS = ("tool.running", "tool.finished.uncommitted")
ENVIRONMENT_POINTS: tuple[str, ...] = tuple(p.name for p in INTERRUPTION_POINTS if p.reach is Reach.ENVIRONMENT)


def provider_fault(point: str, *, attempts: list[int] | None = None, at_chunk: int = 2) -> Fault:
    """The script fault that holds a request at ``point`` (``attempts`` None: every attempt).

    Mid-stream holds after ``at_chunk`` chunks; give the step ``usage_style: cumulative`` so some usage has
    reached the runtime by then.
    """
    if point == "provider.request.inflight":
        return Fault(kind="hold", at_chunk=0, attempts=attempts)
    if point == "provider.response.midstream":
        if at_chunk < 1:
            raise InvalidArgument(f"a mid-stream hold needs at_chunk >= 1, got {at_chunk}")
        return Fault(kind="hold", at_chunk=at_chunk, attempts=attempts)
    raise InvalidArgument(f"{point!r} is not reached by the provider; provider points: {PROVIDER_POINTS}")


def probe_arguments(point: str, *, sleep_s: float = 60.0) -> dict[str, Any]:
    """Extra tool-call arguments that make a probe stop at ``point``."""
    if point == "tool.running":
        return {"sleep_s": sleep_s}
    if point == "tool.finished.uncommitted":
        return {"hold": True}
    raise InvalidArgument(f"{point!r} is not reached by a probe; probe points: {PROBE_POINTS}")
