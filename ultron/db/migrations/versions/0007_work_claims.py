"""Claims on pending work, and marks on what the rules did in the LLM's place.

* **Claims.** Several workers (two Dagster runs, a CLI maintenance beside the daemon, Celery
  workers) may look at the same pending sessions and segments. A worker takes an item by
  writing its own id and an expiry into ``claimed_by`` / ``claim_expires_at`` (picked with
  ``FOR UPDATE SKIP LOCKED``, so two workers never pick the same row), does the work, and
  clears the claim when it marks the item done. A worker that dies leaves a claim that
  expires, after which anyone may take the item again. ``work_leases`` holds the same kind
  of expiring claim for store-wide steps (clustering, skill evolution).
* **Fallback marks.** ``memory_records.fallback_tasks`` lists the tasks the rules did because
  the LLM was unavailable or answered garbage (``classify_memory``, ``summarize``...). The
  next maintenance run with a working LLM redoes them and clears the mark.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TS = sa.TIMESTAMP(timezone=True)


def upgrade() -> None:
    for table in ("trajectory_records", "task_segments"):
        op.add_column(table, sa.Column("claimed_by", sa.Text))
        op.add_column(table, sa.Column("claim_expires_at", TS))
    # Workers claim segments awaiting extraction (ultron.db.claims): a partial index keeps the
    # claim query off the done rows, nearly all of them in a grown store (pending sessions and
    # unlabeled segments have theirs since 0001).
    op.create_index("ix_task_segments_unextracted", "task_segments", ["created_at", "id"],
                    postgresql_where=sa.text("labeled = 1 AND memory_extracted = 0"))
    op.create_table(
        "work_leases",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
        sa.Column("acquired_at", TS, nullable=False, server_default=sa.text("now()")),
    )
    op.add_column("memory_records", sa.Column("fallback_tasks", sa.ARRAY(sa.Text), nullable=False,
                                              server_default=sa.text("'{}'::text[]")))
    op.create_index("ix_memory_records_fallback", "memory_records", ["id"],
                    postgresql_where=sa.text("cardinality(fallback_tasks) > 0"))


def downgrade() -> None:
    op.drop_index("ix_memory_records_fallback", table_name="memory_records")
    op.drop_column("memory_records", "fallback_tasks")
    op.drop_table("work_leases")
    op.drop_index("ix_task_segments_unextracted", table_name="task_segments")
    for table in ("trajectory_records", "task_segments"):
        op.drop_column(table, "claim_expires_at")
        op.drop_column(table, "claimed_by")
