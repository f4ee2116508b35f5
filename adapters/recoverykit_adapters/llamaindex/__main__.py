"""``python -m recoverykit_adapters.llamaindex``: the adapter command."""

from recoverykit_adapters.llamaindex.adapter import LlamaIndexAdapter

if __name__ == "__main__":
    LlamaIndexAdapter.main()
