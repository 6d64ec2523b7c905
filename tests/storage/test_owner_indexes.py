"""Per-owner vector graphs (revision 0017, partitions of their own since 0022): an agent with
many memories, and the shared memories, get an HNSW graph of their own; a search filtered to
them walks it; the migrations build them on a populated store and take them away again; the
maintenance step keeps them in line as agents grow and shrink, and the trigger as memories
come, change and go."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import sqlalchemy as sa

from tests.storage.test_llm_usage_storage import alembic, scratch_db  # noqa: F401 - the fixture
from ultron.db import vector_indexes as vi
from ultron.db.memories import vec

DIM = 384


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def fill(engine: sa.Engine, owners: dict[tuple[str | None, bool], int], seed: int = 0) -> None:
    """``owners``: (agent, shared) -> how many memories."""
    rng = np.random.default_rng(seed)
    with engine.begin() as conn:
        for (agent, shared), n in owners.items():
            for v in unit(rng, n):
                conn.execute(sa.text(
                    "INSERT INTO memory_records (id, memory_type, content, agent_id, shared, embedding) "
                    "VALUES (:id, 'error', :c, :a, :s, CAST(:e AS vector))"),
                    {"id": str(uuid.uuid4()), "c": f"memory of {agent}", "a": agent, "s": shared, "e": vec(v)})


def relabel(engine: sa.Engine, texts: list[str], tagged_every: int) -> None:
    """Each memory (in id order, numbered from 1) gets one of ``texts`` and a case number; every
    ``tagged_every``-th is tagged ``pandas``, the others ``other`` and one of nine ``more-N``."""
    with engine.begin() as conn:
        conn.execute(sa.text(
            "UPDATE memory_records m SET content = (CAST(:texts AS text[]))"
            "[1 + n.i % cardinality(CAST(:texts AS text[]))] || ' case ' || n.i, "
            "tags = CASE WHEN n.i % :every = 0 THEN ARRAY['pandas'] ELSE ARRAY['other', 'more-' || n.i % 9] END "
            "FROM (SELECT id, row_number() OVER (ORDER BY id) AS i FROM memory_records) n WHERE n.id = m.id"),
            {"texts": texts, "every": tagged_every})


def arms_of(got: list[dict]) -> tuple[dict, list]:
    """A search's candidates as its two arms: lexical (id -> (bm25, rank)), dense (ids by rank)."""
    lexical = {c["id"]: (round(c["bm25"], 9), c["lex_rank"]) for c in got if c["lex_rank"]}
    return lexical, [c["id"] for c in sorted(got, key=lambda c: c["ann_rank"] or 99) if c["ann_rank"]]


def index_names(engine: sa.Engine) -> set[str]:
    """Revision 0017's partial indexes on the memories."""
    with engine.connect() as conn:
        return set(conn.execute(sa.text(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_records' AND indexname LIKE 'ix_memory_vec_%'"
        )).scalars())


def graph_tables(engine: sa.Engine) -> set[str]:
    """The partitions of ``memory_owner_vectors`` (revision 0022), each with its HNSW index."""
    with engine.connect() as conn:
        if conn.execute(sa.text("SELECT to_regclass('memory_owner_vectors')")).scalar() is None:
            return set()
        return set(conn.execute(sa.text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_indexes x ON x.tablename = c.relname AND x.indexdef LIKE '%hnsw%' "
            "WHERE i.inhparent = 'memory_owner_vectors'::regclass")).scalars())


def in_graph(engine: sa.Engine, scope: str) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.text("SELECT id FROM memory_owner_vectors WHERE scope = :s"), {"s": scope}).scalars())


def active_ids(engine: sa.Engine, where: str) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.text(f"SELECT id FROM memory_records WHERE status = 'active' AND {where}")).scalars())


def walk_plan(engine: sa.Engine, scope: str) -> str:
    """How a graph walk reads (a few dozen memories are sorted whole unless told otherwise)."""
    with engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        return "\n".join(conn.execute(sa.text(
            f"EXPLAIN SELECT id FROM {vi.partition_name(scope)} "
            "ORDER BY embedding <=> CAST(CAST(:q AS vector) AS halfvec(384)) LIMIT 10"),
            {"q": vec(np.ones(DIM) / DIM ** 0.5)}).scalars())


def test_the_migrations_build_the_owner_graphs_on_a_populated_store_and_take_them_back(scratch_db, monkeypatch):
    monkeypatch.setenv("ULTRON_OWNER_INDEX_MIN", "30")
    assert alembic(scratch_db, "upgrade", "0016") == "0016"
    fill(scratch_db, {("big-agent", False): 40, ("small-agent", False): 5, (None, False): 40, ("big-agent", True): 35})
    assert alembic(scratch_db, "upgrade", "0017") == "0017"
    assert index_names(scratch_db) == {vi.index_name("agent:big-agent"), vi.index_name(vi.SHARED)}
    with scratch_db.connect() as conn:
        assert set(vi.recorded(conn)) == {"agent:big-agent", vi.SHARED}
        plan = "\n".join(conn.execute(sa.text(
            "EXPLAIN SELECT id FROM memory_records WHERE status = 'active' AND agent_id = 'big-agent' "
            "ORDER BY embedding <=> CAST(:q AS vector) LIMIT 10"),
            {"q": vec(np.ones(DIM) / DIM ** 0.5)}).scalars())
    assert vi.index_name("agent:big-agent") in plan, plan
    # 0022: the graphs leave the memories' table for partitions of their own, with the same memories
    assert alembic(scratch_db, "upgrade", "0022") == "0022"
    assert index_names(scratch_db) == set()
    assert graph_tables(scratch_db) == {vi.partition_name("agent:big-agent"), vi.partition_name(vi.SHARED)}
    assert in_graph(scratch_db, "agent:big-agent") == active_ids(scratch_db, "agent_id = 'big-agent'")
    assert len(in_graph(scratch_db, vi.SHARED)) == 35
    assert vi.partition_name("agent:big-agent") + "_hnsw" in walk_plan(scratch_db, "agent:big-agent")
    with scratch_db.connect() as conn:
        assert set(vi.valid_scopes(conn)) == {"agent:big-agent", vi.SHARED}
        assert all(info["valid"] for info in vi.recorded(conn).values())
    # and back: the partial indexes again, for the same scopes, and no memory lost
    assert alembic(scratch_db, "downgrade", "0021") == "0021"
    assert index_names(scratch_db) == {vi.index_name("agent:big-agent"), vi.index_name(vi.SHARED)}
    assert graph_tables(scratch_db) == set()
    with scratch_db.connect() as conn:
        assert set(vi.recorded(conn)) == {"agent:big-agent", vi.SHARED}
        assert all(info["valid"] for info in vi.recorded(conn).values())
        assert conn.execute(sa.text("SELECT to_regclass('memory_owner_vectors')")).scalar() is None
    fill(scratch_db, {("big-agent", False): 1})  # no trigger left behind to fail a write
    assert alembic(scratch_db, "downgrade", "0016") == "0016"
    assert index_names(scratch_db) == set()
    with scratch_db.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM memory_records")).scalar_one() == 121


def test_the_trigger_keeps_each_graph_to_its_owners_active_memories(client):
    """Whatever happens to a memory (a new one, archived, retagged, re-embedded, shared,
    deleted, the table truncated), each graph holds exactly its scope's active memories,
    with their current vectors."""
    from ultron.memory.owner_indexes import refresh_owner_indexes

    settings = client.settings.__class__.from_env(home=client.settings.home, owner_index_min=10, tag_indexes=4)
    engine = client.db.engine
    fill(engine, {("keeper", False): 20, ("other", False): 20, ("other", True): 12}, seed=3)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET tags = ARRAY['pandas'] WHERE id IN "
                             "(SELECT id FROM memory_records ORDER BY id LIMIT 10)"))
    assert set(refresh_owner_indexes(client.db, settings)["created"]) == {"agent:keeper", "agent:other", "shared",
                                                                          "tag:pandas"}
    wheres = {"agent:keeper": "agent_id = 'keeper'", "agent:other": "agent_id = 'other'", "shared": "shared",
              "tag:pandas": "tags @> ARRAY['pandas']"}

    def in_line() -> None:
        for scope, where in wheres.items():
            assert in_graph(engine, scope) == active_ids(engine, where), scope
        with engine.connect() as conn:  # each vector is the memory's own
            assert not conn.execute(sa.text(
                "SELECT count(*) FROM memory_owner_vectors v JOIN memory_records m USING (id) "
                "WHERE v.embedding <> CAST(m.embedding AS halfvec(384))")).scalar_one()

    in_line()
    fill(engine, {("keeper", False): 3, ("keeper", True): 2}, seed=4)
    in_line()
    with engine.begin() as conn:
        first = conn.execute(sa.text("SELECT id FROM memory_records WHERE agent_id = 'keeper' ORDER BY id")).scalars().all()
        conn.execute(sa.text("UPDATE memory_records SET status = 'archived' WHERE id = :i"), {"i": first[0]})
        conn.execute(sa.text("UPDATE memory_records SET tags = ARRAY['pandas', 'pandas'] WHERE id = :i"), {"i": first[1]})
        conn.execute(sa.text("UPDATE memory_records SET tags = '{}' WHERE id IN "
                             "(SELECT id FROM memory_records WHERE tags @> ARRAY['pandas'] AND id <> :i LIMIT 2)"),
                     {"i": first[1]})
        conn.execute(sa.text("UPDATE memory_records SET embedding = CAST(:e AS vector) WHERE id = :i"),
                     {"i": first[2], "e": vec(unit(np.random.default_rng(1), 1)[0])})
        conn.execute(sa.text("UPDATE memory_records SET shared = true, agent_id = 'other' WHERE id = :i"),
                     {"i": first[3]})
        conn.execute(sa.text("DELETE FROM memory_records WHERE id = :i"), {"i": first[4]})
        conn.execute(sa.text("UPDATE memory_records SET hit_count = hit_count + 1"))
    in_line()
    with engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE memory_records CASCADE"))
    in_line()
    assert not in_graph(engine, "agent:keeper")
    fill(engine, {("keeper", False): 2}, seed=3)  # the graphs go on after a truncate
    in_line()


def test_an_agent_id_with_quotes_gets_a_safe_index():
    assert vi.predicate("agent:o'brien; DROP TABLE x") == "agent_id = 'o''brien; DROP TABLE x' AND status = 'active'"
    assert vi.predicate("tag:it's") == "tags @> CAST(ARRAY['it''s'] AS text[]) AND status = 'active'"
    assert len(vi.index_name("agent:" + "a" * 200)) <= 63
    with pytest.raises(ValueError):
        vi.predicate("team:x")


def test_maintenance_builds_graphs_as_agents_grow_and_drops_them_as_they_shrink(client):
    from ultron.memory.owner_indexes import refresh_owner_indexes

    settings = client.settings.__class__.from_env(home=client.settings.home, owner_index_min=20)
    fill(client.db.engine, {("grower", False): 25, ("tiny", False): 3})
    first = refresh_owner_indexes(client.db, settings)
    assert first["created"] == ["agent:grower"] and graph_tables(client.db.engine) == {vi.partition_name("agent:grower")}
    assert in_graph(client.db.engine, "agent:grower") == active_ids(client.db.engine, "agent_id = 'grower'")
    assert refresh_owner_indexes(client.db, settings) == {"created": [], "dropped": [], "kept": ["agent:grower"]}
    # a build that died half way (its table filled, never attached) is replaced by the next run
    with client.db.engine.begin() as conn:
        vi.drop(conn, "agent:grower")
        for sql in vi.fill_sql("agent:grower")[:3]:  # rows, no graph
            conn.exec_driver_sql(sql)
        conn.execute(sa.text(f"DELETE FROM {vi.partition_name('agent:grower')} WHERE id IN "
                             f"(SELECT id FROM {vi.partition_name('agent:grower')} LIMIT 5)"))
    assert graph_tables(client.db.engine) == set()
    assert refresh_owner_indexes(client.db, settings)["created"] == ["agent:grower"]
    assert in_graph(client.db.engine, "agent:grower") == active_ids(client.db.engine, "agent_id = 'grower'")
    with client.db.engine.begin() as conn:  # the agent shrinks below half the threshold
        conn.execute(sa.text("UPDATE memory_records SET status = 'archived' WHERE agent_id = 'grower' AND id IN "
                             "(SELECT id FROM memory_records WHERE agent_id = 'grower' LIMIT 20)"))
    assert refresh_owner_indexes(client.db, settings)["dropped"] == ["agent:grower"]
    assert graph_tables(client.db.engine) == set()


def test_memories_written_while_a_graph_is_built_are_in_it(client):
    """The build reads the memories without stopping uploads; what was written, changed or
    archived between its fill and its attach is brought in line at the attach."""
    engine = client.db.engine
    fill(engine, {("busy", False): 30}, seed=11)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for sql in vi.fill_sql("agent:busy"):
            conn.exec_driver_sql(sql)
    fill(engine, {("busy", False): 4}, seed=12)  # written after the fill
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET status = 'archived' WHERE id IN "
                             "(SELECT id FROM memory_records WHERE agent_id = 'busy' ORDER BY id LIMIT 2)"))
        conn.execute(sa.text("UPDATE memory_records SET embedding = CAST(:e AS vector) WHERE id = "
                             "(SELECT id FROM memory_records WHERE agent_id = 'busy' AND status = 'active' "
                             "ORDER BY id LIMIT 1)"), {"e": vec(unit(np.random.default_rng(2), 1)[0])})
    with engine.begin() as conn:
        vi.attach(conn, "agent:busy")
    assert in_graph(engine, "agent:busy") == active_ids(engine, "agent_id = 'busy'")
    with engine.connect() as conn:
        assert not conn.execute(sa.text(
            "SELECT count(*) FROM memory_owner_vectors v JOIN memory_records m USING (id) "
            "WHERE v.embedding <> CAST(m.embedding AS halfvec(384))")).scalar_one()


def test_a_team_search_finds_the_nearest_of_its_agents_and_the_shared_ones(client):
    """The dense arm of an agent-bound search is one arm per owner: it returns the exact
    nearest memories among the token's agents' and the shared ones, never another's."""
    from ultron import access
    from ultron.db import search_arms
    from ultron.memory.ranking import arm_settings

    rng = np.random.default_rng(5)
    owners = {("team-a", False): 30, ("team-b", False): 30, ("outsider", False): 30, ("outsider", True): 10,
              (None, False): 10, ("team-a", True): 8}  # the last in two of the token's parts
    fill(client.db.engine, owners, seed=5)
    q = unit(rng, 1)[0]
    with client.db.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT id, agent_id, shared, 1 - (embedding <=> CAST(:q AS vector)) AS sim FROM memory_records "
            "WHERE status = 'active'"), {"q": vec(q)}).all()
    allowed = [r for r in rows if r.shared or r.agent_id in ("team-a", "team-b")]
    truth = [r.id for r in sorted(allowed, key=lambda r: -r.sim)[:10]]
    plan = arm_settings(client.settings)
    refresh = __import__("ultron.memory.owner_indexes", fromlist=["x"]).refresh_owner_indexes
    refresh(client.db, client.settings.__class__.from_env(home=client.settings.home, owner_index_min=25))
    with client.db.engine.connect() as conn:
        graphs = vi.valid_scopes(conn)
    assert {"agent:team-a", "agent:team-b", "agent:outsider"} <= graphs
    # the graph walks, the exact comparisons, and each owner's own graph walked at once
    for exact_max, known in ((0, frozenset()), (1000, frozenset()), (1000, graphs)):
        with client.db.search_engine.connect() as conn:
            got = search_arms.candidates(conn, "memory", q, k=10, plan={**plan, "exact_max": exact_max}, tier=None,
                                         tags=None, agent_id=None, visible=("team-a", "team-b"), graphs=known)
        ids = {r.id: r for r in rows}
        dense = [c["id"] for c in sorted(got, key=lambda c: c["ann_rank"] or 99) if c["ann_rank"]]
        assert all(ids[i].shared or ids[i].agent_id in ("team-a", "team-b") for i in [c["id"] for c in got])
        assert len(got) == len({c["id"] for c in got}) and len(dense) == len(set(dense))  # each memory once
        assert len(set(dense[:10]) & set(truth)) >= 9, exact_max
    assert access.visible_agents() is None


def test_forgetting_an_agent_takes_its_graph_and_its_name_with_it(client):
    from ultron.memory.owner_indexes import refresh_owner_indexes

    settings = client.settings.__class__.from_env(home=client.settings.home, owner_index_min=10)
    fill(client.db.engine, {("leaving-agent", False): 12})
    assert refresh_owner_indexes(client.db, settings)["created"] == ["agent:leaving-agent"]
    client.forget(agent_id="leaving-agent")
    assert graph_tables(client.db.engine) == set()
    with client.db.engine.connect() as conn:
        assert vi.recorded(conn) == {}
        assert conn.execute(sa.text("SELECT to_regclass(:n)"), {"n": vi.partition_name("agent:leaving-agent")}).scalar() is None
        assert not conn.execute(sa.text("SELECT count(*) FROM memory_owner_vectors")).scalar_one()
        assert not conn.execute(sa.text("SELECT count(*) FROM pg_class WHERE pg_get_expr(relpartbound, oid) "
                                        "LIKE '%leaving-agent%'")).scalar_one()


def test_only_tags_that_narrow_the_search_get_a_graph(client):
    """A tag on most memories (``trajectory``) or naming an agent gets no index; a tag on a
    fifth or less of them does."""
    settings = client.settings.__class__.from_env(home=client.settings.home, owner_index_min=10, tag_indexes=8)
    fill(client.db.engine, {("tagger", False): 100})
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET tags = ARRAY['trajectory', 'agent:tagger']"))
        conn.execute(sa.text("UPDATE memory_records SET tags = tags || ARRAY['pandas'] WHERE id IN "
                             "(SELECT id FROM memory_records ORDER BY id LIMIT 15)"))
        counts = vi.owner_counts(conn, 10, settings.tag_indexes)
    assert set(counts) == {"agent:tagger", "tag:pandas"}, counts


def test_a_tag_with_a_graph_of_its_own_finds_what_the_plain_filter_finds(client):
    """A search by a tag with its own graph: the lexical candidates, their scores, and the
    dense arm's nearest are those of the plain filter, and all carry the tag."""
    from ultron.db import search_arms
    from ultron.memory.owner_indexes import refresh_owner_indexes
    from ultron.memory.ranking import arm_settings

    fill(client.db.engine, {("tagger", False): 120}, seed=7)
    relabel(client.db.engine, ["kafka consumer lag grows", "redis timeout on connect", "docker disk is full",
                               "nginx answers bad gateway"], 6)
    with client.db.engine.connect() as conn:
        tagged = set(conn.execute(sa.text("SELECT id FROM memory_records WHERE tags @> ARRAY['pandas']")).scalars())
    assert len(tagged) == 20
    settings = client.settings.__class__.from_env(home=client.settings.home, owner_index_min=10, tag_indexes=1)
    report = refresh_owner_indexes(client.db, settings)
    with client.db.engine.connect() as conn:
        graphs = vi.valid_scopes(conn)
    assert "tag:pandas" in graphs, report
    q = unit(np.random.default_rng(8), 1)[0]
    plan = arm_settings(client.settings)

    def run(known: frozenset[str]) -> tuple[dict, list]:
        with client.db.search_engine.connect() as conn:
            got = search_arms.candidates(conn, "kafka consumer lag", q, k=10, plan=plan, tier=None, tags=["pandas"],
                                         agent_id=None, graphs=known)
        assert {c["id"] for c in got} <= tagged
        return arms_of(got)

    plain_lexical, plain_dense = run(frozenset())
    assert plain_lexical  # the tagged kafka memories
    lexical, dense = run(graphs)
    assert lexical == plain_lexical
    assert len(set(dense[:5]) & set(plain_dense[:5])) >= 4


def test_filters_the_statistics_call_large_skip_the_count_and_find_the_same(client, monkeypatch):
    """An agent or a tag ANALYZE puts well over the exact-scan cap is searched without first
    counting what it keeps, and the search finds what the counted one finds; a small tag is
    not named large."""
    from ultron.db import search_arms
    from ultron.memory.ranking import arm_settings

    fill(client.db.engine, {("many", False): 120}, seed=9)
    relabel(client.db.engine, ["kafka consumer lag grows", "redis timeout on connect", "docker disk is full"], 4)
    with client.db.engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE memory_records")
        large = vi.large_scopes(conn, 20)
    assert {"agent:many", "tag:pandas", "tag:other"} <= large and "tag:more-1" not in large, large
    plan = {**arm_settings(client.settings), "exact_max": 10}
    q = unit(np.random.default_rng(10), 1)[0]
    statements: list[str] = []
    unprepared = search_arms._unprepared
    monkeypatch.setattr(search_arms, "_unprepared", lambda conn, sql, params: (statements.append(sql),
                                                                                unprepared(conn, sql, params))[1])

    def run(filters: dict, known: frozenset[str]) -> tuple[dict, list]:
        with client.db.search_engine.connect() as conn:
            got = search_arms.candidates(conn, "kafka consumer lag", q, k=10, plan=plan, tier=None,
                                         tags=filters.get("tags"), agent_id=filters.get("agent_id"), large=known)
        return arms_of(got)

    for filters in ({"tags": ["pandas"]}, {"agent_id": "many"}):
        counted = run(filters, frozenset())
        assert "capped" in statements[-1]
        assert run(filters, large) == counted, filters
        assert "capped" not in statements[-1]


def test_a_tier_on_top_of_an_agent_with_a_graph_walks_that_graph_until_enough_pass(client):
    """An agent with a graph, searched in one tier that keeps more memories than the exact
    cap: the walk of the agent's graph goes on past the other tiers' memories, and finds the
    nearest of that tier, as an exact comparison does."""
    from ultron.db import search_arms
    from ultron.memory.owner_indexes import refresh_owner_indexes
    from ultron.memory.ranking import arm_settings

    fill(client.db.engine, {("tiered", False): 90, ("else", False): 40}, seed=13)
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET tier = CASE WHEN random() < 0.4 THEN 'HOT' ELSE 'COLD' END"))
        hot = {r.id: r.e for r in conn.execute(sa.text(
            "SELECT id, embedding::text AS e FROM memory_records WHERE agent_id = 'tiered' AND tier = 'HOT'"))}
    settings = client.settings.__class__.from_env(home=client.settings.home, owner_index_min=50)
    assert refresh_owner_indexes(client.db, settings)["created"] == ["agent:tiered"]
    q = unit(np.random.default_rng(14), 1)[0]
    truth = sorted(hot, key=lambda i: -float(np.dot(np.array(eval(hot[i]), dtype=np.float32), q)))[:10]
    plan = {**arm_settings(client.settings), "exact_max": 5}  # the cap is reached: the walk runs
    for graphs in (frozenset(), frozenset({"agent:tiered"})):
        with client.db.search_engine.connect() as conn:
            got = search_arms.candidates(conn, "memory", q, k=10, plan=plan, tier="hot", tags=None,
                                         agent_id="tiered", graphs=graphs)
        _, dense = arms_of(got)
        assert {c["id"] for c in got} <= set(hot)
        assert len(set(dense) & set(truth)) >= 9, graphs


def test_a_search_still_finds_after_the_graph_it_knew_of_is_dropped(client):
    """A process learns of the graphs every few seconds; one dropped meanwhile (an agent
    forgotten or shrunk) makes its next search read them again, not fail."""
    from ultron.memory.owner_indexes import refresh_owner_indexes

    fill(client.db.engine, {("fleeting", False): 30}, seed=15)
    relabel(client.db.engine, ["kafka consumer lag grows", "redis timeout on connect"], 1000)
    settings = client.settings.__class__.from_env(home=client.settings.home, owner_index_min=20)
    assert refresh_owner_indexes(client.db, settings)["created"] == ["agent:fleeting"]
    before = client.memory.search_memories("kafka consumer lag", agent_id="fleeting", count_hits=False)
    assert before and "agent:fleeting" in client.memory._graphs(None)  # cached: no connection needed
    with client.db.engine.begin() as conn:
        vi.drop(conn, "agent:fleeting")
    after = client.memory.search_memories("kafka consumer lag", agent_id="fleeting", count_hits=False)
    assert [r.record.id for r in after] == [r.record.id for r in before]
    assert "agent:fleeting" not in client.memory._graphs(None)


def test_a_search_walks_its_owners_graphs_rather_than_sorting_their_memories(client, monkeypatch):
    """On the search connections an owner's partition is read through its graph, even when
    the planner would cost reading and sorting its few thousand memories lower (slower:
    ``ultron.db.database``'s search session); for one agent, for a team, and for a tag."""
    from ultron.db import search_arms
    from ultron.memory.owner_indexes import refresh_owner_indexes
    from ultron.memory.ranking import arm_settings

    fill(client.db.engine, {("walker", False): 60, ("mate", False): 60, ("walker", True): 40}, seed=17)
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET tags = ARRAY['pandas'] WHERE id IN "
                             "(SELECT id FROM memory_records ORDER BY id LIMIT 30)"))
    settings = client.settings.__class__.from_env(home=client.settings.home, owner_index_min=30, tag_indexes=2)
    refresh_owner_indexes(client.db, settings)
    with client.db.engine.connect() as conn:
        graphs = vi.valid_scopes(conn)
    assert {"agent:walker", "agent:mate", "shared", "tag:pandas"} <= graphs
    plans: list[str] = []

    def explain(conn, sql, params):
        with conn.connection.driver_connection.cursor() as cur:
            cur.execute("EXPLAIN " + search_arms._pyformat(sql, conn.dialect), params, prepare=False)
            plans.append("\n".join(r[0] for r in cur.fetchall()))
        return []

    monkeypatch.setattr(search_arms, "_unprepared", explain)
    q = unit(np.random.default_rng(18), 1)[0]
    for filters, scopes in (({"agent_id": "walker"}, ["agent:walker"]), ({"tags": ["pandas"]}, ["tag:pandas"]),
                            ({"visible": ("walker", "mate")}, ["agent:walker", "agent:mate", "shared"])):
        with client.db.search_engine.connect() as conn:
            search_arms.candidates(conn, "memory", q, k=10, plan=arm_settings(client.settings), tier=None,
                                   tags=filters.get("tags"), agent_id=filters.get("agent_id"),
                                   visible=filters.get("visible"), graphs=graphs)
        for scope in scopes:
            assert f"Index Scan using {vi.partition_name(scope)}_hnsw" in plans[-1], (scope, plans[-1])
