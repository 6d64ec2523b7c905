"""SQL of a re-embed: every vector column of the memory space, batch by batch."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import sqlalchemy as sa

from ultron.db.memories import parse_vectors, vec

#: Two re-embeds at once would both own the profile; the second one waits for nothing and stops.
_LOCK_KEY = "ultron-reembed"
#: Tables holding vectors of the memory space: (table, column).
VECTOR_COLUMNS = (("memory_records", "embedding"), ("knowledge_clusters", "centroid"), ("skills", "embedding"))


def try_lock_reembed(conn: sa.Connection) -> bool:
    """A session-level lock held on ``conn`` for the whole re-embed."""
    return bool(conn.execute(sa.text("SELECT pg_try_advisory_lock(hashtextextended(:k, 0))"),
                             {"k": _LOCK_KEY}).scalar_one())


def unlock_reembed(conn: sa.Connection) -> None:
    conn.execute(sa.text("SELECT pg_advisory_unlock(hashtextextended(:k, 0))"), {"k": _LOCK_KEY})


def vector_totals(conn: sa.Connection) -> dict[str, int]:
    """Rows a re-embed will rewrite: all memories, active clusters, current skills."""
    row = conn.execute(sa.text(
        "SELECT (SELECT count(*) FROM memory_records) AS memories, "
        "(SELECT count(*) FROM knowledge_clusters WHERE status = 'active') AS clusters, "
        "(SELECT count(*) FROM skills WHERE status = 'current') AS skills")).one()
    return dict(row._mapping)


def update_vectors(conn: sa.Connection, table: str, column: str, ids: Sequence[str], vectors) -> None:
    """One UPDATE for a whole batch; a None vector clears the column."""
    if (table, column) not in VECTOR_COLUMNS:
        raise ValueError(f"{table}.{column} is not a vector column of the memory space")
    conn.execute(sa.text(
        f"UPDATE {table} t SET {column} = CAST(v.e AS vector) "
        "FROM unnest(CAST(:ids AS text[]), CAST(:es AS text[])) AS v(id, e) WHERE t.id = v.id"),
        {"ids": list(ids), "es": [vec(e) if e is not None else None for e in vectors]})


def memory_rows_after(conn: sa.Connection, after: str, n: int) -> list[Any]:
    """Every memory, archived ones included (the column holds one vector space, whatever the
    status), locked for the batch so a concurrent merge cannot slip an old vector in between."""
    return conn.execute(sa.text(
        "SELECT id, content, context, resolution FROM memory_records WHERE id > :a "
        "ORDER BY id LIMIT :n FOR UPDATE"), {"a": after, "n": n}).all()


def skill_rows_after(conn: sa.Connection, after: str, n: int) -> list[Any]:
    """Current skill versions only: superseded ones carry no vector, so search never returns them."""
    return conn.execute(sa.text(
        "SELECT id, name, description, skill_md FROM skills WHERE status = 'current' AND id > :a "
        "ORDER BY id LIMIT :n FOR UPDATE"), {"a": after, "n": n}).all()


def active_cluster_ids_after(conn: sa.Connection, after: str, n: int) -> list[str]:
    return list(conn.execute(sa.text(
        "SELECT id FROM knowledge_clusters WHERE status = 'active' AND id > :a ORDER BY id LIMIT :n "
        "FOR UPDATE"), {"a": after, "n": n}).scalars())


def member_means(conn: sa.Connection, cluster_ids: list[str]) -> dict[str, np.ndarray]:
    """Each cluster's mean active-member vector (float64: normalised before being written)."""
    rows = conn.execute(sa.text(
        "SELECT cluster_id, CAST(avg(embedding) AS text) FROM memory_records "
        "WHERE status = 'active' AND cluster_id = ANY(:ids) AND embedding IS NOT NULL GROUP BY cluster_id"),
        {"ids": cluster_ids}).all()
    return {cid: parse_vectors([text], dtype=np.float64)[0] for cid, text in rows}
