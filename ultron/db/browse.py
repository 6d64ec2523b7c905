"""SQL behind the memory browser: pages of memories, a memory's surroundings, edit history
and the overview's counts.

Pages use keyset pagination on ``(created_at, id)`` through the partial indexes of revision
0013, so page 4,000 costs what page 1 costs; totals are counted up to a cap (a page never
pays for counting a million rows exactly).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

import numpy as np
import sqlalchemy as sa

from ultron.db.feedback import RELIABILITY_SQL
from ultron.db.skills import visible_skill_sql
from ultron.db.memories import RECORD_COLS, MemoryRecord, _record, rewrite_sets, visible_sql

#: Counting matches stops here; the page says "more than" beyond it.
COUNT_CAP = 10_000
RECENT_DAYS = {"day": 1, "week": 7, "month": 30}


@dataclass(frozen=True)
class BrowseFilters:
    """What a person narrowed the list to. ``memory_ids``: only these (a skill's memories,
    or the stale ones of a repository), already resolved by the caller."""

    memory_type: str | None = None
    tier: str | None = None
    agent_id: str | None = None
    tag: str | None = None
    recent: str | None = None  # a key of RECENT_DAYS
    memory_ids: tuple[str, ...] | None = None
    #: an agent-bound viewer's agents (``ultron.access.visible_agents``): theirs and shared only
    visible: tuple[str, ...] | None = None

    def where(self) -> tuple[str, dict[str, Any]]:
        where = ["status = 'active'"]
        params: dict[str, Any] = {}
        if self.visible is not None:
            where.append(visible_sql(self.visible, params))
        if self.memory_type:
            where.append("memory_type = :type")
            params["type"] = self.memory_type
        if self.tier:
            where.append("tier = :tier")
            params["tier"] = self.tier.upper()
        if self.agent_id:
            where.append("agent_id = :agent")
            params["agent"] = self.agent_id
        if self.tag:
            where.append("tags @> CAST(:tags AS text[])")
            params["tags"] = [self.tag]
        if self.recent in RECENT_DAYS:
            where.append("created_at >= now() - make_interval(days => :days)")
            params["days"] = RECENT_DAYS[self.recent]
        if self.memory_ids is not None:
            where.append("id = ANY(:ids)")
            params["ids"] = list(self.memory_ids)
        return " AND ".join(where), params


def page(conn: sa.Connection, filters: BrowseFilters, limit: int,
         before: tuple[datetime, str] | None = None) -> list[MemoryRecord]:
    """Up to ``limit`` matching active memories, newest first, older than the cursor."""
    cond, params = filters.where()
    if before is not None:
        cond += " AND (created_at, id) < (:bt, :bid)"
        params.update(bt=before[0], bid=before[1])
    params["n"] = int(limit)
    rows = conn.execute(sa.text(
        f"SELECT {RECORD_COLS} FROM memory_records WHERE {cond} ORDER BY created_at DESC, id DESC LIMIT :n"), params)
    return [_record(r) for r in rows]


def count(conn: sa.Connection, filters: BrowseFilters, cap: int = COUNT_CAP) -> tuple[int, bool]:
    """How many match, counting at most ``cap`` (then True: there are more)."""
    cond, params = filters.where()
    params["cap"] = cap + 1
    n = conn.execute(sa.text(
        f"SELECT count(*) FROM (SELECT 1 FROM memory_records WHERE {cond} LIMIT :cap) s"), params).scalar_one()
    return min(int(n), cap), int(n) > cap


#: The active memories' types, one index probe per type (a loose index scan of the partial
#: indexes led by ``memory_type``): a DISTINCT read every active row, 60 ms at 100k.
_TYPES_CTE = """types(t) AS (
    (SELECT memory_type FROM memory_records WHERE status = 'active' ORDER BY memory_type LIMIT 1)
    UNION ALL
    SELECT (SELECT memory_type FROM memory_records WHERE status = 'active' AND memory_type > types.t
            ORDER BY memory_type LIMIT 1) FROM types WHERE types.t IS NOT NULL)"""


def memory_types(conn: sa.Connection) -> list[str]:
    return list(conn.execute(sa.text(
        f"WITH RECURSIVE {_TYPES_CTE} SELECT t FROM types WHERE t IS NOT NULL ORDER BY 1")).scalars())


def agents(conn: sa.Connection, limit: int = 500) -> list[str]:
    """Agents with active memories: a loose index scan of the browse index, one probe per
    agent, so it stays cheap with a million memories and a handful of agents."""
    return list(conn.execute(sa.text(
        """WITH RECURSIVE a(agent) AS (
               (SELECT agent_id FROM memory_records WHERE status = 'active' AND agent_id IS NOT NULL
                ORDER BY agent_id LIMIT 1)
               UNION ALL
               SELECT (SELECT agent_id FROM memory_records WHERE status = 'active' AND agent_id > a.agent
                       ORDER BY agent_id LIMIT 1) FROM a WHERE a.agent IS NOT NULL)
           SELECT agent FROM a WHERE agent IS NOT NULL LIMIT :n"""), {"n": limit}).scalars())


def top_tags(conn: sa.Connection, limit: int = 40, sample: int = 2_000, *,
             visible: Sequence[str] | None = None) -> list[str]:
    """The commonest tags among the newest ``sample`` memories (a full tally over a million
    rows would cost seconds for a drop-down; each sampled memory is a heap page read, so
    20,000 cost 55-80 ms on every list page, 2,000 about 10 ms)."""
    params: dict[str, Any] = {"s": sample, "n": limit}
    return list(conn.execute(sa.text(
        f"""SELECT t FROM (SELECT tags FROM memory_records WHERE status = 'active' AND {visible_sql(visible, params)}
                          ORDER BY created_at DESC, id DESC LIMIT :s) m, unnest(m.tags) t
           GROUP BY t ORDER BY count(*) DESC, t LIMIT :n"""), params).scalars())


# -- one memory's surroundings ----------------------------------------------------------------


def session_lines(conn: sa.Connection, agent_id: str, session_file: str, start_line: int, end_line: int,
                  limit: int = 400) -> list[dict[str, Any]]:
    """The parsed messages on lines ``start_line..end_line`` of a session file, in order."""
    rows = conn.execute(sa.text(
        """SELECT m.line, m.role, m.content, m.tool_calls, m.name
           FROM trajectory_records t JOIN session_messages m ON m.record_id = t.id
           WHERE t.agent_id = :a AND t.session_file = :f AND m.line BETWEEN :s AND :e
           ORDER BY m.seq LIMIT :n"""),
        {"a": agent_id, "f": session_file, "s": start_line, "e": end_line, "n": limit})
    return [dict(r._mapping) for r in rows]


def segments(conn: sa.Connection, segment_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Segments by id with their overall trajectory score (None before scoring)."""
    if not segment_ids:
        return {}
    rows = conn.execute(sa.text(
        """SELECT id, agent_id, session_file, segment_index, start_line, end_line, topic,
                  CASE WHEN quality_metrics IS NOT NULL
                       THEN (CAST(quality_metrics AS jsonb) -> 'summary' ->> 'overall_score')::float END AS score
           FROM task_segments WHERE id = ANY(:ids)"""), {"ids": list(segment_ids)})
    return {r.id: dict(r._mapping) for r in rows}


def partition_keys(conn: sa.Connection, files: Sequence[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (agent, session file): its file partition key and, when recorded, its arrival day."""
    if not files:
        return {}
    rows = conn.execute(sa.text(
        """SELECT t.agent_id, t.session_file, t.partition_key, a.day
           FROM trajectory_records t LEFT JOIN session_arrivals a ON a.file_key = t.partition_key
           WHERE (t.agent_id, t.session_file) IN (SELECT * FROM unnest(CAST(:a AS text[]), CAST(:f AS text[])))"""),
        {"a": [a for a, _ in files], "f": [f for _, f in files]})
    return {(r.agent_id, r.session_file): {"partition_key": r.partition_key, "day": r.day} for r in rows}


def cluster_of(conn: sa.Connection, memory_id: str) -> dict[str, Any] | None:
    """The cluster a memory belongs to now, if any."""
    row = conn.execute(sa.text(
        """SELECT k.id, k.topic, k.status, k.size, k.skill_slug FROM knowledge_clusters k
           JOIN memory_records m ON m.cluster_id = k.id WHERE m.id = :m"""), {"m": memory_id}).first()
    return dict(row._mapping) if row else None


def skills_using(conn: sa.Connection, memory_id: str, *, visible: Sequence[str] | None = None
                 ) -> list[dict[str, Any]]:
    """Every skill version whose evidence includes the memory, current first."""
    params: dict[str, Any] = {"m": memory_id}
    rows = conn.execute(sa.text(
        f"""SELECT slug, version, name, status, lifecycle, {RELIABILITY_SQL} AS reliability
            FROM skills WHERE memory_ids @> ARRAY[CAST(:m AS text)] AND {visible_skill_sql(visible, params)}
            ORDER BY status = 'current' DESC, slug, created_at DESC"""), params)
    return [dict(r._mapping) for r in rows]


def skill_versions(conn: sa.Connection, slug: str, *, visible: Sequence[str] | None = None
                   ) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"s": slug}
    rows = conn.execute(sa.text(
        "SELECT version, status, skill_md, memory_ids, score, created_at FROM skills WHERE slug = :s "
        f"AND {visible_skill_sql(visible, params)} ORDER BY created_at DESC, version DESC"), params)
    return [dict(r._mapping) for r in rows]


def skills_by_reliability(conn: sa.Connection, limit: int, offset: int = 0,
                          include_retired: bool = True, *, visible: Sequence[str] | None = None
                          ) -> list[dict[str, Any]]:
    """Current skills, most reliable first (ties: most used evidence, then name)."""
    params: dict[str, Any] = {"n": limit, "o": offset}
    cond = ("" if include_retired else "AND lifecycle <> 'retired'") + f" AND {visible_skill_sql(visible, params)}"
    rows = conn.execute(sa.text(
        f"""SELECT slug, version, name, description, lifecycle, helpful_count, unhelpful_count,
                   {RELIABILITY_SQL} AS reliability, cardinality(memory_ids) AS memory_count, score, created_at
            FROM skills WHERE status = 'current' {cond}
            ORDER BY reliability DESC, memory_count DESC, slug LIMIT :n OFFSET :o"""), params)
    return [dict(r._mapping) for r in rows]


def count_current_skills(conn: sa.Connection, *, visible: Sequence[str] | None = None) -> int:
    params: dict[str, Any] = {}
    return int(conn.execute(sa.text(
        f"SELECT count(*) FROM skills WHERE status = 'current' AND {visible_skill_sql(visible, params)}"),
        params).scalar_one())


# -- edits -------------------------------------------------------------------------------------


def save_revision(conn: sa.Connection, record: MemoryRecord, edited_by: str) -> None:
    """Keep the text a memory has now, before an edit replaces it."""
    conn.execute(sa.text(
        """INSERT INTO memory_revisions (memory_id, content, context, resolution, tags, summary_l0, overview_l1,
                                         edited_by)
           VALUES (:m, :c, :x, :r, CAST(:t AS text[]), :l0, :l1, :by)"""),
        {"m": record.id, "c": record.content, "x": record.context, "r": record.resolution, "t": list(record.tags),
         "l0": record.summary_l0, "l1": record.overview_l1, "by": edited_by})


def apply_edit(conn: sa.Connection, memory_id: str, body: dict[str, str], summaries: tuple[str, str],
               embedding: np.ndarray, tags: Sequence[str]) -> None:
    """A person's new text: body, summaries, vector and tags (no hit counted, no merge)."""
    sets = ["tags = CAST(:tags AS text[])", "merge_pending = false", "updated_at = now()"]
    params: dict[str, Any] = {"id": memory_id, "tags": list(tags)}
    rewrite_sets(sets, params, body=body, summaries=summaries, embedding=embedding)
    conn.execute(sa.text(f"UPDATE memory_records SET {', '.join(sets)} WHERE id = :id"), params)


def revisions(conn: sa.Connection, memory_id: str) -> list[dict[str, Any]]:
    """A memory's earlier texts, newest first."""
    rows = conn.execute(sa.text(
        "SELECT id, content, context, resolution, tags, summary_l0, overview_l1, edited_by, edited_at "
        "FROM memory_revisions WHERE memory_id = :m ORDER BY edited_at DESC, id DESC"), {"m": memory_id})
    return [dict(r._mapping) for r in rows]


def revisions_of(conn: sa.Connection, memory_ids: Sequence[str]) -> list[dict[str, Any]]:
    if not memory_ids:
        return []
    rows = conn.execute(sa.text(
        "SELECT memory_id, content, context, resolution, tags FROM memory_revisions WHERE memory_id = ANY(:ids)"),
        {"ids": list(memory_ids)})
    return [dict(r._mapping) for r in rows]


def drop_revisions(conn: sa.Connection, memory_ids: Sequence[str]) -> int:
    """Forget earlier texts: a memory rebuilt after forget may have been edited from text that
    came from the forgotten source."""
    if not memory_ids:
        return 0
    return conn.execute(sa.text("DELETE FROM memory_revisions WHERE memory_id = ANY(:ids)"),
                        {"ids": list(memory_ids)}).rowcount


# -- overview ------------------------------------------------------------------------------------


def created_by_week(conn: sa.Connection, weeks: int = 12, *, visible: Sequence[str] | None = None
                    ) -> list[dict[str, Any]]:
    """Active memories created per ISO week and type, for the last ``weeks`` weeks: one
    index-only range count per (week, type) on the browse index by type, where grouping
    every row by ``date_trunc`` sorted them all (on disk past 4 MB of work_mem)."""
    params: dict[str, Any] = {"w": weeks}
    seen = visible_sql(visible, params, "m.")
    rows = conn.execute(sa.text(
        f"""WITH RECURSIVE {_TYPES_CTE}
            SELECT w.week::date AS week, types.t AS memory_type, c.n
            FROM generate_series(date_trunc('week', now()) - make_interval(weeks => :w - 1),
                                 date_trunc('week', greatest(now(), (SELECT max(created_at) FROM memory_records
                                                                     WHERE status = 'active'))),
                                 interval '1 week') w(week)
            CROSS JOIN types
            CROSS JOIN LATERAL (SELECT count(*) AS n FROM memory_records m
                                WHERE m.status = 'active' AND m.memory_type = types.t AND {seen}
                                  AND m.created_at >= w.week AND m.created_at < w.week + interval '1 week') c
            WHERE types.t IS NOT NULL AND c.n > 0
            ORDER BY 1, 2"""), params)
    return [dict(r._mapping) for r in rows]


def ingestion_problems(conn: sa.Connection, limit: int = 20, *, visible: Sequence[str] | None = None
                       ) -> tuple[int, list[dict[str, Any]]]:
    """Files whose lines could not all be read: how many, and the latest with their first
    errors; ``visible``: only these agents' files."""
    params: dict[str, Any] = {"n": limit, "visible": list(visible or [])}
    mine = "" if visible is None else "AND t.agent_id = ANY(CAST(:visible AS text[]))"
    total = int(conn.execute(sa.text(
        f"SELECT count(*) FROM trajectory_records t WHERE problem_count > 0 {mine}"), params).scalar_one())
    rows = conn.execute(sa.text(
        f"""SELECT t.agent_id, t.session_file, t.problem_count, t.updated_at,
                  (SELECT p.line FROM parse_problems p WHERE p.record_id = t.id ORDER BY p.seq LIMIT 1) AS line,
                  (SELECT p.error FROM parse_problems p WHERE p.record_id = t.id ORDER BY p.seq LIMIT 1) AS error
           FROM trajectory_records t WHERE t.problem_count > 0 {mine} ORDER BY t.updated_at DESC LIMIT :n"""),
        params)
    return total, [dict(r._mapping) for r in rows]


def fallback_counts(conn: sa.Connection) -> dict[str, int]:
    """Memories still marked with a task the rules provider did in place of the LLM, by task."""
    rows = conn.execute(sa.text(
        "SELECT t, count(*) FROM memory_records, unnest(fallback_tasks) t "
        "WHERE cardinality(fallback_tasks) > 0 GROUP BY t ORDER BY t"))
    return {r[0]: int(r[1]) for r in rows}


# -- what forgetting takes with it ---------------------------------------------------------------


def forget_preview(conn: sa.Connection, memory_ids: Sequence[str], *, visible: Sequence[str] | None = None
                   ) -> dict[str, Any]:
    """What forgetting these memories removes or rebuilds, read without changing anything:
    their contributions, earlier texts and feedback, the clusters that lose them (dissolved
    when nothing else is left) and every skill version built on them."""
    ids = list(memory_ids)
    one = conn.execute(sa.text(
        """SELECT (SELECT count(*) FROM memory_contributions WHERE memory_id = ANY(:ids)) AS contributions,
                  (SELECT count(*) FROM memory_revisions WHERE memory_id = ANY(:ids)) AS revisions,
                  (SELECT count(*) FROM feedback_events WHERE target_kind = 'memory' AND target_id = ANY(:ids))
                      AS feedback,
                  (SELECT count(*) FROM memory_files WHERE memory_id = ANY(:ids)) AS files"""),
        {"ids": ids}).one()
    clusters = conn.execute(sa.text(
        """SELECT k.id, k.topic, k.skill_slug,
                  (SELECT count(*) FROM memory_records r WHERE r.cluster_id = k.id AND r.status = 'active'
                     AND NOT r.id = ANY(:ids)) AS remaining
           FROM knowledge_clusters k
           WHERE k.id IN (SELECT cluster_id FROM memory_records WHERE id = ANY(:ids) AND cluster_id IS NOT NULL)
           ORDER BY k.id"""), {"ids": ids})
    params: dict[str, Any] = {"ids": ids}
    skills = conn.execute(sa.text(
        f"""SELECT slug, array_agg(version ORDER BY created_at) AS versions, bool_or(status = 'current') AS current,
                  max(cluster_id) AS cluster_id
           FROM skills WHERE memory_ids && CAST(:ids AS text[]) AND {visible_skill_sql(visible, params)}
           GROUP BY slug ORDER BY slug"""), params)
    remaining = {}
    # a cluster's topic is drawn from all its members' text: not for an agent-bound viewer
    cluster_rows = [{**dict(r._mapping), **({"topic": ""} if visible is not None else {})} for r in clusters]
    for c in cluster_rows:
        remaining[c["id"]] = c["remaining"]
    return {**dict(one._mapping), "clusters": cluster_rows,
            "skills": [{**dict(r._mapping), "remaining": remaining.get(r.cluster_id)} for r in skills]}
