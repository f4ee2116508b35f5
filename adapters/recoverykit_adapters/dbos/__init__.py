"""The DBOS adapter: a DBOS application (a workflow per chat request) on DBOS's SQLite system database.

``python -m recoverykit_adapters.dbos`` is the adapter command. Layout:

- ``app``: the workflow and steps a DBOS user writes: ``call_model`` (the ``openai`` client pointed at the kit's
  provider) and ``run_tool`` (the kit's probe as a child process);
- ``hooks``: the kit's failpoints at DBOS step boundaries;
- ``worker``: the worker process the kit can kill: ``DBOS.launch()`` and its recovery;
- ``adapter``: the protocol side, on the SDK: controls through ``DBOSClient``, observations read from DBOS's
  own tables.

What each hook can and cannot mean, how Pause and End map onto DBOS's cancel, and the triage of what certify
found, are in README.md beside this file.
"""
