"""The LangGraph adapter: a StateGraph agent on ``SqliteSaver``, certified by recoverykit.

``python -m recoverykit_adapters.langgraph`` is the adapter command. Layout:

- ``agent``: the graph a LangGraph user writes: an LLM node (``ChatOpenAI`` pointed at the kit's provider)
  and the prebuilt ``ToolNode``, with the kit's probe tools as LangChain tools that run the probe as a child;
- ``hooks``: a LangChain callback handler that calls the kit's failpoints from real callback hooks and
  records usage receipts;
- ``intent``: the adapter's own small durable run-intent table (LangGraph has no notion of a paused or
  cancelled run), shared by the adapter and the worker;
- ``worker``: the worker process the kit can kill: it claims runnable work and resumes each thread with
  ``graph.stream(None, config)`` from its last checkpoint;
- ``adapter``: the protocol side, on the SDK.

What each hook can and cannot mean, and the triage of what certify found, are in README.md beside this file.
"""
