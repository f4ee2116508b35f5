"""The root of recoverykit's one error tree.

It lives in the model because the model is the lowest layer and may import nothing else of the
kit; ``recoverykit.errors`` re-exports it and adds the classes the upper layers need.
"""


class RecoveryKitError(Exception):
    """Base of every error recoverykit raises on purpose."""


class InvalidArgument(RecoveryKitError, TypeError):
    """A caller passed something the kit cannot use (a user mistake, not a runtime defect)."""


class ModelError(RecoveryKitError, ValueError):
    """An event cannot be applied to the model's state; the state is left unchanged."""


class UnknownWorkItem(ModelError, KeyError):
    """An event names a work item, Goal, tool call or wait the model has never seen."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class StaleVersion(ModelError):
    """An event carries a revision, control version or generation older than the current one."""


class MalformedRecord(ModelError):
    """A record failed validation (wrong type, missing field, value out of range)."""


class EventNotEnabled(ModelError):
    """An event that cannot happen in this state (e.g. resuming work that is not paused); state unchanged."""


class Interrupted(KeyboardInterrupt):
    """The kit was asked to stop (SIGINT, SIGTERM, SIGHUP): ``signum`` says which; the exit is 128 + signum.

    A KeyboardInterrupt, so ``except Exception`` never swallows it and every ``finally`` on the way
    out still runs (reaping, partial results).
    """

    def __init__(self, signum: int, name: str) -> None:
        self.signum, self.name = signum, name
        super().__init__(f"interrupted by {name}")
