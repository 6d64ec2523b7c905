"""SQL for the per-owner vector indexes (revision 0017): one partial HNSW index for each agent
with many memories, one for the shared memories, and one for each of the commonest tags.

A search filtered to one agent walked the store's one HNSW graph and skipped every other
agent's memories on the way: 30 ms and recall 0.87 for one agent among 50 at 100k
memories, against 2.5 ms and 0.985 through a graph of that agent's memories alone
(``benchmarks/filtered_search.py``). A partial index is what Postgres offers for that
without changing the table's keys (LIST partitions by agent would: the primary key and
every foreign key to it would have to carry the agent). The planner uses one when the
statement names the agent (``agent_id = $1`` in a statement planned with its values: the
search's runs unprepared), so the search statements need no index names.

Which owners get one is decided by ``MemoryService.refresh_vector_indexes`` (the
maintenance step); ``memory_vector_indexes`` records what exists, by scope: ``agent:<id>``,
``shared`` or ``tag:<tag>``. A tag's index serves a search filtered by that one tag (the
statement's ``tags @> ARRAY[tag]`` is the index's predicate); every memory carries several
tags, so only the ``ULTRON_TAG_INDEXES`` commonest get one.
"""

from __future__ import annotations

import hashlib
from typing import Any

import sqlalchemy as sa

#: the store's HNSW parameters (revision 0002), so a partial graph finds what the whole one does
HNSW = "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
SHARED = "shared"


def agent_scope(agent_id: str) -> str:
    return f"agent:{agent_id}"


def tag_scope(tag: str) -> str:
    return f"tag:{tag}"


def index_name(scope: str) -> str:
    """A name Postgres accepts whatever the agent id holds (63 bytes at most)."""
    return "ix_memory_vec_" + hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _literal(value: str) -> str:
    """A SQL string literal (DDL takes no parameters; standard_conforming_strings is on)."""
    if "\x00" in value:
        raise ValueError("an agent id with a NUL byte")
    return "'" + value.replace("'", "''") + "'"


def predicate(scope: str) -> str:
    """The rows a scope's index holds: exactly what a search of that owner asks for."""
    if scope == SHARED:
        return "shared AND status = 'active'"
    if scope.startswith("tag:"):
        # written as the search writes it once its parameter is bound (CAST(:tags AS text[]))
        return f"tags @> CAST(ARRAY[{_literal(scope[len('tag:'):])}] AS text[]) AND status = 'active'"
    if not scope.startswith("agent:"):
        raise ValueError(f"unknown vector index scope {scope!r}")
    return f"agent_id = {_literal(scope[len('agent:'):])} AND status = 'active'"


def create_sql(scope: str, *, concurrently: bool) -> str:
    how = "CONCURRENTLY " if concurrently else ""
    return f"CREATE INDEX {how}IF NOT EXISTS {index_name(scope)} ON memory_records {HNSW} WHERE {predicate(scope)}"


#: a tag on more than this share of the memories gets no graph of its own: walking the
#: store's graph finds its memories fast enough (one in five passes), and a tag such as
#: ``trajectory``, which every memory extracted from a session carries, would copy the graph
TAG_MAX_SHARE = 0.2


def owner_counts(conn: sa.Connection, at_least: int, tags: int = 0) -> dict[str, int]:
    """Scopes with at least ``at_least`` active memories, and how many each has: agents, the
    shared memories, and the ``tags`` commonest tags on at most ``TAG_MAX_SHARE`` of the
    memories (``agent:`` tags aside: the agent's own index serves its searches)."""
    rows = conn.execute(sa.text(
        "SELECT 'agent:' || agent_id AS scope, count(*) AS n FROM memory_records "
        "WHERE status = 'active' AND agent_id IS NOT NULL GROUP BY agent_id HAVING count(*) >= :t "
        "UNION ALL SELECT :shared, count(*) FROM memory_records WHERE shared AND status = 'active' "
        "HAVING count(*) >= :t "
        "UNION ALL (SELECT 'tag:' || t, count(*) FROM memory_records, unnest(tags) t "
        "WHERE status = 'active' AND t NOT LIKE 'agent:%' GROUP BY t HAVING count(*) >= :t "
        "AND count(*) <= :share * (SELECT count(*) FROM memory_records WHERE status = 'active') "
        "ORDER BY count(*) DESC, t LIMIT :tags)"),
        {"t": int(at_least), "shared": SHARED, "tags": int(tags), "share": TAG_MAX_SHARE})
    return {r.scope: int(r.n) for r in rows}


def recorded(conn: sa.Connection) -> dict[str, dict[str, Any]]:
    """The recorded indexes by scope, with whether Postgres holds a valid one of that name
    (a concurrent build that failed leaves an invalid index behind)."""
    rows = conn.execute(sa.text(
        "SELECT v.scope, v.index_name, v.created_at, coalesce(x.indisvalid, false) AS valid "
        "FROM memory_vector_indexes v LEFT JOIN pg_class c ON c.relname = v.index_name "
        "LEFT JOIN pg_index x ON x.indexrelid = c.oid"))
    return {r.scope: dict(r._mapping) for r in rows}


def record(conn: sa.Connection, scope: str) -> None:
    conn.execute(sa.text(
        "INSERT INTO memory_vector_indexes (scope, index_name) VALUES (:s, :n) "
        "ON CONFLICT (scope) DO UPDATE SET index_name = EXCLUDED.index_name, created_at = now()"),
        {"s": scope, "n": index_name(scope)})


def forget(conn: sa.Connection, scope: str) -> None:
    conn.execute(sa.text("DELETE FROM memory_vector_indexes WHERE scope = :s"), {"s": scope})


def drop_sql(scope: str, *, concurrently: bool) -> str:
    return f"DROP INDEX {'CONCURRENTLY ' if concurrently else ''}IF EXISTS {index_name(scope)}"


def drop_owner(conn: sa.Connection, scope: str) -> bool:
    """Drop a scope's index and its row in the caller's transaction (forgetting an agent: the
    index's predicate holds the agent's name). True when there was one."""
    had = conn.execute(sa.text("DELETE FROM memory_vector_indexes WHERE scope = :s RETURNING scope"),
                       {"s": scope}).first() is not None
    conn.exec_driver_sql(drop_sql(scope, concurrently=False))
    return had


def valid_scopes(conn: sa.Connection) -> frozenset[str]:
    """The scopes whose index is there and valid, which searches may walk at once."""
    return frozenset(conn.execute(sa.text(
        "SELECT v.scope FROM memory_vector_indexes v JOIN pg_class c ON c.relname = v.index_name "
        "JOIN pg_index x ON x.indexrelid = c.oid WHERE x.indisvalid")).scalars())


def large_scopes(conn: sa.Connection, at_least: int) -> frozenset[str]:
    """The agents (``agent:<id>``) and tags (``tag:<tag>``) that the planner's statistics
    (``pg_stats``, from the last ANALYZE) put on ``at_least`` memories or more.

    A search filtered to one of them that has no graph of its own skips the count of what
    the filter keeps (``ultron.db.search_arms._dense_arm``): that count reads up to
    ``ULTRON_SEARCH_EXACT_MAX`` memories only to learn the filter is larger, 2.7 ms of a 0.5%
    tag's search statement at 1M memories (EXPLAIN ANALYZE). Read from the statistics, not
    counted, so it costs one catalog query; an estimate is enough, since a filter named here
    wrongly is still searched correctly, through the store's graph or an exact scan, whichever
    the planner costs lower. Without statistics (a store never analysed) nothing is large."""
    rows = conn.execute(sa.text(
        "SELECT 'agent:' || v AS scope FROM pg_stats s JOIN pg_class c ON c.oid = 'memory_records'::regclass, "
        "unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS u(v, f) "
        "WHERE s.schemaname = current_schema() AND s.tablename = 'memory_records' AND s.attname = 'agent_id' "
        "AND v IS NOT NULL AND f * c.reltuples >= :n "
        "UNION ALL "
        "SELECT 'tag:' || v FROM pg_stats s JOIN pg_class c ON c.oid = 'memory_records'::regclass, "
        "unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS u(v, f) "
        "WHERE s.schemaname = current_schema() AND s.tablename = 'memory_records' AND s.attname = 'tags' "
        "AND v IS NOT NULL AND f * c.reltuples * (1 - s.null_frac) >= :n"), {"n": int(at_least)})
    return frozenset(rows.scalars())
