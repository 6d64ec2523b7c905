"""A memory's words for the lexical arm: kept in its row beside its vector (revision 0019),
and indexed with their owner (revision 0020) so that a search filtered to an agent, a team
or a tag reads only that owner's matches. Both migrations on a populated store, and back."""

from __future__ import annotations

import uuid

import numpy as np
import sqlalchemy as sa

from tests.storage.test_llm_usage_storage import alembic, scratch_db  # noqa: F401 - the fixture
from tests.storage.test_owner_indexes import unit
from ultron.db.memories import _filters, vec

WORDS = ("kafka consumer lag grows after the broker restart while redis timeouts pile up on the worker "
         "nginx answers bad gateway because docker ran out of disk space during the nightly build of "
         "postgres replicas with pgvector indexes and celery queues waiting for the scheduler").split()
OWNERS = ["alpha", "beta", "gamma", None]


def fill(engine: sa.Engine, n: int, seed: int = 0) -> None:
    """Memories of a few owners whose words and vector put the row over PostgreSQL's 2 kB."""
    rng = np.random.default_rng(seed)
    with engine.begin() as conn:
        for i, v in enumerate(unit(rng, n)):
            text = " ".join(rng.choice(WORDS, 70)) + f" case{i}"
            conn.execute(sa.text(
                "INSERT INTO memory_records (id, memory_type, content, resolution, agent_id, shared, tags, embedding) "
                "VALUES (:id, 'error', :c, :r, :a, :s, :t, CAST(:e AS vector))"),
                {"id": str(uuid.UUID(int=i + 1)), "c": text, "r": " ".join(rng.choice(WORDS, 30)),
                 "a": OWNERS[i % 4], "s": i % 4 == 3, "t": [f"tag-{i % 3}"], "e": vec(v)})


def words_out_of_row(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT count(*) FROM memory_records WHERE pg_column_toast_chunk_id(search_tsv) IS NOT NULL")).scalar_one()


def matches(engine: sa.Engine) -> list[tuple[str, float]]:
    with engine.connect() as conn:
        return [(r.id, round(float(r.rank), 6)) for r in conn.execute(sa.text(
            "SELECT id::text, ts_rank(search_tsv, to_tsquery('english', 'kafka & gateway')) AS rank "
            "FROM memory_records WHERE search_tsv @@ to_tsquery('english', 'kafka & gateway') ORDER BY id"))]


def test_the_words_move_into_the_rows_and_back(scratch_db):
    assert alembic(scratch_db, "upgrade", "0018") == "0018"
    fill(scratch_db, 40)
    before = matches(scratch_db)
    assert before and words_out_of_row(scratch_db) > 30  # the vector in the row pushed the words out

    assert alembic(scratch_db, "upgrade", "0019") == "0019"
    assert words_out_of_row(scratch_db) == 0 and matches(scratch_db) == before
    with scratch_db.begin() as conn:  # a memory written afterwards keeps its words in the row too
        conn.execute(sa.text(
            "INSERT INTO memory_records (id, memory_type, content, resolution, embedding) "
            "VALUES (:id, 'error', :c, :c, CAST(:e AS vector))"),
            {"id": str(uuid.uuid4()), "c": " ".join([w for w in WORDS if w != "kafka"] * 2),
             "e": vec(unit(np.random.default_rng(3), 1)[0])})
    assert words_out_of_row(scratch_db) == 0

    assert alembic(scratch_db, "downgrade", "0018") == "0018"
    assert words_out_of_row(scratch_db) > 30 and matches(scratch_db) == before
    with scratch_db.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM memory_records")).scalar_one() == 41
        assert not conn.execute(sa.text(
            "SELECT count(*) FROM pg_index WHERE indrelid = 'memory_records'::regclass AND NOT indisvalid")).scalar_one()


WORD_INDEXES = {"ix_memory_records_agent_words", "ix_memory_records_tag_words", "ix_memory_records_shared_words"}


def word_indexes(engine: sa.Engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.text(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_records' AND indexname LIKE '%words'")).scalars())


def pool_plan(conn: sa.Connection, keep: set[str], **filters) -> str:
    """The plan of a search's lexical pool under ``filters`` (as ``search_arms`` writes it),
    every index of the table but ``keep`` hidden (in the caller's transaction, rolled back):
    on a table this small, reading all the store's matches or all its rows is cheaper than
    any owner's, while at 1M memories the planner prefers the owners' (docs/scale.md). What
    this shows is that it can use them."""
    cond, params = _filters(None, filters.get("tags"), filters.get("agent_id"), filters.get("visible"))
    conn.execute(sa.text("UPDATE pg_index SET indisvalid = false WHERE indrelid = 'memory_records'::regclass "
                         "AND NOT indexrelid::regclass::text = ANY(:keep)"), {"keep": sorted(keep)})
    conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
    return "\n".join(conn.execute(sa.text(
        f"EXPLAIN SELECT id FROM memory_records WHERE {cond} AND search_tsv @@ to_tsquery('english', 'kafka')"),
        params).scalars())


def test_the_word_indexes_serve_agent_team_and_tag_searches_and_go_on_downgrade(scratch_db):
    assert alembic(scratch_db, "upgrade", "0019") == "0019"
    fill(scratch_db, 40)
    assert alembic(scratch_db, "upgrade", "0020") == "0020"
    assert word_indexes(scratch_db) == WORD_INDEXES
    with scratch_db.connect() as conn:
        conn.exec_driver_sql("ANALYZE memory_records")
        by_owner = {"ix_memory_records_agent_words", "ix_memory_records_shared_words"}
        team = pool_plan(conn, by_owner, visible=("alpha", "beta"))
        conn.rollback()
        agent = pool_plan(conn, by_owner, agent_id="gamma")
        conn.rollback()
        tag = pool_plan(conn, {"ix_memory_records_tag_words"}, tags=["tag-1"])
        conn.rollback()
    assert "ix_memory_records_agent_words" in team and "ix_memory_records_agent_words" in agent, (team, agent)
    assert "ix_memory_records_tag_words" in tag, tag
    assert alembic(scratch_db, "downgrade", "0019") == "0019"
    assert word_indexes(scratch_db) == set()
    with scratch_db.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM pg_extension WHERE extname = 'btree_gin'")).scalar_one() == 0
        assert conn.execute(sa.text("SELECT count(*) FROM memory_records")).scalar_one() == 40
