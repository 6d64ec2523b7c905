"""SQL for the Skill Hub: cluster readiness and attempts, skill versions, skill search.

Cluster membership is always read live (active memory_records with that cluster_id),
never from a cached list. Skill search goes through the HNSW index on
``skills.embedding``; only current versions carry a vector, so the index cannot
return a superseded one.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

import numpy as np
import sqlalchemy as sa

from ultron.db.feedback import RELIABILITY_SQL
from ultron.db.outcomes import utility_sql
from ultron.db.memories import vec, visible_sql

#: What agents' feedback keeps on a skill (``ultron.db.feedback``).
FEEDBACK_COLS = (f"lifecycle, helpful_count, unhelpful_count, {RELIABILITY_SQL} AS reliability, "
                 f"outcome_helped, outcome_unhelped, {utility_sql()} AS utility")
SKILL_COLS = ("id, slug, version, parent_version, cluster_id, name, description, skill_md, meta, memory_ids, score, "
              f"status, superseded_slugs, path, created_at, updated_at, {FEEDBACK_COLS}")
LIST_COLS = ("slug, version, parent_version, cluster_id, name, description, score, status, superseded_slugs, path, "
             f"created_at, cardinality(memory_ids) AS memory_count, {FEEDBACK_COLS}")
#: Skills agents may be given: not retired by feedback.
SERVED = "lifecycle <> 'retired'"
_LOCK_KEY = "ultron:skill-evolution"


@dataclass(frozen=True)
class ClusterState:
    """What a crystallisation attempt needs to know about a cluster when it starts."""

    id: str
    topic: str
    skill_slug: str | None
    superseded_slugs: tuple[str, ...]
    attempt_member_ids: tuple[str, ...]
    attempt_status: str | None
    attempted_at: datetime | None
    members: int
    new_members: int


_CLUSTER_STATE = """
    SELECT c.id, c.topic, c.skill_slug, c.superseded_slugs, c.attempt_member_ids, c.attempt_status, c.attempted_at,
           count(m.id) AS members,
           count(m.id) FILTER (WHERE NOT (m.id = ANY(c.attempt_member_ids))) AS new_members
    FROM knowledge_clusters c
    LEFT JOIN memory_records m ON m.cluster_id = c.id AND m.status = 'active'
    WHERE c.status = 'active' {where}
    GROUP BY c.id
"""
# Ready: a cluster without a skill at critical mass that was never tried or gained a
# member since its last try; or a cluster with a skill that gained `delta` members.
_READY = """
    (skill_slug IS NULL AND members >= :threshold AND (attempted_at IS NULL OR new_members > 0))
    OR (skill_slug IS NOT NULL AND new_members >= :delta)
"""


def _state(row: Any) -> ClusterState:
    d = row._mapping
    return ClusterState(d["id"], d["topic"] or "", d["skill_slug"], tuple(d["superseded_slugs"] or ()),
                        tuple(d["attempt_member_ids"] or ()), d["attempt_status"], d["attempted_at"],
                        int(d["members"]), int(d["new_members"]))


def ready_clusters(conn: sa.Connection, threshold: int, delta: int) -> list[ClusterState]:
    rows = conn.execute(sa.text(
        f"SELECT * FROM ({_CLUSTER_STATE.format(where='')}) s WHERE {_READY} ORDER BY members DESC, id"),
        {"threshold": threshold, "delta": delta})
    return [_state(r) for r in rows]


def cluster_state(conn: sa.Connection, cluster_id: str, *, lock: bool = False) -> ClusterState | None:
    if lock:
        conn.execute(sa.text("SELECT 1 FROM knowledge_clusters WHERE id = :id FOR UPDATE"), {"id": cluster_id})
    row = conn.execute(sa.text(_CLUSTER_STATE.format(where="AND c.id = :id")), {"id": cluster_id}).first()
    return _state(row) if row else None


def record_attempt(conn: sa.Connection, cluster_id: str, member_ids: Sequence[str], status: str, reason: str,
                   skill_slug: str | None = None) -> None:
    conn.execute(sa.text(
        "UPDATE knowledge_clusters SET attempt_member_ids = :ids, attempt_status = :st, attempt_reason = :r, "
        "attempted_at = now(), updated_at = now(), skill_slug = coalesce(:slug, skill_slug) WHERE id = :id"),
        {"ids": list(member_ids), "st": status, "r": reason, "slug": skill_slug, "id": cluster_id})


def cluster_counts(conn: sa.Connection, threshold: int, delta: int) -> dict[str, int]:
    row = conn.execute(sa.text(
        f"""SELECT count(*) AS active,
                   count(*) FILTER (WHERE skill_slug IS NOT NULL) AS with_skill,
                   count(*) FILTER (WHERE {_READY}) AS ready,
                   count(*) FILTER (WHERE attempt_status = 'failed' AND skill_slug IS NULL AND NOT ({_READY}))
                       AS waiting
            FROM ({_CLUSTER_STATE.format(where='')}) s"""), {"threshold": threshold, "delta": delta}).one()
    return dict(row._mapping)


# -- skills ------------------------------------------------------------------------------


def visible_skill_sql(visible: Sequence[str] | None, params: dict[str, Any], alias: str = "") -> str:
    """A skill row an agent-bound token (agents ``visible``) may see: every memory it was built
    from is one it may see (its steps and citations carry their text). "TRUE" when unbound."""
    if visible is None:
        return "TRUE"
    return (f"NOT EXISTS (SELECT 1 FROM memory_records vm WHERE vm.id = ANY({alias}memory_ids) "
            f"AND NOT {visible_sql(visible, params, 'vm.')})")


def _skill(row: Any) -> dict[str, Any]:
    d = dict(row._mapping)
    for key in ("created_at", "updated_at"):
        if isinstance(d.get(key), datetime):
            d[key] = d[key].isoformat()
    for key in ("memory_ids", "superseded_slugs"):
        if key in d:
            d[key] = list(d[key] or [])
    if isinstance(d.get("meta"), str):
        d["meta"] = json.loads(d["meta"])
    return d


def get_skill(conn: sa.Connection, slug: str, version: str | None = None, *,
              visible: Sequence[str] | None = None) -> dict[str, Any] | None:
    params: dict[str, Any] = {"s": slug, "v": version}
    seen = visible_skill_sql(visible, params)
    if version is None:
        row = conn.execute(sa.text(f"SELECT {SKILL_COLS} FROM skills WHERE slug = :s AND status = 'current' "
                                   f"AND {seen}"), params).first()
    else:
        row = conn.execute(sa.text(f"SELECT {SKILL_COLS} FROM skills WHERE slug = :s AND version = :v AND {seen}"),
                           params).first()
    return _skill(row) if row else None


def versions_of(conn: sa.Connection, slug: str) -> list[str]:
    return list(conn.execute(sa.text("SELECT version FROM skills WHERE slug = :s"), {"s": slug}).scalars())


def taken_slugs(conn: sa.Connection, candidates: Sequence[str], cluster_id: str) -> set[str]:
    """Slugs among ``candidates`` already used by a skill or claimed by another cluster."""
    return set(conn.execute(sa.text(
        "SELECT slug FROM skills WHERE slug = ANY(:c) "
        "UNION SELECT skill_slug FROM knowledge_clusters WHERE skill_slug = ANY(:c) AND id <> :id"),
        {"c": list(candidates), "id": cluster_id}).scalars())


def supersede(conn: sa.Connection, slugs: Sequence[str]) -> list[tuple[str, str]]:
    """Current versions of ``slugs`` become history: no embedding, so search never sees them."""
    if not slugs:
        return []
    rows = conn.execute(sa.text(
        "UPDATE skills SET status = 'superseded', embedding = NULL, updated_at = now() "
        "WHERE slug = ANY(:s) AND status = 'current' RETURNING slug, version"), {"s": list(slugs)})
    return [(r.slug, r.version) for r in rows]


def insert_skill(conn: sa.Connection, *, slug: str, version: str, parent_version: str | None, cluster_id: str,
                 name: str, description: str, skill_md: str, meta: dict[str, Any], memory_ids: Sequence[str],
                 score: float, superseded_slugs: Sequence[str], path: str, embedding: np.ndarray) -> str:
    """A new current version. Its feedback counters, outcome sums and lifecycle continue the
    slug's latest version's, so a re-synthesised skill keeps its record (a retired one stays retired)."""
    skill_id = str(uuid.uuid4())
    conn.execute(sa.text(
        """
        WITH prev AS (SELECT helpful_count, unhelpful_count, lifecycle, outcome_helped, outcome_unhelped
                      FROM skills WHERE slug = :slug ORDER BY created_at DESC, version DESC LIMIT 1)
        INSERT INTO skills (id, slug, version, parent_version, cluster_id, name, description, skill_md, meta,
                            memory_ids, score, status, superseded_slugs, path, embedding,
                            helpful_count, unhelpful_count, lifecycle, outcome_helped, outcome_unhelped)
        VALUES (:id, :slug, :version, :parent, :cluster, :name, :description, :md, CAST(:meta AS jsonb), :ids,
                :score, 'current', :sup, :path, CAST(:emb AS vector),
                coalesce((SELECT helpful_count FROM prev), 0), coalesce((SELECT unhelpful_count FROM prev), 0),
                coalesce((SELECT lifecycle FROM prev), 'probationary'),
                coalesce((SELECT outcome_helped FROM prev), 0), coalesce((SELECT outcome_unhelped FROM prev), 0))
        """), {"id": skill_id, "slug": slug, "version": version, "parent": parent_version, "cluster": cluster_id,
               "name": name, "description": description, "md": skill_md, "meta": json.dumps(meta, default=str),
               "ids": list(memory_ids), "score": score, "sup": list(superseded_slugs), "path": path,
               "emb": vec(embedding)})
    return skill_id


def use_vector_index(conn: sa.Connection, ef: int) -> None:
    """Skill search always walks the HNSW index: with a few hundred rows the planner would
    rather sort them all, which is exact but grows with every skill published. Retired
    skills are filtered while walking the graph (iterative scan), so they never use up k."""
    conn.exec_driver_sql(f"SET LOCAL hnsw.ef_search = {int(ef)}; SET LOCAL enable_seqscan = off; "
                         "SET LOCAL hnsw.iterative_scan = strict_order")


def search(conn: sa.Connection, embedding: np.ndarray, k: int, *, visible: Sequence[str] | None = None
           ) -> list[dict[str, Any]]:
    """Nearest current, non-retired skills: ``ORDER BY embedding <=> q LIMIT k`` on the HNSW index."""
    params: dict[str, Any] = {"q": vec(embedding), "k": int(k)}
    rows = conn.execute(sa.text(
        f"SELECT {LIST_COLS}, 1 - (embedding <=> CAST(:q AS vector)) AS similarity FROM skills "
        f"WHERE embedding IS NOT NULL AND {SERVED} AND {visible_skill_sql(visible, params)} "
        "ORDER BY embedding <=> CAST(:q AS vector) LIMIT :k"), params)
    return [_skill(r) for r in rows]


def list_skills(conn: sa.Connection, include_superseded: bool = False, *, include_retired: bool = False,
                limit: int | None = None, offset: int = 0, visible: Sequence[str] | None = None
                ) -> list[dict[str, Any]]:
    """Current skills (all versions with ``include_superseded``), by slug; retired ones only
    when asked. ``limit``/``offset`` page through them."""
    params: dict[str, Any] = {"n": limit, "o": int(offset)}
    where = [] if include_superseded else ["status = 'current'"]
    if visible is not None:
        where.append(visible_skill_sql(visible, params))
    if not include_retired:
        where.append(SERVED)
    cond = ("WHERE " + " AND ".join(where)) if where else ""
    page = " LIMIT :n OFFSET :o" if limit is not None else (" OFFSET :o" if offset else "")
    rows = conn.execute(sa.text(f"SELECT {LIST_COLS}, memory_ids FROM skills {cond} ORDER BY slug, created_at{page}"),
                        params)
    return [_skill(r) for r in rows]


def count_served(conn: sa.Connection, *, visible: Sequence[str] | None = None) -> int:
    """Current, non-retired skills (the total ``GET /skills`` pages through)."""
    params: dict[str, Any] = {}
    return conn.execute(sa.text(f"SELECT count(*) FROM skills WHERE status = 'current' AND {SERVED} "
                                f"AND {visible_skill_sql(visible, params)}"), params).scalar_one()


def retired_slugs(conn: sa.Connection) -> set[str]:
    """Slugs retired by feedback: never searched, listed, served or exported."""
    return set(conn.execute(sa.text("SELECT DISTINCT slug FROM skills WHERE lifecycle = 'retired'")).scalars())


def exportable_skills(conn: sa.Connection, *, visible: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Current, non-retired versions with their SKILL.md, by slug: exactly what the exported
    Agent Skills tree (``ultron.skills.export``) holds. Lifecycle is read here, in SQL, so the
    export never serves a retired skill whichever reads the service layer filters."""
    params: dict[str, Any] = {}
    rows = conn.execute(sa.text(
        f"SELECT {SKILL_COLS} FROM skills WHERE status = 'current' AND lifecycle <> 'retired' "
        f"AND {visible_skill_sql(visible, params)} ORDER BY slug"), params)
    return [_skill(r) for r in rows]


def skill_counts(conn: sa.Connection) -> dict[str, int]:
    row = conn.execute(sa.text(
        "SELECT count(*) FILTER (WHERE status = 'current') AS current, "
        "count(*) FILTER (WHERE status = 'superseded') AS superseded, "
        "count(*) FILTER (WHERE status = 'current' AND lifecycle = 'retired') AS retired, "
        "count(*) FILTER (WHERE status = 'current' AND lifecycle = 'active') AS active, "
        "count(*) FILTER (WHERE status = 'current' AND lifecycle = 'probationary') AS probationary FROM skills")).one()
    return dict(row._mapping)


def lock_evolution(conn: sa.Connection) -> None:
    """One skill evolution at a time across processes (SDK, Dagster, API): a second run
    waits, then finds nothing left to do instead of paying for the same LLM calls."""
    conn.execute(sa.text("SELECT pg_advisory_lock(hashtextextended(:k, 0))"), {"k": _LOCK_KEY})


def unlock_evolution(conn: sa.Connection) -> None:
    conn.execute(sa.text("SELECT pg_advisory_unlock(hashtextextended(:k, 0))"), {"k": _LOCK_KEY})
