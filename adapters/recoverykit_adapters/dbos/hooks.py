"""Failpoints at DBOS step boundaries: what a DBOS user can instrument without touching DBOS.

DBOS has no step callbacks, so the points sit where a DBOS application sees a step begin and end: inside the
step function (before and after its effect) and in the workflow function right after the step call returns.
DBOS runs a step, then writes its output to ``operation_outputs`` (``_record_operation_result_txn``) before the
call returns to the workflow; on recovery it replays a recorded step from that row without running it. What
each point can and cannot mean:

- ``provider.request.before`` (first line of the ``call_model`` step): the step began; nothing reached the
  provider and nothing of the step is durable (DBOS writes no row when a step starts).
- ``usage.persist.before`` (last line of ``call_model``, the response in hand): the provider answered; the
  response, its id and its usage are in the worker's memory only. A kill here loses them, and recovery runs the
  step again (a new attempt).
- ``usage.persist.after`` (in the workflow, after ``call_model`` returned): the step's row, with the response id
  and usage, is committed. Fired only when the step ran in this process, not when DBOS replayed it.
- ``tool.dispatch.before`` (first line of the ``run_tool`` step): the probe has not started; nothing durable.
- ``tool.result.commit.before`` (last line of ``run_tool``, the probe exited): the effect happened, its result is
  in memory only; a kill here makes DBOS run the tool again on recovery (steps are at-least-once).
- ``tool.result.commit.after`` (in the workflow, after ``run_tool`` returned): the result row is committed; a
  recovery replays it and does not run the tool again.

``provider.request.after`` and ``tool.dispatch.after`` have no boundary: the request is sent, and the child
started, inside the step function, where DBOS offers no hook and records nothing. They are not declared.

The ``busy`` markers are for the adapter's ``quiesce`` only (a cancelled workflow's thread can still be inside
a step, calling the provider): they are not DBOS state and never reach ``observe``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from recoverykit.adapter import failpoint

FAILPOINTS = ["provider.request.before", "usage.persist.before", "usage.persist.after", "tool.dispatch.before",
              "tool.result.commit.before", "tool.result.commit.after"]

_ran = threading.local()  # set by a step body that really ran in this thread (not a DBOS replay)


def step_began(point: str, work_id: str) -> None:
    _ran.value = False
    failpoint(point, work_id)


def step_ending(point: str, work_id: str) -> None:
    failpoint(point, work_id)
    _ran.value = True


def step_returned(point: str, work_id: str) -> None:
    """In the workflow function, after a step call returned: its row is committed if the step ran here."""
    if getattr(_ran, "value", False):
        _ran.value = False
        failpoint(point, work_id)


@contextlib.contextmanager
def busy(data_dir: Path, work_id: str) -> Iterator[None]:
    """A marker file while a step of ``work_id`` runs in this process (for ``quiesce``)."""
    folder = Path(data_dir) / "busy"
    folder.mkdir(exist_ok=True)
    marker = folder / f"{work_id}.{os.getpid()}.{threading.get_ident()}"
    marker.write_text(str(os.getpid()))
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)
