"""``ultron serve``: run the HTTP API with uvicorn until SIGINT/SIGTERM.

The token is settled and the database opened before the socket is bound, so a
misconfiguration (no token on a public address, database unreachable, port taken)
ends the start with one clear message and a non-zero exit instead of a server that
answers every request with an error.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from typing import Iterator, TextIO

import uvicorn

from ultron.api.auth import MIN_TOKEN_CHARS, ApiServerError, api_token, token_file
from ultron.settings import Settings

log = logging.getLogger("ultron.api")

__all__ = ["ApiServerError", "api_token", "serve"]


class _Server(uvicorn.Server):
    """uvicorn re-raises a caught SIGINT/SIGTERM after its graceful shutdown, which
    turns a requested stop into a KeyboardInterrupt or a kill by signal. A stop asked
    for is a clean exit here: serve() simply returns."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def serve(settings: Settings, host: str | None = None, port: int | None = None, *,
          out: TextIO | None = None) -> None:
    """Serve the API on ``host:port`` (default ULTRON_API_HOST:ULTRON_API_PORT) until stopped.

    Raises ApiServerError (a SettingsError) when it cannot start: no ULTRON_API_TOKEN on
    a non-loopback address, or the address cannot be bound. DatabaseError comes through
    unchanged when the database cannot be opened.
    """
    out = out or sys.stderr
    host = host or settings.api_host
    port = settings.api_port if port is None else port
    if not 0 <= port <= 65535:
        raise ApiServerError(f"port {port} is not a TCP port (0-65535)")
    token = api_token(settings, host)
    if settings.api_token and settings.api_token.strip():
        if len(token) < MIN_TOKEN_CHARS:
            print(f"ultron serve: warning: ULTRON_API_TOKEN is only {len(token)} characters; "
                  "use a long random one", file=out)
    else:
        print(f"ultron serve: API token in {token_file(settings)} (mode 0600); "
              "send it as 'Authorization: Bearer <token>'", file=out)

    from ultron.api.app import create_app
    from ultron.sdk import Ultron

    # The embedder (ONNX Runtime and the MiniLM weights) and the redactor (Presidio, which imports spaCy) are
    # built by the first request that needs them, not here: a server that only searches
    # never holds spaCy, and one that is only health-checked holds neither. That request
    # waits for the build (a second or two); concurrent ones wait on the same build lock.
    client = Ultron(settings)
    app = create_app(settings, client=client, token=token)
    shown = f"[{host}]" if ":" in host else host
    print(f"ultron serve: starting on http://{shown}:{port} (memory browser at /ui, API docs at /docs)", file=out,
          flush=True)
    server = _Server(uvicorn.Config(app, host=host, port=port, log_level="info", access_log=True,
                                    server_header=False, timeout_graceful_shutdown=10, lifespan="on"))
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits this way when it cannot bind
        if exc.code not in (0, None):
            raise ApiServerError(f"the API server could not start on {host}:{port} (see the message above; "
                                 "is the port in use? set ULTRON_API_PORT or --port)") from None
    if not server.started and not getattr(server, "_captured_signals", None):
        raise ApiServerError(f"the API server could not start on {host}:{port}")
