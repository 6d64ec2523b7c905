"""Who may come in: the one check every door (REST routes, the /mcp mount, the memory
browser's sign-in) makes of a presented token. Doors never compare tokens themselves."""

from __future__ import annotations

import hmac


def token_refusal(token: str | None, expected: bytes) -> str | None:
    """Why a bearer token is refused (None when it is the server's), compared in constant time."""
    if not token:
        return "missing bearer token: send 'Authorization: Bearer <token>'"
    # Starlette decodes headers as latin-1; encoding back gives the bytes the client sent.
    if not hmac.compare_digest(token.encode("latin-1", "replace"), expected):
        return "invalid bearer token"
    return None
