"""Memory vectors kept in the row, not in the TOAST table.

A filtered search compares every memory the filter keeps when there are few of them
(``ultron.db.search_arms._dense_arm``). pgvector stores a vector out of line whenever the row
is over PostgreSQL's 2 kB TOAST threshold, and a 384-d vector (1.5 kB) with a memory's text
always is, so each comparison fetched the vector through the TOAST table's index: an exact
scan of 5,000 memories took 3.1x as long as with the vectors in the row, at 100k memories
(``benchmarks/filtered_search.py``'s store; the numbers are in docs/scale.md).

* ``embedding`` gets ``STORAGE MAIN``: a row that must be cut down moves its text out first
  and the vector last. (``toast_tuple_target = 8160`` was not set: with the table's
  ``fillfactor`` of 50, kept for the hit counts' in-page updates, a row that large would
  leave one row a page.)
* Existing rows are rewritten to that layout (the column's type set to itself through an
  expression, which makes PostgreSQL copy every row and rebuild the table's indexes, in this
  transaction, in the rows' order); downgrading rewrites them back. Most of the time goes
  to rebuilding the HNSW graphs (docs/scale.md has how long it took at 100k and 1M).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def _rewrite(storage: str) -> None:
    conn = op.get_bind()
    column_type = conn.exec_driver_sql(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'memory_records'::regclass AND attname = 'embedding'").scalar_one()
    # The rewrite rebuilds every index of the table, the HNSW graphs too, and a graph that
    # does not fit in maintenance_work_mem (PostgreSQL's default: 64 MB) is built on disk:
    # at 1M memories the rewrite had not ended after 30 minutes that way. So this transaction
    # gets room for the largest graph (half as much again as its size on disk), at most 4 GB.
    conn.exec_driver_sql(
        "SELECT set_config('maintenance_work_mem', greatest("
        "  (SELECT setting::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'),"
        "  least(4 * 1024 * 1024, coalesce((SELECT max(pg_relation_size(x.indexrelid)) * 3 / 2 / 1024"
        "   FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid JOIN pg_am a ON a.oid = c.relam"
        "   WHERE x.indrelid = 'memory_records'::regclass AND a.amname = 'hnsw'), 0)))::text || 'kB', true)")
    # One statement: a type change resets the column's storage to the type's, so the storage
    # is set in the same ALTER, whose subcommands all apply before its one rewrite. A plain
    # column reference in USING would be seen as no change and rewrite nothing.
    conn.exec_driver_sql(f"ALTER TABLE memory_records ALTER COLUMN embedding TYPE {column_type} "
                         f"USING embedding::real[]::{column_type}, ALTER COLUMN embedding SET STORAGE {storage}")


def upgrade() -> None:
    _rewrite("MAIN")


def downgrade() -> None:
    _rewrite("EXTERNAL")
