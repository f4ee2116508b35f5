"""The failpoint client, importable: ``from recoverykit.adapter import failpoint, failpoint_async``.

The one implementation is conformance/failpoint_client.py, a standard-library file that runtimes which
cannot depend on recoverykit still copy as it is; a runtime written on the SDK imports it from here
instead. Importing it loads no pydantic and no model (it is what every runtime process imports).

``failpoint`` blocks the calling thread while a ``pause`` is held (and during a ``sleep``). Called on an
asyncio event loop's thread it therefore stops the whole loop: every other task of the process, not only the
one at the point, and the kit then sees a runtime frozen where it meant to hold one step. In a coroutine call
``await failpoint_async(point, work_id)`` instead: an unarmed point costs the same one lookup; an armed one
waits for the broker in a worker thread (``asyncio.to_thread``) while the loop keeps running the other tasks.
A ``crash`` still kills the whole process, as it must.
"""

from __future__ import annotations

import asyncio

from recoverykit.conformance import failpoint_client as _client
from recoverykit.conformance.failpoint_client import ENV_FAILPOINT_SOCKET, ENV_FAILPOINTS, failpoint

__all__ = ["ENV_FAILPOINTS", "ENV_FAILPOINT_SOCKET", "failpoint", "failpoint_async"]


async def failpoint_async(point: str, work_id: str | None = None, detail: dict | None = None) -> None:
    """``failpoint`` for a coroutine: a pause or a sleep holds this task only, never the event loop."""
    if point not in _client._ARMED:  # read at each call: ``reload`` rebinds the table
        return
    await asyncio.to_thread(failpoint, point, work_id, detail)
