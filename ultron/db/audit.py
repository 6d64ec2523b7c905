"""SQL for the audit log (revision 0015). Callers pass counts, ids and paths, never text."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Mapping

import sqlalchemy as sa


def record(conn: sa.Connection, *, actor: str, action: str, target: str = "",
           detail: Mapping[str, Any] | None = None) -> None:
    conn.execute(sa.text(
        "INSERT INTO audit_log (actor, action, target, detail) VALUES (:a, :act, :t, CAST(:d AS jsonb))"),
        {"a": actor, "act": action, "t": target, "d": json.dumps(dict(detail or {}), default=str)})


def entries(conn: sa.Connection, *, limit: int = 100, action: str | None = None, actor: str | None = None,
            since: datetime | None = None) -> list[dict[str, Any]]:
    """The newest entries first."""
    where, params = [], {"n": limit}
    if action:
        where.append("action = :action")
        params["action"] = action
    if actor:
        where.append("actor = :actor")
        params["actor"] = actor
    if since:
        where.append("at >= :since")
        params["since"] = since
    cond = ("WHERE " + " AND ".join(where)) if where else ""
    return [dict(r._mapping) for r in conn.execute(sa.text(
        f"SELECT id, at, actor, action, target, detail FROM audit_log {cond} ORDER BY at DESC, id DESC LIMIT :n"),
        params)]
