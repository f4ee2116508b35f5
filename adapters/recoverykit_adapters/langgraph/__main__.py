"""``python -m recoverykit_adapters.langgraph``: the adapter command."""

from recoverykit_adapters.langgraph.adapter import LangGraphAdapter

if __name__ == "__main__":
    LangGraphAdapter.main()
