"""``/mcp``: the MCP server (``ultron.mcp``) over streamable HTTP, on the API's own app.

It sits behind the same bearer token as every other route, so ``ultron serve`` and
``ultron dev`` expose it with nothing else to configure. The token is what guards it:
a browser page cannot add an ``Authorization`` header to a cross-origin request without
a CORS preflight this app never grants, so the SDK's Host/Origin (DNS-rebinding) check is
left off; it would also refuse a loopback server reached through a tunnel or proxy name.

The transport is stateless with JSON responses: every tool is one request and one
answer, no server-held session survives a restart or needs sticky routing, and in
``benchmarks/mcp_latency.py`` it answered faster than the stateful SSE mode.

The streamable-HTTP session manager needs a running task group: ``create_app``'s
lifespan enters :meth:`StreamableHTTPSessionManager.run` around the app's life.
"""

from __future__ import annotations

import json

from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.routing import Route

from ultron.access import acting
from ultron.api.auth import resolve_principal
from ultron.mcp import LazyUltron, build_server

MCP_PATH = "/mcp"


class BearerGuard:
    """ASGI wrapper answering 401 (as the other routes do) unless the request carries a token
    that resolves to a principal (the server's own, or a named one); that principal is then
    the one each tool checks (``ultron.access.TOOL_ACTIONS``) and the audit log names."""

    def __init__(self, app, resolve) -> None:
        self.app = app
        self.resolve = resolve

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            header = Headers(scope=scope).get("authorization") or ""
            scheme, _, credentials = header.partition(" ")
            principal, message = await self.resolve(credentials.strip() if scheme.lower() == "bearer" else None)
            if principal is None:
                body = json.dumps({"detail": message}).encode()
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="ultron"')]})
                await send({"type": "http.response.body", "body": body})
                return
            acting(principal)
        await self.app(scope, receive, send)


def mount_mcp(app: FastAPI) -> StreamableHTTPSessionManager:
    """Serve the MCP server at ``/mcp`` of ``app``, on the app's SDK client (``app.state.client``,
    created by the lifespan); returns the session manager the lifespan must run."""
    server = build_server(LazyUltron(lambda: app.state.client))
    # Builds the session manager (the returned standalone Starlette app is not used).
    server.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    manager = server.session_manager
    guard = BearerGuard(StreamableHTTPASGIApp(manager), lambda token: resolve_principal(app, token))
    app.router.routes.append(Route(MCP_PATH, endpoint=guard,
                                   include_in_schema=False))
    return manager
