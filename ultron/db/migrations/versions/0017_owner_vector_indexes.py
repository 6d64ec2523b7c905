"""Per-owner vector indexes: a partial HNSW index for each agent with many memories, one for
the shared memories and one for each of the commonest tags (``ULTRON_TAG_INDEXES``), so a
search filtered to an agent, to what an agent-bound token sees, or to one tag walks a graph
of those memories only (``ultron.db.vector_indexes``).

* ``memory_vector_indexes``: which exist, by scope (``agent:<id>`` or ``shared``), with the
  index's name. The maintenance step ``index_owners`` keeps them in line with the store.
* Upgrading builds them at once for the owners that already have at least
  ``ULTRON_OWNER_INDEX_MIN`` (default 1,000) active memories; downgrading drops every one.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29
"""

import os

import sqlalchemy as sa
from alembic import op

from ultron.db import vector_indexes as vi

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_vector_indexes",
        sa.Column("scope", sa.Text, primary_key=True),
        sa.Column("index_name", sa.Text, nullable=False, unique=True),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.text("now()")),
    )
    conn = op.get_bind()
    threshold = max(1, int(os.environ.get("ULTRON_OWNER_INDEX_MIN") or 1000))
    tags = max(0, int(os.environ.get("ULTRON_TAG_INDEXES") or 16))
    for scope in vi.owner_counts(conn, threshold, tags):
        conn.exec_driver_sql(vi.create_sql(scope))
        vi.record(conn, scope)


def downgrade() -> None:
    conn = op.get_bind()
    for scope in vi.recorded(conn):
        conn.exec_driver_sql(vi.drop_sql(scope))
    op.drop_table("memory_vector_indexes")
