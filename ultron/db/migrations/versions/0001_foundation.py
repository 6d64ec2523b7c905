"""Foundation: pgvector, session metadata, parsed messages, parse problems, raw archive, task segments.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

NOW = sa.text("now()")


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "trajectory_records",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("agent_id", sa.Text, nullable=False),
        sa.Column("session_file", sa.Text, nullable=False),
        sa.Column("partition_key", sa.Text),
        sa.Column("pair_index", sa.Integer, nullable=False, server_default="-1"),
        sa.Column("segmented", sa.Integer, nullable=False, server_default="0"),
        sa.Column("session_format", sa.Text),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("mtime_ns", sa.BigInteger),
        sa.Column("line_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("message_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("problem_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("role_counts", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.Column("updated_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.UniqueConstraint("agent_id", "session_file", name="uq_trajectory_records_agent_file"),
        sa.CheckConstraint("segmented IN (0, 1)", name="ck_trajectory_records_segmented"),
    )
    op.create_index(
        "ix_trajectory_records_pending", "trajectory_records", ["segmented"],
        postgresql_where=sa.text("segmented = 0"),
    )
    op.create_index("ix_trajectory_records_partition_key", "trajectory_records", ["partition_key"])

    op.create_table(
        "session_messages",
        sa.Column("record_id", sa.Text, sa.ForeignKey("trajectory_records.id", ondelete="CASCADE"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("line", sa.Integer, nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False, server_default=""),
        sa.Column("reasoning_content", sa.Text),
        sa.Column("tool_calls", pg.JSONB),
        sa.Column("tool_call_id", sa.Text),
        sa.Column("name", sa.Text),
        sa.Column("is_sidechain", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("source_id", sa.Text),
        sa.PrimaryKeyConstraint("record_id", "seq", name="pk_session_messages"),
    )

    op.create_table(
        "parse_problems",
        sa.Column("record_id", sa.Text, sa.ForeignKey("trajectory_records.id", ondelete="CASCADE"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("line", sa.Integer),
        sa.Column("error", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("record_id", "seq", name="pk_parse_problems"),
    )

    op.create_table(
        "raw_user_uploads",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("agent_id", sa.Text),
        sa.Column("source_path", sa.Text),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.CheckConstraint("kind IN ('ingest_file', 'ingest_text')", name="ck_raw_user_uploads_kind"),
    )
    # One archived copy per session file (the latest version), one per distinct text.
    op.create_index(
        "uq_raw_user_uploads_file", "raw_user_uploads", ["agent_id", "source_path"], unique=True,
        postgresql_where=sa.text("kind = 'ingest_file'"),
    )
    op.create_index(
        "uq_raw_user_uploads_text", "raw_user_uploads", ["content_hash"], unique=True,
        postgresql_where=sa.text("kind = 'ingest_text'"),
    )

    op.create_table(
        "task_segments",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("agent_id", sa.Text, nullable=False),
        sa.Column("session_file", sa.Text, nullable=False),
        sa.Column("segment_index", sa.Integer, nullable=False),
        sa.Column("start_line", sa.Integer, nullable=False),
        sa.Column("end_line", sa.Integer, nullable=False),
        sa.Column("fingerprint", sa.Text, nullable=False),
        sa.Column("topic", sa.Text),
        sa.Column("quality_metrics", sa.Text),
        sa.Column("labeled", sa.Integer, nullable=False, server_default="0"),
        sa.Column("memory_extracted", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.Column("updated_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.UniqueConstraint("agent_id", "session_file", "fingerprint", name="uq_task_segments_agent_file_fp"),
    )
    op.create_index("ix_task_segments_session", "task_segments", ["agent_id", "session_file", "segment_index"])
    op.create_index(
        "ix_task_segments_unlabeled", "task_segments", ["labeled"], postgresql_where=sa.text("labeled = 0"),
    )


def downgrade() -> None:
    for table in ("task_segments", "raw_user_uploads", "parse_problems", "session_messages", "trajectory_records"):
        op.drop_table(table)
