"""Skill Hub: knowledge_clusters (centroids in an HNSW index), memory_records.cluster_id, skills.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

EMBEDDING_DIM = 384
NOW = sa.text("now()")
EMPTY = sa.text("'{}'::text[]")


def upgrade() -> None:
    op.create_table(
        "knowledge_clusters",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("topic", sa.Text, nullable=False, server_default=""),
        # active: current clustering; dissolved: no longer matched by a batch run (kept for history,
        # its centroid is NULL so the HNSW index never offers it).
        sa.Column("status", sa.Text, nullable=False, server_default="active"),
        sa.Column("size", sa.Integer, nullable=False, server_default="0"),
        # The skill crystallised from this cluster (current slug) and skills merged into it.
        sa.Column("skill_slug", sa.Text),
        sa.Column("superseded_slugs", pg.ARRAY(sa.Text), nullable=False, server_default=EMPTY),
        # The last crystallisation attempt: which members it saw and how it ended
        # (published | failed), so a failed cluster waits for new members instead of retrying every run.
        sa.Column("attempt_member_ids", pg.ARRAY(sa.Text), nullable=False, server_default=EMPTY),
        sa.Column("attempt_status", sa.Text),
        sa.Column("attempt_reason", sa.Text),
        sa.Column("attempted_at", sa.TIMESTAMP(timezone=True)),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.Column("updated_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.CheckConstraint("status IN ('active', 'dissolved')", name="ck_knowledge_clusters_status"),
    )
    op.execute(f"ALTER TABLE knowledge_clusters ADD COLUMN centroid vector({EMBEDDING_DIM})")
    op.execute("CREATE INDEX ix_knowledge_clusters_centroid ON knowledge_clusters "
               "USING hnsw (centroid vector_cosine_ops) WITH (m = 16, ef_construction = 64)")

    op.add_column("memory_records", sa.Column(
        "cluster_id", sa.Text, sa.ForeignKey("knowledge_clusters.id", ondelete="SET NULL")))
    op.create_index("ix_memory_records_cluster", "memory_records", ["cluster_id"])
    # Archived memories leave their clusters, whichever code path archives them.
    op.execute("""
        CREATE FUNCTION ultron_archived_leaves_cluster() RETURNS trigger AS $$
        BEGIN
            NEW.cluster_id := NULL;
            RETURN NEW;
        END $$ LANGUAGE plpgsql""")
    op.execute("""
        CREATE TRIGGER tr_memory_records_archived_leaves_cluster
        BEFORE UPDATE OF status ON memory_records FOR EACH ROW
        WHEN (NEW.status = 'archived' AND NEW.cluster_id IS NOT NULL)
        EXECUTE FUNCTION ultron_archived_leaves_cluster()""")

    op.create_table(
        "skills",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("slug", sa.Text, nullable=False),
        sa.Column("version", sa.Text, nullable=False),
        sa.Column("parent_version", sa.Text),
        sa.Column("cluster_id", sa.Text, sa.ForeignKey("knowledge_clusters.id", ondelete="SET NULL")),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False, server_default=""),
        sa.Column("skill_md", sa.Text, nullable=False),
        sa.Column("meta", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("memory_ids", pg.ARRAY(sa.Text), nullable=False, server_default=EMPTY),
        sa.Column("score", sa.Float, nullable=False),
        # current: the published version searched and served; superseded: kept for history only.
        sa.Column("status", sa.Text, nullable=False, server_default="current"),
        sa.Column("superseded_slugs", pg.ARRAY(sa.Text), nullable=False, server_default=EMPTY),
        sa.Column("path", sa.Text),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.Column("updated_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.UniqueConstraint("slug", "version", name="uq_skills_slug_version"),
        sa.CheckConstraint("status IN ('current', 'superseded')", name="ck_skills_status"),
        sa.CheckConstraint("score >= 0 AND score <= 1", name="ck_skills_score"),
    )
    op.execute("CREATE UNIQUE INDEX uq_skills_current_slug ON skills (slug) WHERE status = 'current'")
    op.create_index("ix_skills_cluster", "skills", ["cluster_id"])
    # Only current versions carry an embedding: a superseded version is NULL there, so the
    # HNSW index (which skips NULLs) can never return it.
    op.execute(f"ALTER TABLE skills ADD COLUMN embedding vector({EMBEDDING_DIM})")
    op.execute("CREATE INDEX ix_skills_embedding ON skills "
               "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)")


def downgrade() -> None:
    op.drop_table("skills")
    op.execute("DROP TRIGGER IF EXISTS tr_memory_records_archived_leaves_cluster ON memory_records")
    op.execute("DROP FUNCTION IF EXISTS ultron_archived_leaves_cluster()")
    op.drop_index("ix_memory_records_cluster", "memory_records")
    op.drop_column("memory_records", "cluster_id")
    op.drop_table("knowledge_clusters")
