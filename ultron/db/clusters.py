"""SQL for knowledge_clusters and memory_records.cluster_id.

Writes are bulk (one statement per kind of change, arrays passed through ``unnest``),
never one round trip per memory. The nearest cluster of a new memory is found through
the HNSW index on ``centroid`` (``ORDER BY centroid <=> q LIMIT 1``); dissolved clusters
have a NULL centroid, so the index never offers them.

Sizes shown to users are counted live from the memberships (``memory_records.cluster_id``
of active memories): archiving clears a membership through a trigger and deleting a
memory clears it through the foreign key, and neither touches the stored ``size``; the
stored column is refreshed by every batch run and kept up by assignments in between.
"""

from __future__ import annotations

import uuid
from typing import Any, Sequence

import numpy as np
import sqlalchemy as sa

from ultron.db.memories import RECORD_COLS, MemoryRecord, parse_vectors, vec

#: Batch writes take this lock exclusively; assignments take it shared and skip (the
#: memory waits for the next batch) instead of waiting when a batch is writing.
WRITE_LOCK = 0x756C7472636C  # "ultrcl"
#: Held for a whole batch run, so two runs never interleave.
RUN_LOCK = 0x756C7472636D

CLUSTER_COLS = ("id, topic, status, size, skill_slug, superseded_slugs, attempt_member_ids, attempt_status, "
                "attempt_reason, attempted_at, created_at, updated_at")
SIZE_BUCKETS = ((1, 2), (3, 4), (5, 9), (10, 19), (20, 49), (50, 99), (100, None))


# -- batch snapshot --------------------------------------------------------------------


def active_embeddings(conn: sa.Connection, dim: int) -> tuple[list[str], np.ndarray, list[str | None]]:
    """(ids, vectors, current cluster ids) of every active memory, in content order.

    Ids are random uuids, and HDBSCAN's partition depends on row order: ordering by the
    content (then creation time, then id) makes the same memories cluster the same way
    in any store, whatever order they were inserted in."""
    rows = conn.execute(sa.text(
        "SELECT id, cluster_id, embedding::text AS e FROM memory_records WHERE status = 'active' "
        "AND embedding IS NOT NULL ORDER BY md5(content), created_at, id")).all()
    return [r.id for r in rows], parse_vectors([r.e for r in rows], dim), [r.cluster_id for r in rows]


def active_clusters(conn: sa.Connection) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in conn.execute(sa.text(
        f"SELECT {CLUSTER_COLS} FROM knowledge_clusters WHERE status = 'active' ORDER BY id"))]


def cluster_rows(conn: sa.Connection, ids: Sequence[str], *, lock: bool = False) -> dict[str, dict[str, Any]]:
    """Cluster rows by id (any status), optionally locked for the rest of the transaction."""
    if not ids:
        return {}
    sql = f"SELECT {CLUSTER_COLS} FROM knowledge_clusters WHERE id = ANY(:ids) ORDER BY id"
    rows = conn.execute(sa.text(sql + (" FOR UPDATE" if lock else "")), {"ids": sorted(set(ids))})
    return {r.id: dict(r._mapping) for r in rows}


def member_texts(conn: sa.Connection, ids: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Text fields of active memories (all of them, or the given ids) for topic labels."""
    sql = "SELECT id, content, context, resolution, tags, summary_l0 FROM memory_records WHERE status = 'active'"
    params: dict[str, Any] = {}
    if ids is not None:
        sql += " AND id = ANY(:ids)"
        params["ids"] = list(ids)
    return {r.id: dict(r._mapping) for r in conn.execute(sa.text(sql), params)}


# -- batch writes ------------------------------------------------------------------------


def lock_run(conn: sa.Connection) -> None:
    """Wait for :data:`RUN_LOCK`, held by this connection's session until :func:`unlock_run`."""
    conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": RUN_LOCK})


def unlock_run(conn: sa.Connection) -> None:
    conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": RUN_LOCK})


def lock_for_batch_write(conn: sa.Connection) -> None:
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": WRITE_LOCK})


def insert_clusters(conn: sa.Connection, rows: Sequence[dict[str, Any]]) -> None:
    """rows: id, topic, centroid (array). The stored ``size`` starts at 0 and is set by
    :func:`refresh_sizes`, which the batch run calls later in the same transaction."""
    if not rows:
        return
    conn.execute(sa.text(
        """
        INSERT INTO knowledge_clusters (id, topic, status, centroid)
        SELECT id, topic, 'active', CAST(c AS vector)
        FROM unnest(CAST(:ids AS text[]), CAST(:topics AS text[]), CAST(:cents AS text[])) AS t(id, topic, c)
        """), {"ids": [r["id"] for r in rows], "topics": [r["topic"] for r in rows],
               "cents": [vec(r["centroid"]) for r in rows]})


def update_clusters(conn: sa.Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Kept clusters: new topic and centroid, and their skill state after merges. The stored
    ``size`` is left to :func:`refresh_sizes`, which the batch run calls later in the same
    transaction.

    The skill columns are only written for rows that absorbed another cluster
    (``skill`` given), so a concurrent skill-hub write to an untouched row is not undone."""
    if not rows:
        return
    conn.execute(sa.text(
        """
        UPDATE knowledge_clusters k SET topic = t.topic, centroid = CAST(t.c AS vector),
            status = 'active', updated_at = now()
        FROM unnest(CAST(:ids AS text[]), CAST(:topics AS text[]), CAST(:cents AS text[])) AS t(id, topic, c)
        WHERE k.id = t.id
        """), {"ids": [r["id"] for r in rows], "topics": [r["topic"] for r in rows],
               "cents": [vec(r["centroid"]) for r in rows]})
    for r in rows:
        skill = r.get("skill")
        if skill is None:
            continue
        conn.execute(sa.text(
            "UPDATE knowledge_clusters SET skill_slug = :slug, superseded_slugs = :sup, attempt_member_ids = :ami, "
            "attempt_status = :ast, attempt_reason = :ar, attempted_at = :at WHERE id = :id"),
            {"id": r["id"], "slug": skill.skill_slug, "sup": list(skill.superseded_slugs),
             "ami": list(skill.attempt_member_ids), "ast": skill.attempt_status, "ar": skill.attempt_reason,
             "at": skill.attempted_at})


def dissolve(conn: sa.Connection, ids: Sequence[str]) -> None:
    """No longer a cluster: out of the index (NULL centroid), no members, kept for history."""
    if not ids:
        return
    conn.execute(sa.text(
        "UPDATE knowledge_clusters SET status = 'dissolved', centroid = NULL, size = 0, updated_at = now() "
        "WHERE id = ANY(:ids)"), {"ids": list(ids)})
    # memories that joined one of them after the batch's snapshot
    conn.execute(sa.text("UPDATE memory_records SET cluster_id = NULL WHERE cluster_id = ANY(:ids)"),
                 {"ids": list(ids)})


def set_memberships(conn: sa.Connection, memory_ids: Sequence[str], cluster_ids: Sequence[str | None]) -> int:
    """One statement for all memberships; rows already right are not rewritten."""
    if not memory_ids:
        return 0
    return conn.execute(sa.text(
        """
        UPDATE memory_records m SET cluster_id = t.cid
        FROM unnest(CAST(:ids AS text[]), CAST(:cids AS text[])) AS t(id, cid)
        WHERE m.id = t.id AND m.status = 'active' AND m.cluster_id IS DISTINCT FROM t.cid
        """), {"ids": list(memory_ids), "cids": list(cluster_ids)}).rowcount


def refresh_sizes(conn: sa.Connection) -> None:
    """Stored sizes of active clusters := their active members now."""
    conn.execute(sa.text(
        """
        UPDATE knowledge_clusters k SET size = c.n
        FROM (SELECT k2.id, count(m.id) AS n FROM knowledge_clusters k2
              LEFT JOIN memory_records m ON m.cluster_id = k2.id AND m.status = 'active'
              WHERE k2.status = 'active' GROUP BY k2.id) c
        WHERE k.id = c.id AND k.size <> c.n
        """))


def new_cluster_id() -> str:
    return str(uuid.uuid4())


# -- between batch runs ----------------------------------------------------------------


def try_lock_for_assignment(conn: sa.Connection) -> bool:
    return bool(conn.execute(sa.text("SELECT pg_try_advisory_xact_lock_shared(:k)"), {"k": WRITE_LOCK}).scalar_one())


def nearest_cluster(conn: sa.Connection, embedding: np.ndarray) -> tuple[str, float] | None:
    """The active cluster whose centroid is closest (HNSW index), with its cosine."""
    row = conn.execute(sa.text(
        "SELECT id, 1 - (centroid <=> CAST(:q AS vector)) AS sim FROM knowledge_clusters "
        "WHERE status = 'active' ORDER BY centroid <=> CAST(:q AS vector) LIMIT 1"), {"q": vec(embedding)}).first()
    return (row.id, float(row.sim)) if row is not None and row.sim is not None else None


def join_cluster(conn: sa.Connection, cluster_id: str, memory_id: str, embedding: np.ndarray, dim: int) -> bool:
    """Add one memory to a cluster: size + 1 and the centroid moved towards it, under the row lock.

    The stored centroid is a unit vector, so the running sum is approximated by
    ``centroid * size``; the new centroid is ``normalise(centroid * size + e)``. The next
    batch run recomputes it exactly. False when the cluster was dissolved meanwhile."""
    row = conn.execute(sa.text(
        "SELECT size, centroid::text AS c FROM knowledge_clusters WHERE id = :id AND status = 'active' "
        "AND centroid IS NOT NULL FOR UPDATE"), {"id": cluster_id}).first()
    if row is None:
        return False
    current = parse_vectors([row.c], dim)[0].astype(np.float64)
    e = np.asarray(embedding, dtype=np.float64)
    e = e / (np.linalg.norm(e) or 1.0)
    moved = current * max(int(row.size), 1) + e
    moved /= np.linalg.norm(moved) or 1.0
    conn.execute(sa.text(
        "UPDATE knowledge_clusters SET size = size + 1, centroid = CAST(:c AS vector), updated_at = now() "
        "WHERE id = :id"), {"id": cluster_id, "c": vec(moved)})
    conn.execute(sa.text("UPDATE memory_records SET cluster_id = :c WHERE id = :m AND status = 'active'"),
                 {"c": cluster_id, "m": memory_id})
    return True


# -- reads -------------------------------------------------------------------------------

#: CLUSTER_COLS qualified with the ``k`` alias the reads below give knowledge_clusters.
_K_CLUSTER_COLS = ", ".join("k." + c.strip() for c in CLUSTER_COLS.split(","))
_LIVE = ("LEFT JOIN (SELECT cluster_id, count(*) AS live FROM memory_records WHERE status = 'active' "
         "AND cluster_id IS NOT NULL GROUP BY cluster_id) n ON n.cluster_id = k.id")


def assign_to_nearest(conn: sa.Connection, memory_id: str, embedding: np.ndarray, min_similarity: float,
                      dim: int) -> str | None:
    """Between batch runs, a new memory joins the nearest active cluster when its centroid is
    close enough, in the caller's transaction. Returns the cluster id, or None: the memory then
    waits for the next batch (also when a batch is writing right now; an upload never waits
    for a batch)."""
    if not try_lock_for_assignment(conn):
        return None
    nearest = nearest_cluster(conn, embedding)
    if nearest is None or nearest[1] < min_similarity:
        return None
    return nearest[0] if join_cluster(conn, nearest[0], memory_id, embedding, dim) else None


def _cluster(row: Any) -> dict[str, Any]:
    d = dict(row._mapping)
    d["size"] = int(d.pop("live") or 0) if d["status"] == "active" else 0
    d["superseded_slugs"] = list(d.get("superseded_slugs") or [])
    d["attempt_member_ids"] = list(d.get("attempt_member_ids") or [])
    return d


def list_clusters(conn: sa.Connection, include_dissolved: bool = False) -> list[dict[str, Any]]:
    where = "" if include_dissolved else "WHERE k.status = 'active'"
    rows = conn.execute(sa.text(
        f"SELECT {_K_CLUSTER_COLS}, n.live FROM knowledge_clusters k {_LIVE} {where} "
        "ORDER BY (k.status = 'active') DESC, coalesce(n.live, 0) DESC, k.id"))
    return [_cluster(r) for r in rows]


def get_cluster(conn: sa.Connection, cluster_id: str) -> dict[str, Any] | None:
    row = conn.execute(sa.text(
        f"SELECT {_K_CLUSTER_COLS}, (SELECT count(*) FROM memory_records m WHERE m.cluster_id = k.id "
        "AND m.status = 'active') AS live FROM knowledge_clusters k WHERE k.id = :id"), {"id": cluster_id}).first()
    return _cluster(row) if row is not None else None


def cluster_members(conn: sa.Connection, cluster_id: str) -> list[MemoryRecord]:
    rows = conn.execute(sa.text(
        f"SELECT {RECORD_COLS} FROM memory_records WHERE cluster_id = :c AND status = 'active' "
        "ORDER BY created_at, id"), {"c": cluster_id})
    return [MemoryRecord(**r._mapping) for r in rows]


def cluster_stats(conn: sa.Connection) -> dict[str, Any]:
    counts = conn.execute(sa.text(
        """
        SELECT (SELECT count(*) FROM knowledge_clusters WHERE status = 'active') AS active_clusters,
               (SELECT count(*) FROM knowledge_clusters WHERE status = 'dissolved') AS dissolved_clusters,
               count(*) FILTER (WHERE cluster_id IS NOT NULL) AS clustered,
               count(*) FILTER (WHERE cluster_id IS NULL) AS unclustered
        FROM memory_records WHERE status = 'active'
        """)).one()
    sizes = [int(n) for n in conn.execute(sa.text(
        "SELECT count(*) FROM memory_records WHERE status = 'active' AND cluster_id IS NOT NULL "
        "GROUP BY cluster_id")).scalars()]
    histogram = {}
    for lo, hi in SIZE_BUCKETS:
        label = f"{lo}+" if hi is None else f"{lo}-{hi}"
        histogram[label] = sum(1 for s in sizes if s >= lo and (hi is None or s <= hi))
    return {"active_clusters": int(counts.active_clusters), "dissolved_clusters": int(counts.dissolved_clusters),
            "clustered_memories": int(counts.clustered), "unclustered_memories": int(counts.unclustered),
            "largest_cluster": max(sizes, default=0), "size_histogram": histogram}
