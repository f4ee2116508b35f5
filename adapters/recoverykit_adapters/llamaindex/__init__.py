"""A recoverykit adapter for llama-index-workflows: a tool-calling agent as a ``Workflow`` whose ``Context``
is saved (``Context.to_dict``) at every step and resumed after a restart (``Context.from_dict`` and
``workflow.run(ctx=...)``), as the framework documents.

``python -m recoverykit_adapters.llamaindex``; the findings and how they were triaged are in README.md.
"""
