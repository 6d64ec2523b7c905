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
import os
import secrets
import stat
from pathlib import Path

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ultron.access import token_refusal
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
    return load_or_create_token(token_file(settings))


def load_or_create_token(path: Path) -> str:
    """Reuse the token in ``path``, or write a new one there (0600) atomically.

    Two servers starting at once agree on one token: the file is published with a
    hard link, which fails if the other process got there first.
    """
    existing = _read_token(path)
    if existing:
        return existing
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(token + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            existing = _read_token(path)
            if existing:
                return existing
            os.replace(tmp, path)  # an empty or broken file: take its place
            return token
    finally:
        tmp.unlink(missing_ok=True)
    return token


def _read_token(path: Path) -> str | None:
    try:
        st = path.stat()
        token = path.read_text().strip()
    except FileNotFoundError:
        return None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        os.chmod(path, 0o600)  # a token others can read is not a secret
        log.warning("%s was readable by other users; set its mode to 0600", path)
    return token or None


# -- request-time check ------------------------------------------------------------------------

bearer = HTTPBearer(auto_error=False, scheme_name="bearer",
                    description="ULTRON_API_TOKEN, or on 127.0.0.1 the generated token in $ULTRON_HOME/api_token")


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": 'Bearer realm="ultron"'})


def require_token(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    """Every route but /health and the docs."""
    refusal = token_refusal(credentials.credentials if credentials is not None else None,
                            request.app.state.token_bytes)
    if refusal is not None:
        raise _unauthorized(refusal)
