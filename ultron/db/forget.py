"""SQL of forget that spans table families: what a forgotten source reached (sessions,
clusters, skill versions), the clean-up of labels and slugs built from it, and VACUUM.

The memory-side deletes live in ``ultron.db.memories``; this module is what
``ultron.forget`` needs around them, each function on the caller's connection.
"""

from __future__ import annotations

from typing import Any, Sequence

import sqlalchemy as sa

from ultron.db.memories import session_condition

#: Every table forget can change, in the order VACUUM visits them.
TABLES = ("trajectory_records", "session_messages", "parse_problems", "raw_user_uploads", "task_segments",
          "memory_records", "memory_contributions", "memory_files",
          "knowledge_clusters", "skills", "feedback_events", "bundle_serves")


# -- sessions --------------------------------------------------------------------------


def sessions_matching(conn: sa.Connection, *, session_file: str | None, agent_id: str | None
                      ) -> list[dict[str, Any]]:
    """The session rows of this file and/or agent, with how many parsed messages and parse
    problems go with them (ON DELETE CASCADE): read before they are deleted."""
    if not (session_file or agent_id):
        return []
    cond, params = session_condition(session_file, agent_id, "r.")
    rows = conn.execute(sa.text(
        f"""SELECT r.agent_id, r.session_file, r.partition_key, r.agent_session_id,
                   (SELECT count(*) FROM session_messages m WHERE m.record_id = r.id) AS messages,
                   (SELECT count(*) FROM parse_problems p WHERE p.record_id = r.id) AS problems
            FROM trajectory_records r WHERE {cond} ORDER BY r.session_file, r.agent_id"""), params)
    return [dict(r._mapping) for r in rows]


def archived_paths(conn: sa.Connection, *, session_file: str | None, agent_id: str | None) -> list[str]:
    """Source paths of raw archive rows of this file and/or agent (files ingested even when
    their session row is gone)."""
    if not (session_file or agent_id):
        return []
    cond, params = session_condition(session_file, agent_id, "r.")
    cond = cond.replace("r.session_file", "r.source_path")
    return list(conn.execute(sa.text(
        f"SELECT DISTINCT r.source_path FROM raw_user_uploads r WHERE r.source_path IS NOT NULL AND {cond}"),
        params).scalars())


def segment_topics(conn: sa.Connection, *, segment_ids: Sequence[str], session_file: str | None,
                   agent_id: str | None) -> list[str]:
    """Topics of the segments forget deletes (text that labels may have been built from)."""
    where, params = ["s.id = ANY(:ids)"], {"ids": list(segment_ids)}
    if session_file or agent_id:
        cond, more = session_condition(session_file, agent_id, "r.")
        where.append(cond.replace("r.", "s."))
        params.update(more)
    return [t for t in conn.execute(sa.text(
        f"SELECT topic FROM task_segments s WHERE {' OR '.join(f'({w})' for w in where)}"), params).scalars() if t]


# -- memories and the text that survives ------------------------------------------------


def memory_clusters(conn: sa.Connection, memory_ids: Sequence[str]) -> set[str]:
    """Clusters that hold any of these memories (read before the memories change)."""
    if not memory_ids:
        return set()
    return set(conn.execute(sa.text(
        "SELECT DISTINCT cluster_id FROM memory_records WHERE id = ANY(:ids) AND cluster_id IS NOT NULL"),
        {"ids": list(memory_ids)}).scalars())


def surviving_terms(conn: sa.Connection, terms: Sequence[str]) -> set[str]:
    """The terms still written somewhere in the memory store (any status, any field): a
    label made of a term that is not came from forgotten text. Substring matching, so a
    doubtful term counts as surviving (the label is then left alone)."""
    if not terms:
        return set()
    return set(conn.execute(sa.text(
        """SELECT t FROM unnest(CAST(:terms AS text[])) AS t
           WHERE EXISTS (SELECT 1 FROM memory_records m WHERE strpos(lower(m.content || ' ' || m.context || ' ' ||
                         m.resolution || ' ' || array_to_string(m.tags, ' ')), t) > 0)"""),
        {"terms": sorted(set(terms))}).scalars())


# -- clusters ----------------------------------------------------------------------------


def cluster_topics(conn: sa.Connection) -> list[dict[str, Any]]:
    """id, status, topic of every cluster, dissolved ones included (their topic is history)."""
    return [dict(r._mapping) for r in conn.execute(sa.text(
        "SELECT id, status, topic FROM knowledge_clusters WHERE topic <> '' ORDER BY id"))]


def active_members(conn: sa.Connection, cluster_ids: Sequence[str]) -> dict[str, list[str]]:
    """Active member ids of each of these clusters (a cluster without members is absent)."""
    if not cluster_ids:
        return {}
    out: dict[str, list[str]] = {}
    for cid, mid in conn.execute(sa.text(
            "SELECT cluster_id, id FROM memory_records WHERE cluster_id = ANY(:ids) AND status = 'active' "
            "ORDER BY cluster_id, created_at, id"), {"ids": list(cluster_ids)}):
        out.setdefault(cid, []).append(mid)
    return out


def blank_topics(conn: sa.Connection, cluster_ids: Sequence[str]) -> int:
    if not cluster_ids:
        return 0
    return conn.execute(sa.text(
        "UPDATE knowledge_clusters SET topic = '', updated_at = now() WHERE id = ANY(:ids) AND topic <> ''"),
        {"ids": list(cluster_ids)}).rowcount


def strip_attempt_members(conn: sa.Connection, deleted: Sequence[str], affected: Sequence[str]) -> set[str]:
    """Deleted memories leave every cluster's record of its last crystallisation attempt, and
    an attempt that saw a deleted or rebuilt memory loses its reason (a quality-gate reason
    quotes the draft's text). Returns the clusters changed."""
    if not affected:
        return set()
    return set(conn.execute(sa.text(
        """UPDATE knowledge_clusters SET
               attempt_member_ids = ARRAY(SELECT x FROM unnest(attempt_member_ids) AS x WHERE NOT (x = ANY(:gone))),
               attempt_reason = CASE WHEN attempt_reason IS NULL THEN NULL
                                     ELSE 'withdrawn by forget: the attempt saw forgotten memories' END
           WHERE attempt_member_ids && CAST(:ids AS text[]) RETURNING id"""),
        {"gone": list(deleted), "ids": list(affected)}).scalars())


def clear_attempts(conn: sa.Connection, cluster_ids: Sequence[str]) -> None:
    """Clusters about to get their skill rebuilt count as never tried: if the rebuild does not
    happen now, the next skill evolution finds them ready."""
    if cluster_ids:
        conn.execute(sa.text(
            "UPDATE knowledge_clusters SET attempt_member_ids = '{}', attempt_status = NULL, attempt_reason = NULL, "
            "updated_at = now() WHERE id = ANY(:ids)"), {"ids": list(cluster_ids)})


def retire_cluster_skill(conn: sa.Connection, cluster_id: str, member_ids: Sequence[str], reason: str,
                         keep_slug: str | None) -> None:
    """The cluster's skill was withdrawn: no skill slug (it waits for critical mass like a new
    cluster), the attempt recorded as retired. ``keep_slug``: a slug whose clean history
    remains, so a later skill of this cluster can continue that line."""
    conn.execute(sa.text(
        """UPDATE knowledge_clusters SET skill_slug = NULL, attempt_member_ids = :ids, attempt_status = 'retired',
               attempt_reason = :r, attempted_at = now(), updated_at = now(),
               superseded_slugs = CASE WHEN CAST(:keep AS text) IS NULL OR CAST(:keep AS text) = ANY(superseded_slugs)
                                       THEN superseded_slugs ELSE superseded_slugs || CAST(:keep AS text) END
           WHERE id = :id"""), {"ids": list(member_ids), "r": reason, "keep": keep_slug, "id": cluster_id})


# -- skills ------------------------------------------------------------------------------


def all_slugs(conn: sa.Connection) -> set[str]:
    """Every slug in use: skill rows and the clusters' current and merged-in slugs."""
    return set(conn.execute(sa.text(
        "SELECT slug FROM skills UNION SELECT skill_slug FROM knowledge_clusters WHERE skill_slug IS NOT NULL "
        "UNION SELECT unnest(superseded_slugs) FROM knowledge_clusters "
        "UNION SELECT unnest(superseded_slugs) FROM skills")).scalars())


def skill_versions_reached(conn: sa.Connection, memory_ids: Sequence[str], slugs: Sequence[str]
                           ) -> list[dict[str, Any]]:
    """Skill versions (any status) built from any of these memories, of one of these slugs,
    or naming one of these slugs as superseded (their SKILL.md lists it)."""
    rows = conn.execute(sa.text(
        "SELECT id, slug, version, status, path, cluster_id FROM skills "
        "WHERE memory_ids && CAST(:ids AS text[]) OR slug = ANY(:slugs) OR superseded_slugs && CAST(:slugs AS text[]) "
        "ORDER BY slug, created_at"), {"ids": list(memory_ids), "slugs": list(slugs)})
    return [dict(r._mapping) for r in rows]


def delete_skill_rows(conn: sa.Connection, ids: Sequence[str]) -> int:
    if not ids:
        return 0
    return conn.execute(sa.text("DELETE FROM skills WHERE id = ANY(:ids)"), {"ids": list(ids)}).rowcount


def drop_slugs(conn: sa.Connection, slugs: Sequence[str]) -> set[str]:
    """Slugs made of forgotten text disappear from the clusters (current and merged-in) and
    from the surviving skills' superseded lists. Returns the clusters changed."""
    if not slugs:
        return set()
    params = {"s": list(slugs)}
    changed = set(conn.execute(sa.text(
        """UPDATE knowledge_clusters SET
               skill_slug = CASE WHEN skill_slug = ANY(:s) THEN NULL ELSE skill_slug END,
               superseded_slugs = ARRAY(SELECT x FROM unnest(superseded_slugs) AS x WHERE NOT (x = ANY(:s))),
               updated_at = now()
           WHERE skill_slug = ANY(:s) OR superseded_slugs && CAST(:s AS text[]) RETURNING id"""), params).scalars())
    conn.execute(sa.text(
        "UPDATE skills SET superseded_slugs = ARRAY(SELECT x FROM unnest(superseded_slugs) AS x "
        "WHERE NOT (x = ANY(:s))) WHERE superseded_slugs && CAST(:s AS text[])"), params)
    return changed


def cluster_of_slug(conn: sa.Connection, slug: str) -> dict[str, Any] | None:
    """The active cluster whose skill this slug is."""
    row = conn.execute(sa.text(
        "SELECT id, skill_slug FROM knowledge_clusters WHERE skill_slug = :s AND status = 'active' LIMIT 1"),
        {"s": slug}).first()
    return dict(row._mapping) if row else None


def versions_left(conn: sa.Connection, slug: str) -> int:
    return conn.execute(sa.text("SELECT count(*) FROM skills WHERE slug = :s"), {"s": slug}).scalar_one()


# -- disk space ----------------------------------------------------------------------------


def vacuum(engine: sa.Engine, tables: Sequence[str] = TABLES, *, full: bool = True) -> list[str]:
    """VACUUM the tables (FULL by default: each table and its TOAST data are rewritten into new
    files and the old files removed, so deleted rows leave the disk; plain VACUUM only marks
    their space reusable). Runs outside a transaction, one table at a time; FULL holds an
    exclusive lock on each table while it is rewritten."""
    done = []
    option = "(FULL, ANALYZE)" if full else "(ANALYZE)"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in tables:
            if table not in TABLES:
                raise ValueError(f"{table!r} is not one of Ultron's tables")
            conn.exec_driver_sql(f'VACUUM {option} "{table}"')
            done.append(table)
    return done
