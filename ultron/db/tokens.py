"""SQL for api_tokens (revision 0015): issue, look up, revoke, rotate, mark used.

Only HMACs of token secrets are stored; ``ultron.tokens`` makes and checks them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

import sqlalchemy as sa

COLS = "id, name, token_hash, scope, agents, created_at, expires_at, revoked_at, last_used_at, rotated_from"


def insert(conn: sa.Connection, *, token_id: str, name: str, token_hash: str, scope: str,
           agents: Sequence[str] | None, expires_at: datetime | None, rotated_from: str | None = None) -> None:
    conn.execute(sa.text(
        "INSERT INTO api_tokens (id, name, token_hash, scope, agents, expires_at, rotated_from) "
        "VALUES (:id, :name, :h, :scope, CAST(:agents AS text[]), :exp, :rot)"),
        {"id": token_id, "name": name, "h": token_hash, "scope": scope,
         "agents": list(agents) if agents is not None else None, "exp": expires_at, "rot": rotated_from})


def by_id(conn: sa.Connection, token_id: str) -> dict[str, Any] | None:
    row = conn.execute(sa.text(f"SELECT {COLS} FROM api_tokens WHERE id = :id"), {"id": token_id}).first()
    return dict(row._mapping) if row else None


def live_by_name(conn: sa.Connection, name: str) -> dict[str, Any] | None:
    row = conn.execute(sa.text(f"SELECT {COLS} FROM api_tokens WHERE name = :n AND revoked_at IS NULL"),
                       {"n": name}).first()
    return dict(row._mapping) if row else None


def listing(conn: sa.Connection, include_revoked: bool = False) -> list[dict[str, Any]]:
    cond = "" if include_revoked else "WHERE revoked_at IS NULL"
    return [dict(r._mapping) for r in conn.execute(sa.text(
        f"SELECT {COLS} FROM api_tokens {cond} ORDER BY created_at, id"))]


def revoke(conn: sa.Connection, token_id: str) -> bool:
    return conn.execute(sa.text(
        "UPDATE api_tokens SET revoked_at = now() WHERE id = :id AND revoked_at IS NULL"), {"id": token_id}).rowcount > 0


def mark_used(conn: sa.Connection, token_id: str) -> None:
    """Record a use, at most once a minute (a busy agent must not write on every request)."""
    conn.execute(sa.text(
        "UPDATE api_tokens SET last_used_at = now() WHERE id = :id "
        "AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')"), {"id": token_id})
