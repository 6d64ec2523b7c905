"""Hashes of the sentences each session opens with, to recognise a harness's text.

Agent harnesses paste the same standing instructions at the start of every run ("always
reproduce the bug first"); read as a lesson, each run stored them again. The lesson
stage counts, per sentence hash, the sessions that opened with it, and takes sentences
seen in several sessions out of what it reads (``ultron.learned.units.RepeatIndex``).
Hashes only, no text; rows go with their session. Also an expression index for the
exact-repeat test of an upload: the same sentence met again merges into one memory
whatever its context says.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "opening_sentences",
        sa.Column("key_hash", sa.BigInteger, nullable=False),
        sa.Column("record_id", sa.Text, sa.ForeignKey("trajectory_records.id", ondelete="CASCADE"), nullable=False),
        sa.PrimaryKeyConstraint("key_hash", "record_id", name="pk_opening_sentences"),
    )
    op.create_index("ix_opening_sentences_record", "opening_sentences", ["record_id"])
    # the exact-repeat test of an upload (same type, same content up to case and spacing)
    op.execute("CREATE INDEX ix_memory_records_content_key ON memory_records "
               "(memory_type, md5(lower(regexp_replace(content, '\\s+', ' ', 'g')))) WHERE status = 'active'")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_memory_records_content_key")
    op.drop_index("ix_opening_sentences_record", table_name="opening_sentences")
    op.drop_table("opening_sentences")
