"""Memory rows two to a page (revision 0021): the heap halves on a populated store, the
searches find the same memories, and counting hits still rewrites rows in place."""

from __future__ import annotations

import numpy as np
import sqlalchemy as sa

from tests.storage.test_llm_usage_storage import alembic, scratch_db  # noqa: F401 - the fixture
from tests.storage.test_owner_indexes import unit
from tests.storage.test_word_indexes import fill, matches
from ultron.db.hits import add_hit_counts
from ultron.db.memories import vec

ROWS = 60


def shape(engine: sa.Engine) -> tuple[list[str], int, int]:
    """The table's options, its heap pages and its rows."""
    with engine.connect() as conn:
        options = conn.execute(sa.text("SELECT reloptions FROM pg_class WHERE relname = 'memory_records'")).scalar_one()
        pages, rows = conn.execute(sa.text(
            "SELECT pg_relation_size('memory_records') / current_setting('block_size')::int, "
            "(SELECT count(*) FROM memory_records)")).one()
    return list(options or []), pages, rows


def nearest(engine: sa.Engine) -> list[str]:
    q = vec(unit(np.random.default_rng(11), 1)[0])
    with engine.connect() as conn:
        return list(conn.execute(sa.text(
            "SELECT id::text FROM memory_records ORDER BY embedding <=> CAST(:q AS vector) LIMIT 10"), {"q": q}).scalars())


def hot_share_of_hits(engine: sa.Engine, rounds: int = 5) -> float:
    """Every memory hit ``rounds`` times, in batches committed one by one as the hit writer
    commits them; the share of those updates PostgreSQL made in place (HOT). A batch holds
    every seventh memory, so never two neighbours in the heap: what a batch of a few
    searches' hits in a large store is like, where the second of two hits on one page in one
    transaction finds the first's new version in the room."""
    with engine.connect() as conn:
        ids = list(conn.execute(sa.text("SELECT id::text FROM memory_records ORDER BY ctid")).scalars())
        before = conn.execute(sa.text(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'memory_records'")).one()
        conn.rollback()
        for _ in range(rounds):
            for start in range(7):
                batch = ids[start::7]
                assert add_hit_counts(conn, {i: 1 for i in batch}) == set(batch)
                conn.commit()
        conn.execute(sa.text("SELECT pg_stat_force_next_flush()"))
        conn.commit()
    with engine.connect() as conn:
        after = conn.execute(sa.text(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'memory_records'")).one()
    assert after[0] - before[0] == rounds * len(ids)
    return (after[1] - before[1]) / (after[0] - before[0])


def test_the_rows_go_two_to_a_page_and_back_and_hits_stay_in_place(scratch_db):
    assert alembic(scratch_db, "upgrade", "0020") == "0020"
    fill(scratch_db, ROWS)
    words, near = matches(scratch_db), nearest(scratch_db)
    options, pages, rows = shape(scratch_db)
    assert options == ["fillfactor=50"] and rows == ROWS and pages >= ROWS  # a page a memory

    assert alembic(scratch_db, "upgrade", "0021") == "0021"
    options, pages, rows = shape(scratch_db)
    assert options == ["fillfactor=60"] and rows == ROWS
    assert pages <= ROWS * 0.55, pages  # two to a page
    assert matches(scratch_db) == words and nearest(scratch_db) == near
    assert hot_share_of_hits(scratch_db) >= 0.9
    with scratch_db.connect() as conn:
        assert not conn.execute(sa.text(
            "SELECT count(*) FROM pg_index WHERE indrelid = 'memory_records'::regclass AND NOT indisvalid")).scalar_one()

    assert alembic(scratch_db, "downgrade", "0020") == "0020"
    options, pages, rows = shape(scratch_db)
    assert options == ["fillfactor=50"] and rows == ROWS and pages >= ROWS
    assert matches(scratch_db) == words and nearest(scratch_db) == near
