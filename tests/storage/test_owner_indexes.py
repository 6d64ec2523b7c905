"""Per-owner vector indexes (revision 0017): an agent with many memories, and the shared
memories, get an HNSW graph of their own; a search filtered to them walks it; the migration
builds them on a populated store and takes them away again; the maintenance step keeps them
in line as agents grow and shrink."""

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
    with engine.connect() as conn:
        return set(conn.execute(sa.text(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_records' AND indexname LIKE 'ix_memory_vec_%'"
        )).scalars())


def test_the_migration_builds_the_owner_indexes_on_a_populated_store_and_drops_them(scratch_db, monkeypatch):
    monkeypatch.setenv("ULTRON_OWNER_INDEX_MIN", "30")
    assert alembic(scratch_db, "upgrade", "0016") == "0016"
    fill(scratch_db, {("big-agent", False): 40, ("small-agent", False): 5, (None, False): 40, ("big-agent", True): 35})
    assert alembic(scratch_db, "upgrade", "0017") == "0017"
    assert index_names(scratch_db) == {vi.index_name("agent:big-agent"), vi.index_name(vi.SHARED)}
    with scratch_db.connect() as conn:
        assert set(vi.recorded(conn)) == {"agent:big-agent", vi.SHARED}
        plan = "\n".join(conn.execute(sa.text(
            "EXPLAIN SELECT id FROM memory_records WHERE status = 'active' AND agent_id = 'big-agent' "
            "ORDER BY embedding <=> CAST(:q AS vector) LIMIT 10"), {"q": vec(np.ones(DIM) / DIM ** 0.5)}).scalars())
    assert vi.index_name("agent:big-agent") in plan, plan
    assert alembic(scratch_db, "downgrade", "0016") == "0016"
    assert index_names(scratch_db) == set()
    with scratch_db.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM memory_records")).scalar_one() == 120


def test_an_agent_id_with_quotes_gets_a_safe_index():
    assert vi.predicate("agent:o'brien; DROP TABLE x") == "agent_id = 'o''brien; DROP TABLE x' AND status = 'active'"
    assert vi.predicate("tag:it's") == "tags @> CAST(ARRAY['it''s'] AS text[]) AND status = 'active'"
    assert len(vi.index_name("agent:" + "a" * 200)) <= 63
    with pytest.raises(ValueError):
        vi.predicate("team:x")


def test_maintenance_builds_indexes_as_agents_grow_and_drops_them_as_they_shrink(client, monkeypatch):
    from ultron.memory.owner_indexes import refresh_owner_indexes

    settings = client.settings.__class__.from_env(home=client.settings.home, owner_index_min=20)
    fill(client.db.engine, {("grower", False): 25, ("tiny", False): 3})
    first = refresh_owner_indexes(client.db, settings)
    assert first["created"] == ["agent:grower"] and vi.index_name("agent:grower") in index_names(client.db.engine)
    assert refresh_owner_indexes(client.db, settings) == {"created": [], "dropped": [], "kept": ["agent:grower"]}
    # a build that died half way leaves an invalid index: it is dropped and built again
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE pg_index SET indisvalid = false WHERE indexrelid = CAST(:n AS regclass)"),
                     {"n": vi.index_name("agent:grower")})
    again = refresh_owner_indexes(client.db, settings)
    assert again["created"] == ["agent:grower"]
    with client.db.engine.begin() as conn:  # the agent shrinks below half the threshold
        conn.execute(sa.text("UPDATE memory_records SET status = 'archived' WHERE agent_id = 'grower' AND id IN "
                             "(SELECT id FROM memory_records WHERE agent_id = 'grower' LIMIT 20)"))
    assert refresh_owner_indexes(client.db, settings)["dropped"] == ["agent:grower"]
    assert vi.index_name("agent:grower") not in index_names(client.db.engine)


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


def test_forgetting_an_agent_takes_its_index_and_its_name_with_it(client):
    from ultron.memory.owner_indexes import refresh_owner_indexes

    settings = client.settings.__class__.from_env(home=client.settings.home, owner_index_min=10)
    fill(client.db.engine, {("leaving-agent", False): 12})
    assert refresh_owner_indexes(client.db, settings)["created"] == ["agent:leaving-agent"]
    client.forget(agent_id="leaving-agent")
    assert vi.index_name("agent:leaving-agent") not in index_names(client.db.engine)
    with client.db.engine.connect() as conn:
        assert vi.recorded(conn) == {}
        assert not conn.execute(sa.text("SELECT count(*) FROM pg_index WHERE pg_get_expr(indpred, indrelid) "
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
