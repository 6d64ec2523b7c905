"""The repository files each memory was learned from, so a search can tell it is stale.

One row per memory and file: the repository (its normalised ``origin`` remote, so clones
on other machines match), the path relative to the repository root, the content hash the
session saw (null when it was not known: then only a vanished file can be detected),
whether the session edited it, and when it was recorded. Rows go with their memory
(ON DELETE CASCADE), so forget needs no step of its own. Indexed by repository for
``ultron stale``, which lists one repository's memories.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_files",
        sa.Column("memory_id", sa.Text, sa.ForeignKey("memory_records.id", ondelete="CASCADE"), nullable=False),
        sa.Column("repo_remote", sa.Text, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("sha256", sa.Text),
        sa.Column("edited", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("seen_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.PrimaryKeyConstraint("memory_id", "repo_remote", "path", name="pk_memory_files"),
    )
    op.create_index("ix_memory_files_repo", "memory_files", ["repo_remote", "memory_id"])


def downgrade() -> None:
    op.drop_index("ix_memory_files_repo", table_name="memory_files")
    op.drop_table("memory_files")
