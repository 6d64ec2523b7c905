"""Asking a running local server instead of loading the embedding model in this process.

Every command that embeds a query (``search``, ``context``) would load MiniLM first, about
4 s, while ``ultron dev`` / ``ultron serve`` on this machine already holds it warm. When a
server answers on ULTRON_API_HOST:ULTRON_API_PORT with this store's token (ULTRON_API_TOKEN,
or the ``api_token`` file of this ULTRON_HOME, so a server of another store refuses it), the
command asks it; otherwise, or on any failure, the command runs here as before.
"""

from __future__ import annotations

import socket
import sys
from typing import Any, Callable

from ultron.settings import Settings

#: How long to wait for the server's port to accept: a loopback connect is well under 1 ms.
PROBE_SECONDS = 0.2


def ask_server(settings: Settings, call: Callable[[Any], Any]) -> Any | None:
    """``call(client)`` against the local server, or None when there is none (or it fails)."""
    host = settings.api_host if settings.api_host not in ("0.0.0.0", "::") else "127.0.0.1"
    token = settings.local_api_token()
    if token is None:
        return None
    try:
        socket.create_connection((host, settings.api_port), timeout=PROBE_SECONDS).close()
    except OSError:
        return None
    from ultron.client import UltronClient

    try:
        with UltronClient(f"http://{host}:{settings.api_port}", token=token, timeout=60, retries=0) as client:
            answer = call(client)
    except Exception:  # noqa: BLE001 - another store's server, an old one, a hiccup: run here instead
        return None
    print(f"(answered by the server at {host}:{settings.api_port})", file=sys.stderr)
    return answer
