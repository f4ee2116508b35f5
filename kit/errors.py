"""recoverykit's error tree, in one place.

User mistakes (``InvalidArgument``, ``UsageError``) are distinct from a runtime that breaks the
protocol (``ProtocolError``) and from a kit environment that could not be set up
(``EnvironmentFault``). Every class here carries a message meant to be read by a person.
"""

from recoverykit.conformance.errors import EnvironmentFault
from recoverykit.model.errors import (
    InvalidArgument,
    MalformedRecord,
    ModelError,
    RecoveryKitError,
    StaleVersion,
    UnknownWorkItem,
)


class UsageError(InvalidArgument):
    """The command line was used wrongly; the CLI exits 64 (EX_USAGE)."""


__all__ = [
    "EnvironmentFault",
    "InvalidArgument",
    "MalformedRecord",
    "ModelError",
    "RecoveryKitError",
    "StaleVersion",
    "UnknownWorkItem",
    "UsageError",
]
