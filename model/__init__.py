"""The executable specification of restart recovery (pure: no I/O, no processes, no sockets)."""
