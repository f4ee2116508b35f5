"""Which process sent a request to the kit's provider: the peer of a 127.0.0.1 TCP connection.

The provider is the kit's; so is the evidence of who called it. The runtime's lease table says who it thinks
owns a work item; the sender of each model request says who really acted for it. Two live processes sending
the same script's requests at once are two owners, whatever the lease table shows (OWN-02).

Resolved once per connection (keep-alive reuses it) from the system's socket table (psutil): the client's
local (address, port) is the server's remote one. None when the table cannot say (another user's process,
a connection gone before it was looked up): the evidence is then missing, never guessed.
"""

from __future__ import annotations

from typing import Any

import psutil


def sender_of(client: tuple[Any, ...], server: tuple[Any, ...]) -> dict[str, Any] | None:
    """``{"pid", "create_time"}`` of the process whose socket is ``client`` connected to ``server``."""
    try:
        host, port = client[0], int(client[1])
        server_port = int(server[1])
        for c in psutil.net_connections("tcp"):
            if (c.pid and c.laddr and c.raddr and c.laddr.port == port and c.raddr.port == server_port
                    and c.laddr.ip == host):
                return {"pid": c.pid, "create_time": round(psutil.Process(c.pid).create_time(), 3)}
    except (psutil.Error, OSError, ValueError, IndexError, TypeError):
        return None
    return None
