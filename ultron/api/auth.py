"""Bearer-token auth of the HTTP API, and where the token comes from.

The token is ULTRON_API_TOKEN when set. On a loopback address without one, a random
token is generated once and kept in ``$ULTRON_HOME/api_token`` (mode 0600), so a
local agent, the CLI and the dev launcher share it across restarts without anyone
choosing a password. A server reachable from other machines never gets an
implicit token: starting it without ULTRON_API_TOKEN is refused.
"""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path

from fastapi import Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ultron.access import (
    LOCAL_ADMIN, ROUTE_ACTIONS, Principal, Refused, acting, authorize, load_or_create_secret, token_refusal,
)
from ultron.settings import Settings, SettingsError

log = logging.getLogger("ultron.api")

TOKEN_FILE = "api_token"
MIN_TOKEN_CHARS = 16


class ApiServerError(SettingsError):
    """The API server cannot start as configured; the message names the fix."""


def is_loopback(host: str) -> bool:
    """Only this machine can connect: 127.0.0.0/8, ::1, or the name localhost."""
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # any other name may resolve to a public address


def token_file(settings: Settings) -> Path:
    return settings.api_token_file


def api_token(settings: Settings, host: str | None = None) -> str:
    """The token the server at ``host`` (default ULTRON_API_HOST) accepts.

    Raises ApiServerError for a non-loopback host without ULTRON_API_TOKEN.
    """
    if settings.api_token and settings.api_token.strip():
        return settings.api_token.strip()
    host = host or settings.api_host
    if not is_loopback(host):
        raise ApiServerError(
            f"refusing to serve the API on {host}, which other machines can reach, without a token: "
            "set ULTRON_API_TOKEN (e.g. `export ULTRON_API_TOKEN=$(python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')`), or listen on 127.0.0.1")
    return load_or_create_secret(token_file(settings))


# -- request-time check ------------------------------------------------------------------------

bearer = HTTPBearer(auto_error=False, scheme_name="bearer",
                    description="ULTRON_API_TOKEN (or on 127.0.0.1 the generated token in $ULTRON_HOME/api_token), "
                                "or a named token from `ultron tokens create` with its scope")


def _refused(exc: Refused) -> HTTPException:
    headers = {"WWW-Authenticate": 'Bearer realm="ultron"'} if exc.status == 401 else None
    return HTTPException(exc.status, exc.message, headers=headers)


async def resolve_principal(app, token: str | None) -> tuple[Principal | None, str | None]:
    """The principal behind a token presented to ``app`` (its routes and its /mcp mount): the
    server's own (no database read, no thread), else a named token (``Tokens.resolve``: one
    primary-key read, cached for a few seconds)."""
    expected = app.state.token_bytes
    if token and token_refusal(token, expected) is None:
        return LOCAL_ADMIN, None
    if not token or not token.startswith("ult_") or app.state.client is None:
        return None, token_refusal(token, expected)
    return await run_in_threadpool(app.state.client.tokens.resolve, token, expected)


async def require_access(request: Request,
                         credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> Principal:
    """Every route but /health and the docs: the route's action (``ultron.access.ROUTE_ACTIONS``)
    decided by ``ultron.access.authorize`` for the token's principal, who is then the actor
    the audit log names. Async, so the actor set here is seen by the route's thread."""
    route = request.scope.get("route")
    method = "GET" if request.method == "HEAD" else request.method
    action = ROUTE_ACTIONS.get((method, getattr(route, "path", request.url.path)))
    principal, why = await resolve_principal(request.app, credentials.credentials if credentials is not None else None)
    try:
        if action is None:
            raise Refused(500, f"no access rule for {method} {getattr(route, 'path', request.url.path)}")
        authorize(principal, action, why)
    except Refused as exc:
        raise _refused(exc) from None
    acting(principal)
    request.state.principal = principal
    return principal
