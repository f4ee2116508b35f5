"""The directory the kit puts first on ``PYTHONPATH`` of a runtime's processes for durable-write points.

It holds ``sitecustomize.py`` (Python imports it at start-up) and nothing else of use as a package; see
``recoverykit.adapter.durable_writes`` for what it does and docs/failpoints.md section 7 for what it sees.
"""
