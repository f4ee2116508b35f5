"""Start-up hook of a runtime's Python processes: durable-write points (docs/failpoints.md section 7).

The adapter SDK puts this directory first on ``PYTHONPATH`` only while a ``durable.write.*`` point is armed
(``RuntimeEnv.environ``), so without ``chaos --durable-writes`` no process ever imports it. Python imports
only the first ``sitecustomize`` on the path: this one runs the next one on the path (the runtime's own, or its
environment's) first, then installs the hook if this process is one of the run's (``install_if_armed``).
Nothing here may break the runtime: any error is one line on stderr, and the runtime goes on unhooked.
"""

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain() -> None:
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_recoverykit_chained_sitecustomize"] = module
    spec.loader.exec_module(module)


def _install() -> None:
    path = os.path.join(os.path.dirname(_HERE), "durable_writes.py")
    spec = importlib.util.spec_from_file_location("_recoverykit_durable_writes", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.install_if_armed()


for _step in (_chain, _install):
    try:
        _step()
    except Exception as _exc:  # never break the runtime's start
        sys.stderr.write(f"recoverykit durable-write hook: {_step.__name__[1:]} failed ({_exc!r}); going on\n")
