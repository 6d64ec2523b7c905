"""Both arms of a search and their join, in one statement run by the server.

The lexical arm (BM25F over the GIN index, statistics from migration 0006) and the dense
arm (the HNSW top ``k``) used to be five round trips on two connections: the query's
lexeme statistics, the lexical candidates on a second connection while the query was
embedded, the HNSW walk, then a join of both by id. The server spent about 6 ms of a 26 ms
search on them at 100k memories (a profile on ``benchmarks/search.py``'s store, MiniLM
query); the rest was round trips and SQLAlchemy. One statement returns the same candidates
with the same scores (``tests/storage/test_search_ranking.py``). Running the lexical part
on a second connection while the query is embedded was measured again with this
statement: on two cores it made the embedding ~4 ms slower (torch's two threads and the
backend share the cores) and the search no faster, so a search runs it all in one go.

How the lexical pool is chosen is MaxScore's rule: the query's lexemes are taken rarest
first while all their documents fit in the pool (the rarest always, its first ``pool``
documents when it alone overflows). A memory holding only words more common than those
(a low idf each) is rarely in the top ``k`` beside ones holding a rare query word, so it
is not scored; every query word still counts in the score of the memories that are.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa
from psycopg.rows import dict_row

from ultron.db.feedback import FEEDBACK_FACTOR_SQL
from ultron.db.memories import _filters
from ultron.db.vector_indexes import COPY_TYPE, partition_name

#: what ranking needs of a candidate (on a memory_records row aliased ``m``), read by the arms
#: themselves with the row they already hold; the full records of the ones returned are read
#: after ranking. Reading them by id again at the end of the statement cost 0.4 of its 4.1 ms
#: (80 index lookups) and planning a third scan of the table, whose every owner graph the
#: planner weighed (``ultron.db.vector_indexes``, before revision 0022): EXPLAIN ANALYZE at 100k memories.
#: (The feedback factor is computed at the end, on the candidates alone: computed here it
#: was numeric arithmetic on each of the up to ``exact_max`` memories a filter's exact scan
#: reads, 0.7 ms of a team's search at 100k memories.)
_RANKING_COLS = ("m.id, m.tier, m.last_hit_at, m.created_at, m.outcome_helped, m.outcome_unhelped, "
                 "m.helpful_count, m.unhelpful_count")
_DISTANCE = "embedding <=> CAST(:q AS vector)"
CANDIDATE_COLS = f"{_RANKING_COLS}, m.{_DISTANCE} AS dist"
#: the distance an owner's graph is walked by: its copies are in half precision
#: (``ultron.db.vector_indexes.COPY_TYPE``), so the walk only picks the nearest ``k``; their
#: distance is the one between the full vectors (``CANDIDATE_COLS``)
_COPY_DISTANCE = f"embedding <=> CAST(CAST(:q AS vector) AS {COPY_TYPE})"
#: Ties in distance or score are broken by id, compared byte by byte: under the database's
#: collation (libc's C.UTF-8 for the embedded server) sorting 200 ids took 2.2 ms against 1.0
#: at 1M memories, and the lexical pool of a common query ties often. For ids, which are
#: ASCII, the order is the same.
_ID_ORDER = 'id COLLATE "C"'
#: the same, from an arm's CTE
_CARRIED = ("id, tier, last_hit_at, created_at, outcome_helped, outcome_unhelped, helpful_count, unhelpful_count, "
            "dist")

# The query's lexemes (Postgres ``english``: stemmed, stop words dropped) held by at least one
# active memory, with their count in the query, their Okapi idf (the +1 inside the log, never
# negative), whether they seed the pool (``essential``) and the corpus's weighted mean length.
# Reads only the statistics rows the trigger of migration 0006 keeps: a few index lookups.
_TERMS = r"""
    corpus AS (
        SELECT coalesce(sum(docs), 0)::float8 AS docs,
               (:wa * coalesce(sum(len_a), 0) + :wb * coalesce(sum(len_b), 0)
                + :wc * coalesce(sum(len_c), 0))::float8 AS len
        FROM memory_corpus
    ),
    query_lexemes AS MATERIALIZED (
        SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1)::float8 AS qtf,
               coalesce((SELECT sum(l.df) FROM memory_lexemes l WHERE l.lexeme = u.lexeme), 0)::float8 AS df
        FROM unnest(to_tsvector('english', :text)) u
    ),
    ranked_lexemes AS (
        SELECT q.lexeme, q.qtf, q.df,
               ln(1 + (greatest(c.docs, q.df) - q.df + 0.5) / (q.df + 0.5)) AS idf,
               sum(q.df) OVER w AS covered, row_number() OVER w AS rarity,
               greatest(c.len / nullif(c.docs, 0), 1e-9) AS avgdl
        FROM query_lexemes q, corpus c WHERE q.df > 0
        WINDOW w AS (ORDER BY q.df, q.lexeme)
    ),
    terms AS MATERIALIZED (
        SELECT lexeme, qtf, df, idf, avgdl, (rarity = 1 OR covered <= :pool) AS essential FROM ranked_lexemes
    )"""

# The essential lexemes as one tsquery, each quoted as it is (already normalised, so no parser
# runs on it again; quotes and backslashes escaped as the tsquery input syntax wants). NULL,
# and so no lexical candidate, when no query word occurs in any memory.
_ESSENTIAL_TSQUERY = r"""(
    SELECT string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery
    FROM terms WHERE essential)"""

# A lexeme's weighted count in a document, by the tsvector weight of each position (A content,
# B resolution, C context): the BM25F field weights, applied to tf and to length alike.
_WEIGHTED_TF = ("(:wa * cardinality(array_positions(u.weights, 'A')) + :wb * cardinality(array_positions("
                "u.weights, 'B')) + :wc * cardinality(array_positions(u.weights, 'C')))")
_WEIGHTED_LEN = "(:wa * d.len_content + :wb * d.len_resolution + :wc * d.len_context)"
# A document's tsvector cut down to the query's lexemes before it is unnested: the vector
# minus (the vector minus the query's lexemes). Two passes in C, against one row (with two
# arrays) per lexeme of the document for a plain unnest then a filter: the pool's scoring
# took about half the time at 100k memories (EXPLAIN ANALYZE, 200 documents).
# (The subquery that unnests it ends in OFFSET 0: inlined, its weighted tf was computed
# three times a row, in the filter and in BM25's numerator and denominator: 3.1 against
# 2.2 ms for a pool of 148 documents at 100k memories, EXPLAIN ANALYZE.)
_QUERY_WORDS_OF_DOC = ("ts_delete(d.search_tsv, tsvector_to_array(ts_delete(d.search_tsv, "
                       "ARRAY(SELECT lexeme FROM terms))))")


def _walk(cond: str, graph: str | None, whole: bool) -> str:
    """The nearest ``k`` among the memories ``cond`` keeps, by walking a graph: the store's
    (``graph`` None), or an owner's, the partition of ``memory_owner_vectors`` named ``graph``
    (``ultron.db.vector_indexes``), whose memories are the scope's active ones. When the
    scope is the ``whole`` filter, the partition's nearest ``k`` are the answer and only they
    are joined to their rows; when ``cond`` keeps fewer (a tier or a tag on top of an agent),
    the walk goes on through the join (the iterative scan of ``Database.search_engine``)
    until ``k`` of them pass.

    The partition is named, not found through the partitioned table by its scope: there the
    planner also weighed the primary key's entries for the scope, sorted, against the graph."""
    if graph is None:
        return f"SELECT {CANDIDATE_COLS} FROM memory_records m WHERE {cond} ORDER BY dist LIMIT :k"
    if whole:
        return (f"SELECT {CANDIDATE_COLS} FROM (SELECT id FROM {graph} ORDER BY {_COPY_DISTANCE} LIMIT :k) v "
                f"JOIN memory_records m ON m.id = v.id WHERE {cond}")
    return (f"SELECT {CANDIDATE_COLS} FROM {graph} v JOIN memory_records m ON m.id = v.id WHERE {cond} "
            f"ORDER BY v.{_COPY_DISTANCE} LIMIT :k")


def _dense_arm(cond: str, *, exact: bool, name: str = "ann", param: str = "", graph: str | None = None,
               whole: bool = False) -> str:
    """The ``ann`` CTE (or ``name``): the top ``k`` by cosine distance among the memories
    ``cond`` keeps.

    Unfiltered, through the HNSW index. Filtered by tags or agent (``exact``), the filter may
    keep few memories: the graph walk then passes over all the others (the iterative scan
    goes on until k match, or gives up at ``hnsw.max_scan_tuples`` with fewer): 25 ms and
    recall 0.92 for one agent among 50 at 100k memories (``benchmarks/search.py``). So the
    statement first compares the query with the memories the filter keeps, through the
    filter's index, up to ``exact_max`` of them (``capped``): when there are fewer, that is
    the exact answer; when the cap is reached, a graph is walked instead (``_walk``): the
    filter's owner's own graph when it has one (``graph``, its partition's name),
    else the store's. Only one branch runs: the other's one-time filter is false. A filter
    that is a graph's ``whole`` scope, or known to keep more than the cap (``large`` of
    ``candidates``), goes straight to the walk (``exact`` false); with no graph of its own
    the planner then costs the store's graph against an exact scan of what the filter keeps.

    One pass, reading each kept memory once: counting them first and then comparing took
    two (``--crossover`` of ``benchmarks/filtered_search.py``). A comparison is cheap since
    the vectors are in the rows (revision 0018): see ``Settings.search_exact_max`` for
    what the cap is set from."""
    walk = _walk(cond, graph, whole)
    if not exact:
        return f"{name} AS MATERIALIZED ({walk})"
    capped = f"capped{param}"
    count = f"(SELECT count(*) FROM {capped})"
    # the cap's scan never takes the HNSW index: a LIMIT with no ORDER BY, which the index
    # cannot serve as cheaply as the filter's own index
    return f"""{capped} AS MATERIALIZED (SELECT {CANDIDATE_COLS} FROM memory_records m WHERE {cond} LIMIT :exact_max),
        {name} AS MATERIALIZED (
            (SELECT * FROM {capped} WHERE {count} < :exact_max ORDER BY dist LIMIT :k)
            UNION ALL
            (SELECT * FROM ({walk}) w WHERE {count} >= :exact_max)
        )"""


def _owners_dense_arm(cond: str, visible: Sequence[str], params: dict[str, Any], exact: bool,
                      uncounted: frozenset[str] = frozenset(), graphs: frozenset[str] = frozenset(),
                      whole: bool = False) -> str:
    """The ``ann`` CTE for what an agent-bound token sees (its agents' memories and the
    shared ones), as the union of one dense arm per owner: each agent's, then the shared
    memories', each through its own graph when it has one (``_dense_arm``). One condition
    ``shared OR agent_id = ANY(...)`` could use none of those graphs and walked the
    store's: 3.5x the unfiltered search for two agents of 50 (``benchmarks/filtered_search.py``).
    ``uncounted``: the owners searched without first counting what they keep; ``graphs``: the
    owners with a graph; ``whole``: ``cond`` keeps each owner's active memories, no fewer."""
    parts = []
    owners = [(f"agent:{agent}", f"{cond} AND agent_id = :owner{i}", f"ann{i}", str(i))
              for i, agent in enumerate(visible)] + [("shared", f"{cond} AND shared", "ann_shared", "_shared")]
    for i, agent in enumerate(visible):
        params[f"owner{i}"] = agent
    if whole and all(scope in graphs for scope, *_ in owners):
        # Every owner's graph holds exactly what the filter keeps of it: the nearest k of the
        # walks' union are the answer, and only they are joined to their rows. Joining each
        # walk's k took 120 primary-key lookups instead of 40 for a team of two.
        walks = " UNION ALL ".join(
            f"(SELECT id, {_COPY_DISTANCE} AS near FROM {partition_name(scope)} ORDER BY near LIMIT :k)"
            for scope, *_ in owners)
        return f"""ann AS MATERIALIZED (
            SELECT {CANDIDATE_COLS}
            FROM (SELECT DISTINCT ON (near, {_ID_ORDER}) * FROM ({walks}) u ORDER BY near, {_ID_ORDER} LIMIT :k) v
            JOIN memory_records m ON m.id = v.id WHERE {cond}
        )"""
    for scope, owner_cond, name, param in owners:
        graph = partition_name(scope) if scope in graphs else None
        parts.append(_dense_arm(owner_cond, exact=exact and scope not in uncounted, name=name, param=param,
                                graph=graph, whole=whole))
    # A shared memory of one of the agents is in two parts, the same row (and distance) both
    # times: once here, as the rows sorted by distance, then id, are told apart by both. A sort
    # by id alone compared every pair of ids under the database's collation (1 ms for 120
    # rows), and hashing whole rows (UNION) took 0.3 ms.
    union = " UNION ALL ".join([f"SELECT * FROM ann{i}" for i in range(len(visible))] + ["SELECT * FROM ann_shared"])
    return ",\n        ".join(parts) + f""",
        ann AS MATERIALIZED (
            SELECT DISTINCT ON (dist, {_ID_ORDER}) * FROM ({union}) u ORDER BY dist, {_ID_ORDER} LIMIT :k
        )"""


_POOL_COLS = f"{CANDIDATE_COLS}, m.search_tsv, m.len_content, m.len_resolution, m.len_context"


def _pool(cond: str) -> str:
    """The ``pool`` CTE: the first ``:pool`` memories the filter keeps that hold an essential
    query word. A filter by agent, by team or by tag finds them through the words indexed
    with their owner (revision 0020: GIN on agent and words, on tags and words, and on the
    shared memories' words), reading only that owner's matches. Before, the planner
    intersected the store's matches with the filter's own index, whose entries for a 5% tag
    or a team were most of a filtered search at 1M memories; the branch that checked a
    tag on each text match instead, to spare that, went with it."""
    return (f"pool AS MATERIALIZED (SELECT {_POOL_COLS} FROM memory_records m "
            f"WHERE {cond} AND search_tsv @@ {_ESSENTIAL_TSQUERY} LIMIT :pool)")


def use_ef_search(conn: sa.Connection, ef: int) -> None:
    """``hnsw.ef_search`` for this connection of ``Database.search_engine``, sent only when it
    differs from what the connection last had (a search's ``k`` rarely changes it)."""
    if conn.info.get("hnsw.ef_search") != int(ef):
        conn.exec_driver_sql(f"SET hnsw.ef_search = {int(ef)}")
        conn.info["hnsw.ef_search"] = int(ef)


def _lexical_params(plan: dict[str, Any]) -> dict[str, Any]:
    weights = plan["weights"]
    return {"pool": int(plan["pool"]), "k1": float(plan["k1"]), "b": float(plan["b"]),
            "wa": float(weights["A"]), "wb": float(weights["B"]), "wc": float(weights["C"])}


def query_terms(conn: sa.Connection, text: str, plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The lexical arm's view of a query, rarest first: lexeme, qtf, df, idf, essential, avgdl
    (what ``candidates`` scores with; for tests and for explaining a ranking)."""
    rows = conn.execute(sa.text(f"WITH {_TERMS} SELECT * FROM terms ORDER BY df, lexeme"),
                        {"text": text, **_lexical_params(plan)})
    return [dict(r._mapping) for r in rows]


def candidates(conn: sa.Connection, text: str, embedding: np.ndarray, *, k: int, plan: dict[str, Any],
               tier: str | None, tags: Sequence[str] | None, agent_id: str | None,
               visible: Sequence[str] | None = None, graphs: frozenset[str] = frozenset(),
               large: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Both arms and their join, one statement, on a connection of ``Database.search_engine``
    (the vector goes over as binary): one row per memory in either arm's top ``k``, with
    ``CANDIDATE_COLS``, ``similarity`` (cosine), ``feedback_factor``, ``bm25`` (0 outside the
    lexical top k), ``ann_rank`` and ``lex_rank`` (None outside that arm's top k).

    ``plan``: ``pool``, ``k1``, ``b``, ``weights`` (tsvector weight letter -> BM25F field
    weight), ``exact_max`` (``_dense_arm``) and ``ef_search``, from
    ``ultron.memory.ranking.arm_settings``. The HNSW walk runs with ``ef_search`` (at
    least ``k``; set here through ``use_ef_search``) and the iterative scan of
    ``Database.search_engine``; its rows are ranked by distance here, as a relaxed-order scan
    may return them slightly out of order. ``visible``: the agents of an agent-bound token
    (``ultron.access.visible_agents``); only theirs and shared memories are candidates.
    ``graphs``: the scopes with a vector graph of their own (``ultron.db.vector_indexes``):
    their dense arm walks it, without first counting what the filter keeps when the scope is
    the whole filter. A scope named here whose graph has since been dropped raises
    ``GraphGone`` (the caller reads the graphs again and searches once more). ``large``:
    the agents and tags known to keep more than ``exact_max`` memories
    (``ultron.db.vector_indexes.large_scopes``): without a graph, theirs skip the count too,
    and the planner chooses between an exact scan and the store's graph."""
    cond, params = _filters(tier, tags, agent_id, visible)
    exact = bool(tags or agent_id or visible is not None) and plan.get("exact_max", 0) > 0
    ef = max(int(plan["ef_search"]), k)
    # A filter with a graph of its own walks it at once, with no count of what it keeps first;
    # only when it is the whole filter: a tier or a tag on top may keep few of that graph's
    # memories, and then the count's exact comparison is what finds them.
    uncounted = graphs | large
    if visible is not None and agent_id is None:  # a graph per owner (the condition above stays for the pool)
        base, _ = _filters(tier, tags, None)
        whole = not (tier or tags)
        dense = _owners_dense_arm(base, visible, params, exact, uncounted if whole else frozenset(), graphs, whole)
        if whole and all(f"agent:{a}" in graphs for a in visible) and "shared" in graphs:
            # Every part walks a graph of its own, and the union takes the best k of k per
            # part: ef_search = k keeps recall@10 at 0.998+ and costs a third of the
            # store's ef (100) per part, 3 walks being the team search's extra cost
            # (benchmarks/filtered_search.py: 1.41x unfiltered with ef 100 at 100k).
            ef = k
    else:
        # the owner whose graph may serve: the agent, else the one tag
        scope = f"agent:{agent_id}" if agent_id else (f"tag:{tags[0]}" if tags and len(tags) == 1 else None)
        whole = scope is not None and not tier and not (agent_id and tags)
        graph = partition_name(scope) if scope in graphs else None
        dense = _dense_arm(cond, exact=exact and not (whole and scope in uncounted), graph=graph, whole=whole)
    use_ef_search(conn, ef)
    params.update(_lexical_params(plan), text=text, q=np.asarray(embedding, dtype=np.float32), k=k,
                  exact_max=int(plan.get("exact_max", 0)))
    sql = f"""
        WITH {_TERMS},
        {_pool(cond)},
        lex AS MATERIALIZED (
            SELECT d.id, sum(t.idf * t.qtf * x.tf * (:k1 + 1)
                             / (x.tf + :k1 * (1 - :b + :b * {_WEIGHTED_LEN} / t.avgdl))) AS bm25
            FROM pool d
            CROSS JOIN LATERAL (SELECT u.lexeme, {_WEIGHTED_TF}::float8 AS tf FROM unnest({_QUERY_WORDS_OF_DOC}) u
                                OFFSET 0) x
            JOIN terms t ON t.lexeme = x.lexeme
            WHERE x.tf > 0
            GROUP BY d.id
            ORDER BY bm25 DESC, d.{_ID_ORDER}
            LIMIT :k
        ),
        {dense},
        ranked_ann AS (SELECT id, row_number() OVER (ORDER BY dist, {_ID_ORDER}) AS ann_rank FROM ann),
        ranked_lex AS (SELECT id, bm25, row_number() OVER (ORDER BY bm25 DESC, {_ID_ORDER}) AS lex_rank FROM lex)
        SELECT m.id, m.tier, m.last_hit_at, m.created_at, m.outcome_helped, m.outcome_unhelped,
               1 - m.dist AS similarity, {FEEDBACK_FACTOR_SQL}::float8 AS feedback_factor,
               a.ann_rank, coalesce(l.bm25, 0)::float8 AS bm25, l.lex_rank
        FROM (SELECT {_CARRIED} FROM ann
              UNION ALL
              SELECT {_CARRIED} FROM pool p WHERE p.id IN (SELECT id FROM lex) AND p.id NOT IN (SELECT id FROM ann)) m
        LEFT JOIN ranked_ann a ON a.id = m.id
        LEFT JOIN ranked_lex l ON l.id = m.id
    """
    try:
        return _unprepared(conn, sql, params)
    except sa.exc.ProgrammingError as exc:
        if graphs and isinstance(exc.orig, psycopg.errors.UndefinedTable):
            raise GraphGone(str(exc.orig).splitlines()[0]) from exc
        raise


class GraphGone(LookupError):
    """A graph named in ``graphs`` was dropped since the caller learnt of it (the maintenance
    step dropped a shrunk owner's, or the owner was forgotten): read the graphs again."""


@functools.lru_cache(maxsize=1024)
def _pyformat(sql: str, dialect: sa.Dialect) -> str:
    """``sql`` as SQLAlchemy's ``text()`` compiles it for psycopg (``:name`` to ``%(name)s``,
    ``%`` doubled), once per statement shape: the text depends only on which filters are set."""
    return str(sa.text(sql).compile(dialect=dialect))


def _unprepared(conn: sa.Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The candidates statement, run by psycopg itself as an unnamed statement: planned with
    this search's values every time (its generic plan took 100 ms, not 5, at 100k memories),
    while the other statements of the search connections (the records read after ranking)
    are prepared and keep a generic plan (0.34 against 0.68 ms with a plan a time). Rows come
    as dicts from psycopg, not through SQLAlchemy's rows: 80 of them cost ~0.5 ms that way."""
    driver = conn.connection.driver_connection
    try:
        with driver.cursor(row_factory=dict_row) as cur:
            cur.execute(_pyformat(sql, conn.dialect), params, prepare=False)
            return cur.fetchall()
    except psycopg.Error as exc:  # as SQLAlchemy raises it: the doors map OperationalError to 503
        if driver.closed:
            conn.invalidate(exc)
        raise sa.exc.DBAPIError.instance(sql, params, exc, psycopg.Error, hide_parameters=True) from exc
