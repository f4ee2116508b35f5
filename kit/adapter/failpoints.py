"""The failpoint client, importable: ``from recoverykit.adapter import failpoint``.

The one implementation is conformance/failpoint_client.py, a standard-library file that runtimes which
cannot depend on recoverykit still copy as it is; a runtime written on the SDK imports it from here
instead. Importing it loads no pydantic and no model (it is what every runtime process imports).
"""

from recoverykit.conformance.failpoint_client import ENV_FAILPOINT_SOCKET, ENV_FAILPOINTS, failpoint

__all__ = ["ENV_FAILPOINTS", "ENV_FAILPOINT_SOCKET", "failpoint"]
