"""The reference runtime: a durable multi-process session runtime, independent of the kit.

It imports nothing of recoverykit (import-linter enforces this) and is reached only through its own
stdio adapter (``python -m recoverykit.impl``), exactly as a third-party runtime would be.
"""
