"""The executable specification of restart recovery (pure: no I/O, no processes, no sockets).

Layout: ``catalogue`` (shared vocabulary) and ``contract`` (the numbered clauses) name things;
``records``, ``state`` and ``events`` are the frozen pydantic data; ``decisions`` holds the pure,
CrossHair-checked decision functions; ``transitions`` (client operations, runtime progress) and
``recovery`` (faults, start, restart kinds) are the transition function; ``abstract``,
``abstract_events``, ``invariants`` and ``explore`` are the compact model that bounded exploration
walks. Everything a caller needs is re-exported here; the modules behind it may change.

Driving the model (what a lockstep suite does)::

    from recoverykit.model import ModelState, apply, successors, events as ev
    state = ModelState()                                   # runtime up on host "host-a", no work
    state = apply(state, ev.Submit(work_id="w1", text="hi"))
    state = apply(state, ev.Admit(work_id="w1", turn_id="t1"))
    after = successors(state, ev.InFlight(op=ev.Pause(work_id="w1"), point="input.accept.after"))
    # -> (crash without the pause, crash with the pause): accept whichever the runtime shows

``apply`` raises a ``ModelError`` subclass (``UnknownWorkItem``, ``StaleVersion``,
``MalformedRecord``, ``EventNotEnabled``) for bad input and never changes the state it was given.
"""

from recoverykit.model import decisions, events
from recoverykit.model.errors import (
    EventNotEnabled,
    InvalidArgument,
    MalformedRecord,
    ModelError,
    RecoveryKitError,
    StaleVersion,
    UnknownWorkItem,
)
from recoverykit.model.events import InFlight, parse_event
from recoverykit.model.explore import ExploreResult, Violation, explore
from recoverykit.model.invariants import ALL_INVARIANTS, Invariant
from recoverykit.model.records import (
    Approval,
    Budget,
    DurableWait,
    Goal,
    Lease,
    OwnerIdentity,
    Requirement,
    RetryGeneration,
    RetryReceipt,
    RunIntent,
    TerminalSnapshot,
    ToolCall,
    Turn,
    UsageReceipt,
)
from recoverykit.model.state import ModelState, RuntimePhase
from recoverykit.model.transitions import apply, successors

__all__ = [
    "ALL_INVARIANTS",
    "Approval",
    "Budget",
    "DurableWait",
    "EventNotEnabled",
    "ExploreResult",
    "Goal",
    "InFlight",
    "InvalidArgument",
    "Invariant",
    "Lease",
    "MalformedRecord",
    "ModelError",
    "ModelState",
    "OwnerIdentity",
    "RecoveryKitError",
    "Requirement",
    "RetryGeneration",
    "RetryReceipt",
    "RunIntent",
    "RuntimePhase",
    "StaleVersion",
    "TerminalSnapshot",
    "ToolCall",
    "Turn",
    "UnknownWorkItem",
    "UsageReceipt",
    "Violation",
    "apply",
    "decisions",
    "events",
    "explore",
    "parse_event",
    "successors",
]
