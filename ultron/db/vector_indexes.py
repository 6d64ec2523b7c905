"""SQL for the per-owner vector graphs: one HNSW graph for each agent with many memories,
one for the shared memories, and one for each of the commonest tags.

A search filtered to one agent walked the store's one HNSW graph and skipped every other
agent's memories on the way: 30 ms and recall 0.87 for one agent among 50 at 100k
memories, against 2.5 ms and 0.985 through a graph of that agent's memories alone
(``benchmarks/filtered_search.py``).

Where the graphs live (revision 0022). Each owner's vectors are copied into a partition of
``memory_owner_vectors`` (scope, id, embedding), LIST-partitioned by scope, and the HNSW
index is the partition's. From 0017 to 0021 they were partial indexes on ``memory_records``
(``WHERE agent_id = ...``). But the planner weighs every partial index of a table for every
statement that reads it: the 67 graphs of a 1M-memory store cost an unfiltered search 0.9 ms
(1.09x, the same build with the graphs hidden and shown), so only 16 tags could have one.
A partition the statement does not name is pruned before planning looks at it, so the
unfiltered search weighs no graph at all, and every tag that narrows a search can have one.
Partitioning ``memory_records`` itself by agent would have changed its keys (the primary
key and every foreign key to it would carry the agent), and could not serve tags.

A trigger on ``memory_records`` (``memory_owner_vectors_sync``, revision 0022) keeps the
partitions in line with the memories: a memory is in a scope's partition exactly when it is
active, has a vector, and is that agent's, shared, or carries that tag, and the scope is
recorded in ``memory_vector_indexes``. A scope is recorded in the same transaction as its
partition is attached, so the trigger never meets a scope with no partition.

Which owners get one is decided by ``ultron.memory.owner_indexes`` (the maintenance step);
``memory_vector_indexes`` records what exists, by scope: ``agent:<id>``, ``shared`` or
``tag:<tag>``, with the partition's table name.
"""

from __future__ import annotations

import hashlib
from typing import Any

import sqlalchemy as sa

#: the store's HNSW parameters (revision 0002), so an owner's graph finds what the whole one does
HNSW = "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
#: An owner's copy of a vector is in half precision (pgvector's ``halfvec``): it only picks
#: the walk's nearest ``k``, whose distances are then computed again from the memory's own
#: vector. Each memory's vector is copied into up to four graphs (its agent's, the shared
#: one, its tags'), and in full precision those copies took 11 GB beside the 8 GB memory
#: table at 1M memories: more than the shared buffers hold, so the graphs of agents and
#: tags pushed the store's graph out of them, and the unfiltered search ran 1.10x main's
#: among filtered ones against 0.93x alone (``benchmarks/filtered_search.py``).
COPY_TYPE = "halfvec(384)"
GRAPH_HNSW = "USING hnsw (embedding halfvec_cosine_ops) WITH (m = 16, ef_construction = 64)"
SHARED = "shared"
#: the partitioned table the graphs are partitions of (revision 0022)
TABLE = "memory_owner_vectors"


def agent_scope(agent_id: str) -> str:
    return f"agent:{agent_id}"


def tag_scope(tag: str) -> str:
    return f"tag:{tag}"


def _hashed(prefix: str, scope: str) -> str:
    """A name Postgres accepts whatever the agent id or tag holds (63 bytes at most)."""
    return prefix + hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def partition_name(scope: str) -> str:
    return _hashed("memory_vec_", scope)


def _literal(value: str) -> str:
    """A SQL string literal (DDL takes no parameters; standard_conforming_strings is on)."""
    if "\x00" in value:
        raise ValueError("an agent id with a NUL byte")
    return "'" + value.replace("'", "''") + "'"


def predicate(scope: str) -> str:
    """The memories a scope's graph holds: exactly what a search of that owner asks for (and
    what the trigger's ``memory_owner_scopes`` names, for a memory with a vector)."""
    if scope == SHARED:
        return "shared AND status = 'active'"
    if scope.startswith("tag:"):
        # written as the search writes it once its parameter is bound (CAST(:tags AS text[]))
        return f"tags @> CAST(ARRAY[{_literal(scope[len('tag:'):])}] AS text[]) AND status = 'active'"
    if not scope.startswith("agent:"):
        raise ValueError(f"unknown vector index scope {scope!r}")
    return f"agent_id = {_literal(scope[len('agent:'):])} AND status = 'active'"


def _copy_sql(scope: str) -> str:
    """Copy a scope's memories with a vector into its partition's table."""
    return (f"INSERT INTO {partition_name(scope)} (scope, id, embedding) SELECT {_literal(scope)}, id, "
            f"CAST(embedding AS {COPY_TYPE}) FROM memory_records WHERE {predicate(scope)} AND embedding IS NOT NULL")


def fill_sql(scope: str) -> list[str]:
    """A scope's partition, built apart from the table: its rows, then its graph. Run without
    a transaction (``build``), so searches and uploads go on meanwhile; a build that died
    leaves a table nobody reads, which the next one replaces."""
    name, lit = partition_name(scope), _literal(scope)
    return [f"DROP TABLE IF EXISTS {name}",
            f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS, CHECK (scope = {lit}), PRIMARY KEY (scope, id))",
            _copy_sql(scope),
            f"CREATE INDEX {name}_hnsw ON {name} {GRAPH_HNSW}",
            # without statistics the planner takes a fresh partition for a few rows, and sorts them
            f"ANALYZE {name}"]


def attach(conn: sa.Connection, scope: str) -> None:
    """Attach a filled partition and record its scope, in the caller's transaction.

    Writes to ``memory_records`` wait meanwhile (SHARE): the rows written since the fill are
    brought in (and the ones changed or gone taken out) while none can be, and from the commit
    on the trigger keeps the partition. Reads go on; the attach itself takes the partitioned
    table's SHARE UPDATE EXCLUSIVE lock only."""
    name, lit, pred = partition_name(scope), _literal(scope), predicate(scope)
    conn.exec_driver_sql("LOCK TABLE memory_records IN SHARE MODE")
    conn.exec_driver_sql(
        f"DELETE FROM {name} p WHERE NOT EXISTS (SELECT 1 FROM memory_records m WHERE m.id = p.id AND "
        f"{pred} AND CAST(m.embedding AS {COPY_TYPE}) = p.embedding)")
    conn.exec_driver_sql(f"{_copy_sql(scope)} ON CONFLICT (scope, id) DO NOTHING")
    # (the table's CHECK spares the attach a scan of its rows)
    conn.exec_driver_sql(f"ALTER TABLE {TABLE} ATTACH PARTITION {name} FOR VALUES IN ({lit})")
    record(conn, scope, name)


def build(engine: sa.Engine, scope: str) -> None:
    """A scope's graph, with searches and uploads going on meanwhile (the maintenance step)."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for sql in fill_sql(scope):
            conn.exec_driver_sql(sql)
    with engine.begin() as conn:
        attach(conn, scope)


def build_here(conn: sa.Connection, scope: str) -> None:
    """A scope's graph in the caller's transaction (a migration)."""
    for sql in fill_sql(scope):
        conn.exec_driver_sql(sql)
    attach(conn, scope)


def drop(conn: sa.Connection, scope: str) -> bool:
    """A scope's graph and its row gone, in the caller's transaction (forgetting an agent: its
    partition holds the agent's name). True when there was one. Dropping an attached partition
    waits for the searches reading the partitioned table, briefly."""
    had = conn.execute(sa.text("DELETE FROM memory_vector_indexes WHERE scope = :s RETURNING scope"),
                       {"s": scope}).first() is not None
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {partition_name(scope)}")
    return had


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
    """The recorded graphs by scope, with whether their table is there and attached (``valid``).
    Revision 0017's partial indexes were recorded here too, by index name: ``valid`` when
    Postgres holds a valid one (a concurrent build that failed left an invalid index)."""
    rows = conn.execute(sa.text(
        "SELECT v.scope, v.index_name, v.created_at, "
        "coalesce(x.indisvalid, EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid), false) AS valid "
        "FROM memory_vector_indexes v LEFT JOIN pg_class c ON c.relname = v.index_name "
        "AND c.relnamespace = current_schema()::regnamespace LEFT JOIN pg_index x ON x.indexrelid = c.oid"))
    return {r.scope: dict(r._mapping) for r in rows}


def record(conn: sa.Connection, scope: str, name: str | None = None) -> None:
    conn.execute(sa.text(
        "INSERT INTO memory_vector_indexes (scope, index_name) VALUES (:s, :n) "
        "ON CONFLICT (scope) DO UPDATE SET index_name = EXCLUDED.index_name, created_at = now()"),
        {"s": scope, "n": name or index_name(scope)})


def forget(conn: sa.Connection, scope: str) -> None:
    conn.execute(sa.text("DELETE FROM memory_vector_indexes WHERE scope = :s"), {"s": scope})


def valid_scopes(conn: sa.Connection) -> frozenset[str]:
    """The scopes whose graph searches may walk: recorded, and a partition of the table."""
    return frozenset(conn.execute(sa.text(
        "SELECT v.scope FROM memory_vector_indexes v JOIN pg_class c ON c.relname = v.index_name "
        "AND c.relnamespace = current_schema()::regnamespace "
        "JOIN pg_inherits i ON i.inhrelid = c.oid AND i.inhparent = CAST(:t AS regclass)"), {"t": TABLE}).scalars())


# Revision 0017's partial indexes on memory_records: built by its upgrade, and by 0022's
# downgrade, which goes back to them.

def index_name(scope: str) -> str:
    return _hashed("ix_memory_vec_", scope)


def create_sql(scope: str) -> str:
    return f"CREATE INDEX IF NOT EXISTS {index_name(scope)} ON memory_records {HNSW} WHERE {predicate(scope)}"


def drop_sql(scope: str) -> str:
    return f"DROP INDEX IF EXISTS {index_name(scope)}"


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
