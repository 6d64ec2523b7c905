"""Named API tokens: issued once, stored only as an HMAC, resolved to a principal.

A token reads ``ult_<id>_<secret>``: the id finds the row, the secret is checked against
``HMAC-SHA256(token secret, token)`` in constant time. The token secret is
ULTRON_TOKEN_SECRET, else ``$ULTRON_HOME/token_secret`` (0600, made on first use): a copy
of the database alone cannot check a guess. Servers of one store on several machines
share ULTRON_TOKEN_SECRET.

Resolving a token costs one primary-key read; answers are kept for a few seconds, so a
revocation takes effect within :data:`CACHE_SECONDS` on every server.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

from ultron.access import LOCAL_ADMIN, SCOPES, Principal, actor, load_or_create_secret, token_refusal
from ultron.db import audit as audit_store
from ultron.db import tokens as store
from ultron.db.database import Database
from ultron.settings import Settings

PREFIX = "ult_"
_SHAPE = re.compile(r"^ult_([0-9a-f]{8})_([A-Za-z0-9_-]{20,})$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
CACHE_SECONDS = 5.0


class TokenError(ValueError):
    """A token command the store refuses (unknown name, a name in use, a bad scope)."""


class Tokens:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self._secret: bytes | None = None
        self._cache: dict[str, tuple[float, Principal | None, str | None]] = {}
        self._lock = threading.Lock()

    def _key(self) -> bytes:
        if self._secret is None:
            value = self.settings.token_secret or load_or_create_secret(self.settings.home / "token_secret")
            self._secret = value.encode("utf-8")
        return self._secret

    def _hash(self, token: str) -> str:
        return hmac.new(self._key(), token.encode("utf-8"), hashlib.sha256).hexdigest()

    # -- issuing ------------------------------------------------------------------------------

    def create(self, name: str, scope: str, expires_days: float | None = None, *,
               agents: Sequence[str] | None = None, rotated_from: str | None = None) -> tuple[str, dict[str, Any]]:
        """A new token (printed once by the caller) and its row (without the hash). ``agents``:
        bind it to those agents (it sees their memories and the shared ones, and writes only
        as them); None or empty: every agent."""
        if not _NAME.match(name or ""):
            raise TokenError("a token name is 1-64 letters, digits, '.', '_', '@' or '-', starting with a "
                             "letter or digit")
        if scope not in SCOPES:
            raise TokenError(f"scope must be one of {', '.join(SCOPES)}")
        if expires_days is not None and not 0 < expires_days <= 3650:
            raise TokenError("--expires is a number of days between 0 and 3650")
        bound = _agents(agents)
        token_id = secrets.token_hex(4)
        token = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        expires = (datetime.now(timezone.utc) + timedelta(days=expires_days)) if expires_days else None
        with self.db.engine.begin() as conn:
            if store.live_by_name(conn, name) is not None:
                raise TokenError(f"a live token is already named {name!r}: revoke or rotate it")
            store.insert(conn, token_id=token_id, name=name, token_hash=self._hash(token), scope=scope, agents=bound,
                         expires_at=expires, rotated_from=rotated_from)
            audit_store.record(conn, actor=actor(), action="token.rotate" if rotated_from else "token.create",
                               target=name, detail={"id": token_id, "scope": scope,
                                                    "agents": len(bound) if bound else None,  # names: not here
                                                    "expires_at": expires.isoformat() if expires else None})
            row = store.by_id(conn, token_id)
        return token, _public(row)

    def listing(self, include_revoked: bool = False) -> list[dict[str, Any]]:
        with self.db.engine.connect() as conn:
            return [_public(r) for r in store.listing(conn, include_revoked)]

    def revoke(self, name: str) -> dict[str, Any]:
        with self.db.engine.begin() as conn:
            row = store.live_by_name(conn, name)
            if row is None:
                raise TokenError(f"no live token named {name!r}")
            store.revoke(conn, row["id"])
            audit_store.record(conn, actor=actor(), action="token.revoke", target=name, detail={"id": row["id"]})
        self._forget_cached()
        return _public({**row, "revoked_at": datetime.now(timezone.utc)})

    def rotate(self, name: str, expires_days: float | None = None) -> tuple[str, dict[str, Any]]:
        """Revoke the live token of that name and issue a new one with its scope."""
        with self.db.engine.begin() as conn:
            row = store.live_by_name(conn, name)
            if row is None:
                raise TokenError(f"no live token named {name!r}")
            store.revoke(conn, row["id"])
        self._forget_cached()
        if expires_days is None and row["expires_at"] is not None:  # the same lifetime as the one it replaces
            expires_days = max(1 / 1440, (row["expires_at"] - row["created_at"]).total_seconds() / 86400)
        return self.create(name, row["scope"], expires_days, agents=row["agents"], rotated_from=row["id"])

    # -- checking --------------------------------------------------------------------------------

    def resolve(self, token: str | None, admin_token: bytes | None) -> tuple[Principal | None, str | None]:
        """The principal a presented token stands for, or (None, why not)."""
        if not token:
            return None, "missing bearer token: send 'Authorization: Bearer <token>'"
        if admin_token is not None and token_refusal(token, admin_token) is None:
            return LOCAL_ADMIN, None
        match = _SHAPE.match(token)
        if not match:
            return None, "invalid bearer token"
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(token)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1], cached[2]
        principal, why = self._check(match.group(1), token)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[token] = (now, principal, why)
        return principal, why

    def principal_of(self, token_id: str) -> Principal | None:
        """The principal of a live token by its id (a browser session names it); None once the
        token is revoked or expired. Cached like :meth:`resolve`."""
        key = f"id:{token_id}"
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        with self.db.engine.connect() as conn:
            row = store.by_id(conn, token_id)
        live = (row is not None and row["revoked_at"] is None
                and (row["expires_at"] is None or row["expires_at"] > datetime.now(timezone.utc)))
        principal = _principal(row) if live else None
        with self._lock:
            self._cache[key] = (now, principal, None)
        return principal

    def _check(self, token_id: str, token: str) -> tuple[Principal | None, str | None]:
        with self.db.engine.begin() as conn:
            row = store.by_id(conn, token_id)
            if row is None or not hmac.compare_digest(row["token_hash"], self._hash(token)):
                return None, "invalid bearer token"
            if row["revoked_at"] is not None:
                return None, f"token {row['name']!r} was revoked"
            if row["expires_at"] is not None and row["expires_at"] <= datetime.now(timezone.utc):
                return None, f"token {row['name']!r} expired at {row['expires_at']:%Y-%m-%d %H:%M} UTC"
            store.mark_used(conn, token_id)
        return _principal(row), None

    def _forget_cached(self) -> None:
        with self._lock:
            self._cache.clear()


def _principal(row: dict[str, Any]) -> Principal:
    agents = row.get("agents")
    return Principal(row["name"], row["scope"], row["id"], tuple(agents) if agents else None)


def _agents(agents: Sequence[str] | None) -> list[str] | None:
    """Valid, distinct agent ids in the order given; None for an unbound token."""
    if not agents:
        return None
    from ultron.sessions.discovery import validate_agent_id

    try:
        return list(dict.fromkeys(validate_agent_id(a) for a in agents))
    except ValueError as exc:
        raise TokenError(str(exc)) from None


def _public(row: dict[str, Any]) -> dict[str, Any]:
    """A token's row as shown: never its hash."""
    out = {k: v for k, v in row.items() if k != "token_hash"}
    now = datetime.now(timezone.utc)
    out["state"] = ("revoked" if row.get("revoked_at") else
                    "expired" if row.get("expires_at") and row["expires_at"] <= now else "live")
    return out
