"""What the memory browser needs: a memory's edit history, and indexes that keep a page of
a million memories cheap.

* ``memory_revisions``: the text a memory had before each edit by a person (content,
  context, resolution, tags, summaries), who made it and when. Rows go with their memory
  (ON DELETE CASCADE), so forgetting a memory forgets its history too.
* Browse indexes: active memories newest first, overall, per type and per agent, each
  ending in ``id`` so keyset pagination (``(created_at, id) < (:t, :id)``) reads one page
  of an index and never counts past it.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

ACTIVE = sa.text("status = 'active'")
BROWSE_INDEXES = {
    "ix_memory_records_browse": ["created_at", "id"],
    "ix_memory_records_browse_type": ["memory_type", "created_at", "id"],
    "ix_memory_records_browse_agent": ["agent_id", "created_at", "id"],
}


def upgrade() -> None:
    op.create_table(
        "memory_revisions",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("memory_id", sa.Text, sa.ForeignKey("memory_records.id", ondelete="CASCADE"), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("context", sa.Text, nullable=False, server_default=""),
        sa.Column("resolution", sa.Text, nullable=False, server_default=""),
        sa.Column("tags", pg.ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'::text[]")),
        sa.Column("summary_l0", sa.Text, nullable=False, server_default=""),
        sa.Column("overview_l1", sa.Text, nullable=False, server_default=""),
        # who replaced this text: "browser", "api", a token's name once tokens have names
        sa.Column("edited_by", sa.Text, nullable=False, server_default=""),
        sa.Column("edited_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.text("now()")),
    )
    op.create_index("ix_memory_revisions_memory", "memory_revisions", ["memory_id", "edited_at"])
    for name, columns in BROWSE_INDEXES.items():
        op.create_index(name, "memory_records", columns, postgresql_where=ACTIVE)


def downgrade() -> None:
    for name in BROWSE_INDEXES:
        op.drop_index(name, table_name="memory_records")
    op.drop_index("ix_memory_revisions_memory", table_name="memory_revisions")
    op.drop_table("memory_revisions")
