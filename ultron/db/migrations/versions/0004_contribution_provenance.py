"""Forget: each memory contribution keeps its own tags, tools and lines.

A merged memory's tags are the union of what every contribution brought. When a source
is forgotten, the memory is rebuilt from the contributions that remain, and so are its
tags, tools and provenance (lines included), which needs each contribution's own.
NULL means unknown (rows written before this revision): forget then falls back to the
memory's tags minus the forgotten sources' ``agent:`` / ``segment:`` tags.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("memory_contributions", sa.Column("tags", pg.ARRAY(sa.Text)))
    op.add_column("memory_contributions", sa.Column("tools_used", pg.ARRAY(sa.Text)))
    op.add_column("memory_contributions", sa.Column("start_line", sa.Integer))
    op.add_column("memory_contributions", sa.Column("end_line", sa.Integer))


def downgrade() -> None:
    for column in ("end_line", "start_line", "tools_used", "tags"):
        op.drop_column("memory_contributions", column)
