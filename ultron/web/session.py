"""Signing in to the memory browser: the API token once, then a session cookie.

The cookie is ``expiry.nonce.token-id.signature``, signed with HMAC-SHA256 under the
server's API token, so it needs no server-side store, survives restarts, and dies when the
server's token is rotated; the token id names the principal (``local`` for the server's own
token), whose revocation or expiry ends the session at its next page. Forms carry a CSRF token derived from the same nonce: another site can neither
read it nor (SameSite=Strict) send the cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

COOKIE = "ultron_session"
#: The token id a session of the server's own admin token carries.
LOCAL = "local"
LIFETIME_SECONDS = 12 * 3600


@dataclass(frozen=True)
class BrowserSession:
    nonce: str
    expires: int
    csrf: str
    token_id: str = LOCAL


def _sign(key: bytes, *parts: str) -> str:
    return hmac.new(key, "|".join(("ultron-ui",) + parts).encode(), hashlib.sha256).hexdigest()


def issue(key: bytes, token_id: str = LOCAL, now: float | None = None,
          lifetime: int = LIFETIME_SECONDS) -> tuple[str, BrowserSession]:
    """A new cookie value for the principal of ``token_id``, and the session it opens."""
    expires = int((now if now is not None else time.time()) + lifetime)
    nonce = secrets.token_urlsafe(16)
    value = f"{expires}.{nonce}.{token_id}.{_sign(key, str(expires), nonce, token_id)}"
    return value, BrowserSession(nonce, expires, _sign(key, "csrf", nonce), token_id)


def verify(key: bytes, value: str | None, now: float | None = None) -> BrowserSession | None:
    """The session a cookie value opens; None when it is missing, forged or expired (a
    revoked token is the caller's check: the cookie names it)."""
    if not value or value.count(".") != 3:
        return None
    expires, nonce, token_id, signature = value.split(".")
    if not expires.isdigit() or not hmac.compare_digest(signature, _sign(key, expires, nonce, token_id)):
        return None
    if int(expires) < (now if now is not None else time.time()):
        return None
    return BrowserSession(nonce, int(expires), _sign(key, "csrf", nonce), token_id)


def csrf_ok(session: BrowserSession, sent: str | None) -> bool:
    return bool(sent) and hmac.compare_digest(session.csrf, sent)
