"""Memories (the columns segmentation needs to archive by tag; the Memory Hub extends it).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("agent_id", sa.Text),
        sa.Column("memory_type", sa.Text),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("context", sa.Text),
        sa.Column("resolution", sa.Text),
        sa.Column("tags", pg.ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'::text[]")),
        sa.Column("status", sa.Text, nullable=False, server_default="active"),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.Column("updated_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.CheckConstraint("status IN ('active', 'archived')", name="ck_memories_status"),
    )
    op.create_index("ix_memories_tags", "memories", ["tags"], postgresql_using="gin")


def downgrade() -> None:
    op.drop_table("memories")
