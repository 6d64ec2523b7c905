"""SQL of forget that spans table families: what a forgotten source reached (sessions,
clusters, skill versions), the clean-up of labels and slugs built from it, VACUUM, and the
purge that leaves the forgotten text in none of the server's files (:func:`purge`).

The memory-side deletes live in ``ultron.db.memories``; this module is what
``ultron.forget`` needs around them, each function on the caller's connection.
"""

from __future__ import annotations

import re
import time
from typing import Any, Sequence

import sqlalchemy as sa

from ultron.db.memories import session_condition

#: Every table forget can change, in the order VACUUM visits them.
TABLES = ("trajectory_records", "session_messages", "parse_problems", "raw_user_uploads", "task_segments",
          "memory_records", "memory_contributions", "memory_files", "memory_revisions",
          "knowledge_clusters", "skills", "feedback_events", "bundle_serves")
#: The lexical search's word counts (migration 0006), kept by triggers on memory_records: a
#: changed memory changes them, and their dead rows hold the words.
LEXICON_TABLES = ("memory_lexemes", "memory_corpus")
#: The planner statistics: ANALYZE replaces a table's rows there, and the most common values
#: and elements of its text and tsvector columns quote the data.
STATISTICS_CATALOGS = ("pg_catalog.pg_statistic", "pg_catalog.pg_statistic_ext_data")
#: At most this many WAL switches and checkpoints (a segment is 16 MB; ``max_wal_size`` is
#: 1 GB by default, so recycled segments ahead of the current one are fewer than that).
WAL_ROUNDS_MAX = 70
SEGMENT = re.compile(r"^[0-9A-F]{24}$")


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


def transaction_id(conn: sa.Connection) -> str:
    """This transaction's id (xid8, as text): a snapshot older than it may still see what it deletes."""
    return conn.execute(sa.text("SELECT CAST(pg_current_xact_id() AS text)")).scalar_one()


def vacuum(engine: sa.Engine, tables: Sequence[str] = TABLES, *, full: bool = True) -> list[str]:
    """VACUUM the tables (FULL by default: each table and its TOAST data are rewritten into new
    files and the old files removed, so deleted rows leave the disk; plain VACUUM only marks
    their space reusable). Runs outside a transaction, one table at a time; FULL holds an
    exclusive lock on each table while it is rewritten."""
    done = []
    option = "(FULL, ANALYZE)" if full else "(ANALYZE)"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in tables:
            if table not in TABLES + LEXICON_TABLES:
                raise ValueError(f"{table!r} is not one of Ultron's tables")
            conn.exec_driver_sql(f'VACUUM {option} "{table}"')
            done.append(table)
    return done


def purge(engine: sa.Engine, tables: Sequence[str], *, after_xid: str | None = None,
          wait_seconds: float = 10.0) -> dict[str, Any]:
    """Leave deleted rows in none of the server's files. In order, on one connection outside
    a transaction:

    1. wait (up to ``wait_seconds``) for transactions of this database older than ``after_xid``
       (the forget's transaction): VACUUM keeps the rows a running snapshot can still see;
    2. ``DELETE FROM memory_lexemes`` the words no active memory holds (the trigger already
       does; this catches any left behind);
    3. ``VACUUM (FULL, ANALYZE)`` each table: heap, TOAST and every index are rewritten into
       new files, and ANALYZE replaces the table's planner statistics (pg_statistic) with
       ones sampled from the rows left. ANALYZE of an empty table keeps the old statistics,
       so a table left empty has its statistics (and its indexes') cleared instead:
       ``pg_clear_attribute_stats`` (PostgreSQL 18) per column;
    4. ``VACUUM (FULL) pg_statistic, pg_statistic_ext_data``: the replaced statistics (whose
       most common values quote text and lexemes) leave the catalog's files. Needs a
       superuser or the database's owner (or MAINTAIN on PostgreSQL 17+): without that this
       step is skipped and said so;
    5. ``CHECKPOINT``: the files VACUUM FULL replaced are unlinked (at commit they are only
       truncated), every dirty page is written;
    6. ``SELECT pg_switch_wal()`` then ``CHECKPOINT``, repeated: WAL still holds the deleted
       rows (their inserts, and the full-page images written before each page's first
       change after a checkpoint). A switch zero-fills the rest of the current segment; a
       checkpoint deletes (``wal_recycle = off``) or renames for reuse the segments before
       the one holding its redo point. The rounds go on until every segment that was in
       pg_wal after the first round has been deleted or switched past (so a segment renamed
       for reuse was overwritten: its head by new WAL, its tail by a switch's zeros). Older
       segments the server keeps (``wal_keep_size``, a replication slot, an archiving
       backlog) are reported. The embedded server needs two rounds.

    Returns ``tables`` (vacuumed), ``statistics`` (whether step 4 ran), ``statistics_cleared``
    (columns of empty tables whose statistics were cleared), ``lexemes_removed``,
    ``checkpoints``, ``wal_switches``, ``wal_segments`` (pg_wal's segments afterwards; None
    when they cannot be listed), ``server`` (archive_mode, wal_recycle, replicas, slots: what
    the report says forget cannot reach), ``problems`` (steps skipped, and why) and
    ``seconds``."""
    started = time.monotonic()
    out: dict[str, Any] = {"tables": [], "statistics": False, "statistics_cleared": 0, "lexemes_removed": 0,
                           "checkpoints": 0,
                           "wal_switches": 0, "wal_segments": None, "server": {}, "problems": []}
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if after_xid:
            _wait_for_older_snapshots(conn, after_xid, wait_seconds, out["problems"])
        if "memory_lexemes" in tables:
            out["lexemes_removed"] = conn.execute(sa.text(
                "DELETE FROM memory_lexemes WHERE lexeme IN "
                "(SELECT lexeme FROM memory_lexemes GROUP BY lexeme HAVING sum(df) <= 0)")).rowcount
        for table in tables:
            if table not in TABLES + LEXICON_TABLES:
                raise ValueError(f"{table!r} is not one of Ultron's tables")
            conn.exec_driver_sql(f'VACUUM (FULL, ANALYZE) "{table}"')
            out["tables"].append(table)
            out["statistics_cleared"] += _clear_statistics_if_empty(conn, table, out["problems"])
        if _may_vacuum_catalogs(conn):
            conn.exec_driver_sql(f"VACUUM (FULL) {', '.join(STATISTICS_CATALOGS)}")
            out["statistics"] = True
        else:
            out["problems"].append(
                "planner statistics: ANALYZE replaced them, but the old rows stay in pg_statistic's files until "
                "VACUUM FULL pg_statistic, which needs a superuser or the database's owner (this role is neither)")
        out["server"] = _wal_facts(conn)
        if _privileged(conn, "CHECKPOINT", out["problems"]):
            out["checkpoints"] += 1
            _wal_rounds(conn, out)
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


def _wait_for_older_snapshots(conn: sa.Connection, xid: str, wait_seconds: float, problems: list[str]) -> None:
    query = sa.text(
        """SELECT pid, state FROM pg_stat_activity
           WHERE pid <> pg_backend_pid() AND datname = current_database()
             AND ((backend_xmin IS NOT NULL AND age(backend_xmin) >= age(xid(CAST(:x AS xid8))))
               OR (backend_xid IS NOT NULL AND age(backend_xid) >= age(xid(CAST(:x AS xid8)))))""")
    deadline = time.monotonic() + wait_seconds
    while True:
        older = conn.execute(query, {"x": xid}).all()
        if not older or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if older:
        problems.append(
            f"{len(older)} transaction(s) older than the forget still run "
            f"(pid {', '.join(str(r.pid) for r in older)}): "
            "VACUUM kept the deleted rows they can still see; forget with purge again once they end")
    prepared = conn.execute(sa.text(
        "SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()")).scalar_one()
    if prepared:
        problems.append(f"{prepared} prepared transaction(s) hold back VACUUM: the rows they can see stay")


def _clear_statistics_if_empty(conn: sa.Connection, table: str, problems: list[str]) -> int:
    """ANALYZE finds no row in an empty table and leaves its statistics as they were, which
    quote the deleted rows: clear them (the table's columns and its indexes' expressions).
    Returns how many columns were cleared."""
    if conn.exec_driver_sql(f'SELECT EXISTS (SELECT 1 FROM "{table}")').scalar():
        return 0
    columns = conn.execute(sa.text(  # pg_stats: pg_statistic itself is for superusers only
        """SELECT s.schemaname, s.tablename, s.attname, s.inherited FROM pg_stats s
           JOIN pg_namespace n ON n.nspname = s.schemaname
           JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename
           WHERE c.oid = CAST(:t AS regclass)
              OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = CAST(:t AS regclass))"""),
        {"t": table}).all()
    for schema, relation, column, inherited in columns:
        try:
            conn.execute(sa.text("SELECT pg_clear_attribute_stats(:s, :r, :c, :i)"),
                         {"s": schema, "r": relation, "c": column, "i": inherited})
        except sa.exc.DBAPIError as exc:  # before PostgreSQL 18, or not this role's table
            problems.append(f"planner statistics of the emptied table {table}: ANALYZE keeps them and clearing "
                            f"them failed ({str(exc.orig).strip()})")
            return 0
    return len(columns)


def _may_vacuum_catalogs(conn: sa.Connection) -> bool:
    """Superuser, the database's owner (who may VACUUM its catalogs), or MAINTAIN on
    pg_statistic (PostgreSQL 17+). Checked first: VACUUM only warns and skips otherwise."""
    allowed = conn.execute(sa.text(
        "SELECT r.rolsuper OR pg_has_role(current_user, d.datdba, 'MEMBER') FROM pg_roles r, pg_database d "
        "WHERE r.rolname = current_user AND d.datname = current_database()")).scalar()
    if allowed:
        return True
    if int(conn.execute(sa.text("SHOW server_version_num")).scalar_one()) >= 170000:
        return bool(conn.execute(sa.text(
            "SELECT bool_and(has_table_privilege(t, 'MAINTAIN')) FROM unnest(CAST(:t AS text[])) AS t"),
            {"t": list(STATISTICS_CATALOGS)}).scalar())
    return False


def _privileged(conn: sa.Connection, sql: str, problems: list[str]) -> bool:
    """Run a statement that needs a privilege this role may lack (CHECKPOINT: superuser or
    pg_checkpoint; pg_switch_wal(): superuser or a grant); False, and said so, without it."""
    try:
        conn.exec_driver_sql(sql)
        return True
    except sa.exc.DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != "42501":  # insufficient_privilege
            raise
        problems.append(f"{sql.split('(')[0]}: not allowed for this role ({str(exc.orig).strip()}); WAL still "
                        "holds the deleted rows until the server's own checkpoints recycle it")
        return False


def _wal_facts(conn: sa.Connection) -> dict[str, Any]:
    """What decides whether WAL leaves this server: archiving, recycling, replicas, slots."""
    settings = dict(conn.execute(sa.text(
        "SELECT name, setting FROM pg_settings WHERE name IN ('archive_mode', 'wal_recycle', 'wal_keep_size')")).all())
    return {"archive_mode": settings.get("archive_mode"), "wal_recycle": settings.get("wal_recycle"),
            "wal_keep_size": settings.get("wal_keep_size"),
            "replicas": conn.execute(sa.text("SELECT count(*) FROM pg_stat_replication")).scalar_one(),
            "replication_slots": conn.execute(sa.text("SELECT count(*) FROM pg_replication_slots")).scalar_one()}


def _current_segment(conn: sa.Connection) -> str:
    return conn.execute(sa.text("SELECT pg_walfile_name(pg_current_wal_insert_lsn())")).scalar_one()


def _wal_segments(conn: sa.Connection) -> list[str] | None:
    """pg_wal's segment files (superuser or pg_monitor), None when this role cannot list them."""
    try:
        names = conn.execute(sa.text("SELECT name FROM pg_ls_waldir()")).scalars().all()
    except sa.exc.DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != "42501":
            raise
        return None
    return sorted(n for n in names if SEGMENT.match(n))


def _wal_rounds(conn: sa.Connection, out: dict[str, Any]) -> None:
    """Step 6 of :func:`purge`: switch and checkpoint until no segment that could hold the
    deleted rows is left (see there)."""
    problems = out["problems"]
    listed = _wal_segments(conn)
    highest = max([*(listed or []), _current_segment(conn)])
    for round_ in range(WAL_ROUNDS_MAX):
        if not _privileged(conn, "SELECT pg_switch_wal()", problems):
            return
        out["wal_switches"] += 1
        conn.exec_driver_sql("CHECKPOINT")
        out["checkpoints"] += 1
        current, listed = _current_segment(conn), _wal_segments(conn)
        if listed is None:
            if round_ == 1:  # enough on a server that deletes old segments; nothing to check it by
                problems.append("pg_wal cannot be listed by this role (needs pg_monitor): two WAL switches and "
                                "checkpoints ran, which leave no old segment where wal_recycle is off")
                return
            continue
        if round_ == 0:
            # a segment renamed for reuse by this checkpoint (wal_recycle = on) still holds old bytes
            highest = max([highest, *listed])
        if current > highest:
            break
    else:
        problems.append(f"pg_wal still held segments written before the purge after {WAL_ROUNDS_MAX} WAL switches")
    out["wal_segments"] = listed
    kept = [n for n in (listed or []) if n < _current_segment(conn)]
    if kept:
        problems.append(f"the server keeps {len(kept)} older WAL segment(s) ({kept[0]}...): wal_keep_size, a "
                        "replication slot or an archiving backlog; they hold the deleted rows until released")
