"""recoverykit.adapter: the part of an adapter every Python adapter writes again (docs/adapter-guide.md).

- ``Adapter``, ``Refused`` (``wire``): the dispatch loop, overlapping requests, replies checked against
  the protocol's own schemas before they are sent;
- ``RuntimeEnv`` (``runtime_env``): what the kit gave, and the environment of every runtime process (run
  marker, failpoints, host id, clock offset); ``from_environment``, ``clock``, ``signal_ready`` on the
  runtime's side;
- ``Supervisor`` (``processes``): starting runtime processes with a ready check, ``processes`` with psutil
  create times, stopping them;
- ``quiesce`` (``quiescence``): a ``quiesce`` that always answers in time, even while the kit kills processes;
- ``observe``: record builders, ``snapshot``, ``continuation_key``;
- ``failpoint``, ``failpoint_async`` (``failpoints``): the failpoint client; the async one holds a coroutine,
  never its event loop;
- ``RunIntentStore`` (``intent``): the durable run intent (desired state, control version, turns, attribution
  before dispatch, retries) for a framework that keeps none, with ``observe`` built from it;
- ``IntentAdapter`` (``intent_adapter``): the protocol side of such an adapter, written once: controls in the
  store, one supervised worker, ``pending`` and ``observe`` from the store;
- ``RetryPolicy`` (``retry``): bounded exponential backoff with a cap, and its waiting reason;
- ``DURABLE_WRITE_POINTS`` (``durable_writes``): declare them in ``failpoints`` and every process started with
  ``RuntimeEnv.environ`` can be stopped before and after each SQLite commit, fsync and atomic rename it makes.

It imports nothing of the model, chaos or the reference runtime (an import-linter contract holds it to
that); only the failpoint client is shared with conformance/. The names load on first use, so a runtime
process that imports only ``failpoint`` or ``signal_ready`` does not pay for jsonschema and psutil.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Adapter": "wire", "Refused": "wire",
    "RuntimeEnv": "runtime_env", "WorkerEnv": "runtime_env", "from_environment": "runtime_env",
    "clock": "runtime_env", "signal_ready": "runtime_env",
    "Supervisor": "processes", "StartFailed": "processes", "identity": "processes",
    "quiesce": "quiescence",
    "failpoint": "failpoints", "failpoint_async": "failpoints",
    "RunIntentStore": "intent", "RetryPolicy": "retry", "IntentAdapter": "intent_adapter",
    "DURABLE_WRITE_POINTS": "durable_writes",
}
__all__ = sorted([*_EXPORTS, "observe"])


def __getattr__(name: str) -> Any:
    if name == "observe":
        return importlib.import_module(f"{__name__}.observe")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
