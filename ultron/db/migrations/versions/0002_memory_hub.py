"""Memory Hub: memory_records (pgvector HNSW + full text), memory_contributions, embedding_profile.

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

#: The vector column's dimension: all-MiniLM-L6-v2's. Another embedder must produce
#: this many dimensions (the OpenAI-compatible provider asks for it) or be switched to
#: with `ultron reembed` (same dimension only; another needs a new store); vector spaces are never mixed.
EMBEDDING_DIM = 384
NOW = sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "embedding_profile",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.CheckConstraint("id = 1", name="ck_embedding_profile_single_row"),
    )
    op.create_table(
        "memory_records",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("memory_type", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("context", sa.Text, nullable=False, server_default=""),
        sa.Column("resolution", sa.Text, nullable=False, server_default=""),
        sa.Column("tags", pg.ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'::text[]")),
        sa.Column("summary_l0", sa.Text, nullable=False, server_default=""),
        sa.Column("overview_l1", sa.Text, nullable=False, server_default=""),
        sa.Column("kind", sa.Text),
        sa.Column("tools_used", pg.ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'::text[]")),
        sa.Column("confidence", sa.Float),
        sa.Column("tier", sa.Text, nullable=False, server_default="WARM"),
        sa.Column("status", sa.Text, nullable=False, server_default="active"),
        sa.Column("hit_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_hit_at", sa.TIMESTAMP(timezone=True)),
        sa.Column("merge_pending", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("agent_id", sa.Text),
        sa.Column("segment_id", sa.Text),
        sa.Column("session_file", sa.Text),
        sa.Column("start_line", sa.Integer),
        sa.Column("end_line", sa.Integer),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.Column("updated_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.CheckConstraint("tier IN ('HOT', 'WARM', 'COLD')", name="ck_memory_records_tier"),
        sa.CheckConstraint("status IN ('active', 'archived')", name="ck_memory_records_status"),
        sa.CheckConstraint(
            "memory_type IN ('error', 'security', 'correction', 'pattern', 'preference', 'life')",
            name="ck_memory_records_type"),
        sa.CheckConstraint("kind IS NULL OR kind IN ('procedural', 'episodic')", name="ck_memory_records_kind"),
        sa.CheckConstraint("confidence IS NULL OR (confidence >= 0 AND confidence <= 1)",
                           name="ck_memory_records_confidence"),
    )
    op.execute(f"ALTER TABLE memory_records ADD COLUMN embedding vector({EMBEDDING_DIM})")
    op.execute(
        "ALTER TABLE memory_records ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS ("
        "setweight(to_tsvector('english', coalesce(content, '')), 'A') || "
        "setweight(to_tsvector('english', coalesce(context, '')), 'C') || "
        "setweight(to_tsvector('english', coalesce(resolution, '')), 'B')) STORED"
    )
    op.execute(
        "CREATE INDEX ix_memory_records_embedding ON memory_records "
        "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
    op.create_index("ix_memory_records_search_tsv", "memory_records", ["search_tsv"], postgresql_using="gin")
    op.create_index("ix_memory_records_tags", "memory_records", ["tags"], postgresql_using="gin")
    # Hit counting updates hit_count/last_hit_at on every search: with no index on them and
    # free space on each page, those updates are HOT (heap-only) and never touch the HNSW graph.
    op.execute("ALTER TABLE memory_records SET (fillfactor = 80)")
    op.create_index("ix_memory_records_segment", "memory_records", ["segment_id"])
    op.create_index("ix_memory_records_session", "memory_records", ["agent_id", "session_file"])

    op.create_table(
        "memory_contributions",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("memory_id", sa.Text, sa.ForeignKey("memory_records.id", ondelete="CASCADE"), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("context", sa.Text, nullable=False, server_default=""),
        sa.Column("resolution", sa.Text, nullable=False, server_default=""),
        sa.Column("similarity", sa.Float),
        sa.Column("agent_id", sa.Text),
        sa.Column("segment_id", sa.Text),
        sa.Column("session_file", sa.Text),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
    )
    op.create_index("ix_memory_contributions_memory", "memory_contributions", ["memory_id"])
    op.create_index("ix_memory_contributions_session", "memory_contributions", ["agent_id", "session_file"])
    op.create_index("ix_memory_contributions_segment", "memory_contributions", ["segment_id"])


def downgrade() -> None:
    op.drop_table("memory_contributions")
    op.drop_table("memory_records")
    op.drop_table("embedding_profile")
