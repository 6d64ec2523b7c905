"""Revision 0018 keeps each memory's vector in its row (``STORAGE MAIN``), so an exact
filtered scan reads no TOAST table: the migration moves a populated store's vectors into the
rows and back out, losing nothing, and what is written afterwards stays in the row."""

from __future__ import annotations

import os
import uuid

import numpy as np
import sqlalchemy as sa

from tests.storage.test_llm_usage_storage import alembic, scratch_db  # noqa: F401 - the fixture
from tests.storage.test_owner_indexes import unit
from ultron.db.memories import vec


def fill(engine: sa.Engine, n: int, seed: int = 0) -> None:
    """Memories whose text (random hex: it does not compress) puts the row over the 2 kB
    at which PostgreSQL starts moving values out of it."""
    rng = np.random.default_rng(seed)
    with engine.begin() as conn:
        for i, v in enumerate(unit(rng, n)):
            conn.execute(sa.text(
                "INSERT INTO memory_records (id, memory_type, content, agent_id, tags, embedding) "
                "VALUES (:id, 'error', :c, 'agent', :t, CAST(:e AS vector))"),
                {"id": str(uuid.UUID(int=i + 1)), "c": os.urandom(400).hex(), "t": [f"tag-{i % 3}"], "e": vec(v)})


def layout(engine: sa.Engine) -> tuple[str, int, int]:
    """The column's storage, and how many vectors and contents sit in the TOAST table."""
    with engine.connect() as conn:
        storage = conn.execute(sa.text(
            "SELECT attstorage FROM pg_attribute WHERE attrelid = 'memory_records'::regclass "
            "AND attname = 'embedding'")).scalar_one()
        row = conn.execute(sa.text(
            "SELECT count(*) FILTER (WHERE pg_column_toast_chunk_id(embedding) IS NOT NULL) AS vectors, "
            "count(*) FILTER (WHERE pg_column_toast_chunk_id(content) IS NOT NULL) AS contents "
            "FROM memory_records")).one()
    return storage, row.vectors, row.contents


def nearest(engine: sa.Engine, q: np.ndarray) -> list[tuple[str, float]]:
    """An exact, tag-filtered top 10 (the planner kept off the HNSW index by the ``+ 0``)."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT id::text, embedding <=> CAST(:q AS vector) AS d FROM memory_records "
            "WHERE tags @> ARRAY['tag-1'] ORDER BY (embedding <=> CAST(:q AS vector)) + 0 LIMIT 10"),
            {"q": vec(q)}).all()
    return [(r.id, round(float(r.d), 6)) for r in rows]


def test_the_migration_moves_a_stores_vectors_into_the_rows_and_back(scratch_db):
    assert alembic(scratch_db, "upgrade", "0017") == "0017"
    fill(scratch_db, 60)
    q = unit(np.random.default_rng(9), 1)[0]
    before = nearest(scratch_db, q)
    assert layout(scratch_db) == ("e", 60, 0)  # before: every vector out of its row

    assert alembic(scratch_db, "upgrade", "0018") == "0018"
    assert layout(scratch_db) == ("m", 0, 60)  # the text leaves the row, the vector stays
    assert nearest(scratch_db, q) == before
    with scratch_db.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO memory_records (id, memory_type, content, embedding) "
            "VALUES (:id, 'error', :c, CAST(:e AS vector))"),
            {"id": str(uuid.uuid4()), "c": os.urandom(400).hex(), "e": vec(q)})
    assert layout(scratch_db) == ("m", 0, 61)

    assert alembic(scratch_db, "downgrade", "0017") == "0017"
    assert layout(scratch_db) == ("e", 61, 0)
    assert nearest(scratch_db, q) == before
    with scratch_db.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM memory_records")).scalar_one() == 61
        # the table's indexes were rebuilt with it, and are in use
        invalid = conn.execute(sa.text(
            "SELECT count(*) FROM pg_index WHERE indrelid = 'memory_records'::regclass AND NOT indisvalid")).scalar_one()
    assert invalid == 0


def test_a_new_store_keeps_its_vectors_in_the_rows(scratch_db):
    assert alembic(scratch_db, "upgrade", "head") >= "0018"
    fill(scratch_db, 5)
    assert layout(scratch_db) == ("m", 0, 5)
