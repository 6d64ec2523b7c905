"""The arrival day of each session file, for ULTRON_PARTITIONING=daily.

A day partition ``agent:YYYY-MM-DD`` holds the files that arrived that day, and a file
keeps the day it was first seen however often it changes afterwards. That record used to
be an append-only file under ``$ULTRON_HOME/partitions`` guarded by ``flock``, which only
worked while every process (the daemon, Dagster run workers, Celery workers on other
machines) shared one filesystem, and which database backups missed. Here it is a table:
the first arrival of a file key wins (``INSERT ... ON CONFLICT DO NOTHING``), so writers
racing on a new file agree without any lock of their own. ``(agent_id, day)`` is indexed
because a run of a day partition lists its files by it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "session_arrivals",
        sa.Column("file_key", sa.Text, primary_key=True),
        sa.Column("agent_id", sa.Text, nullable=False),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("recorded_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.text("now()")),
    )
    op.create_index("ix_session_arrivals_agent_day", "session_arrivals", ["agent_id", "day"])


def downgrade() -> None:
    op.drop_index("ix_session_arrivals_agent_day", table_name="session_arrivals")
    op.drop_table("session_arrivals")
