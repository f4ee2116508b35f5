"""recoverykit: a verification-first model and conformance kit for restart recovery.

Layout (each a top-level folder in the source tree, importable as ``recoverykit.<name>``):

- ``model``        the executable specification: pure, no I/O.
- ``conformance``  the adapter protocol, the lockstep suite, the history checker, ``certify``.
- ``chaos``        real-process fault injection: failpoints, the killer, systematic enumeration.
- ``impl``         the reference runtime; independent of everything above, reached via its adapter.
- ``reports``      failure-acceptance reports and shard merging.

This package itself holds only the command line and the error tree.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("recoverykit")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
