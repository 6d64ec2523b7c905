"""SQL for memory_files: the repository files a memory was learned from (migration 0011).

Rows are written with the memory's other rows, in the extraction's transaction, and go
with the memory (ON DELETE CASCADE). The comparison with the files on disk is not SQL
(``ultron.memory.staleness``); this module only stores and reads what was recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from ultron.db.memories import visible_sql

_COLS = "memory_id, repo_remote, path, sha256, edited, seen_at"


def record_files(conn: sa.Connection, memory_id: str, files: Sequence[dict[str, Any]]) -> int:
    """Record (or refresh) the files of a memory: ``{"remote", "path", "sha256", "edited"}``
    each. A file met again takes the newer hash and time; once edited, it stays edited."""
    if not files:
        return 0
    conn.execute(sa.text(
        "INSERT INTO memory_files (memory_id, repo_remote, path, sha256, edited) "
        "VALUES (:m, :r, :p, :h, :e) "
        "ON CONFLICT (memory_id, repo_remote, path) DO UPDATE SET sha256 = EXCLUDED.sha256, "
        "edited = memory_files.edited OR EXCLUDED.edited, seen_at = now()"),
        [{"m": memory_id, "r": f["remote"], "p": f["path"], "h": f.get("sha256"), "e": bool(f.get("edited"))}
         for f in files])
    return len(files)


def files_of(conn: sa.Connection, memory_ids: Sequence[str], remote: str | None = None
             ) -> dict[str, list[dict[str, Any]]]:
    """The recorded files of these memories (of one repository when ``remote`` is given)."""
    if not memory_ids:
        return {}
    sql = f"SELECT {_COLS} FROM memory_files WHERE memory_id = ANY(:ids)"
    params: dict[str, Any] = {"ids": list(memory_ids)}
    if remote is not None:
        sql += " AND repo_remote = :r"
        params["r"] = remote
    out: dict[str, list[dict[str, Any]]] = {}
    for row in conn.execute(sa.text(sql + " ORDER BY memory_id, edited DESC, path"), params):
        out.setdefault(row.memory_id, []).append(dict(row._mapping))
    return out


def files_in_repo(conn: sa.Connection, remote: str) -> dict[str, list[dict[str, Any]]]:
    """Every active memory's recorded files in one repository, by memory id."""
    rows = conn.execute(sa.text(
        f"SELECT {', '.join('f.' + c.strip() for c in _COLS.split(','))} FROM memory_files f "
        "JOIN memory_records m ON m.id = f.memory_id "
        "WHERE f.repo_remote = :r AND m.status = 'active' ORDER BY f.memory_id, f.edited DESC, f.path"),
        {"r": remote})
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row.memory_id, []).append(dict(row._mapping))
    return out


def learned_in(conn: sa.Connection, remote: str, limit: int, agent_id: str | None = None, *,
               visible: Sequence[str] | None = None) -> list[str]:
    """Active memories learned in one repository, most recently seen first, then most used;
    ``visible``: only those an agent-bound token may see."""
    params: dict[str, Any] = {"r": remote, "n": limit, "a": agent_id}
    agent = ("AND m.agent_id = :a " if agent_id is not None else "") + f"AND {visible_sql(visible, params, 'm.')} "
    rows = conn.execute(sa.text(
        "SELECT f.memory_id FROM memory_files f JOIN memory_records m ON m.id = f.memory_id "
        f"WHERE f.repo_remote = :r AND m.status = 'active' {agent}"
        "GROUP BY f.memory_id, m.hit_count ORDER BY max(f.seen_at) DESC, m.hit_count DESC, f.memory_id LIMIT :n"),
        params)
    return [row.memory_id for row in rows]


def archived_session(conn: sa.Connection, agent_id: str, session_file: str) -> bytes | None:
    """The archived bytes of a session file (``raw_user_uploads``), if they were kept."""
    row = conn.execute(sa.text(
        "SELECT content FROM raw_user_uploads WHERE kind = 'ingest_file' AND agent_id = :a AND source_path = :p"),
        {"a": agent_id, "p": session_file}).first()
    return bytes(row.content) if row is not None else None


def delete_files(conn: sa.Connection, memory_ids: Sequence[str]) -> int:
    """Delete the file rows of these memories (forget: deleted memories' rows would cascade
    anyway; a rebuilt memory's go too, since rows are not kept per contribution)."""
    if not memory_ids:
        return 0
    return conn.execute(sa.text("DELETE FROM memory_files WHERE memory_id = ANY(:ids)"),
                        {"ids": list(memory_ids)}).rowcount


def move_files(conn: sa.Connection, from_id: str, to_id: str) -> None:
    """A memory absorbed into another (consolidation) hands over its file rows; where both
    name a file, the kept memory's row stays."""
    conn.execute(sa.text(
        "INSERT INTO memory_files (memory_id, repo_remote, path, sha256, edited, seen_at) "
        "SELECT :to, repo_remote, path, sha256, edited, seen_at FROM memory_files WHERE memory_id = :from "
        "ON CONFLICT (memory_id, repo_remote, path) DO NOTHING"), {"from": from_id, "to": to_id})
