"""``python -m recoverykit_adapters.dbos``: the adapter command."""

from recoverykit_adapters.dbos.adapter import DBOSAdapter

if __name__ == "__main__":
    DBOSAdapter.main()
