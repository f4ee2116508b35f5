"""Adapters for real runtimes nobody on this project wrote, each an optional extra (``pip install '.[langgraph]'``).

Each is written on the adapter SDK (``recoverykit.adapter``) the way a user of the framework would build an
agent, declares only what the framework really does, and keeps beside it the stand-alone reproductions of
what certify found.
"""
