"""recoverykit: a verification-first model and conformance kit for restart recovery.

Layout (each a top-level folder in the source tree, importable as ``recoverykit.<name>``):

- ``model``        the executable specification: pure, no I/O.
- ``conformance``  the adapter protocol, the lockstep suite, the history checker, ``certify``.
- ``chaos``        real-process fault injection: failpoints, the killer, systematic enumeration.
- ``impl``         the reference runtime; independent of everything above, reached via its adapter.
- ``reports``      failure-acceptance reports and shard merging.

This package itself holds only the command line and the error tree.
"""

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # Looked up on demand: importlib.metadata costs ~45 ms, and every runtime, worker and tool shim
    # process imports this package, so an eager lookup was paid on each process start.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("recoverykit")
    except PackageNotFoundError:  # running from a source tree without installation
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found
