"""``python -m recoverykit.impl``: the reference runtime's stdio adapter."""

import sys

from .adapter import main

if __name__ == "__main__":
    sys.exit(main())
