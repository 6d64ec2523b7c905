"""Feedback from agents: helpful / not helpful on a memory or a skill, and a skill lifecycle.

Every verdict is kept as an event (who, when, the note) so a rank or a retirement can be
explained later; the counters on the rows are what ranking and tiers read, so a search
never aggregates events. A skill's lifecycle is ``probationary`` (new, too little feedback),
``active`` (enough helpful feedback) or ``retired`` (reliability fell below the threshold:
not returned, not exported). It lives on the skill's version rows and is carried to each
new version, so a retired skill stays retired when its cluster is re-synthesised.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

NOW = sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "feedback_events",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("target_kind", sa.Text, nullable=False),       # 'memory' | 'skill'
        sa.Column("target_id", sa.Text, nullable=False),         # memory id | skill slug
        sa.Column("helpful", sa.Boolean, nullable=False),
        sa.Column("note", sa.Text, nullable=False, server_default=""),
        sa.Column("agent_id", sa.Text),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.CheckConstraint("target_kind IN ('memory', 'skill')", name="feedback_events_kind"),
    )
    op.create_index("feedback_events_target", "feedback_events", ["target_kind", "target_id", "created_at"])
    for table in ("memory_records", "skills"):
        op.add_column(table, sa.Column("helpful_count", sa.Integer, nullable=False, server_default="0"))
        op.add_column(table, sa.Column("unhelpful_count", sa.Integer, nullable=False, server_default="0"))
    op.add_column("skills", sa.Column("lifecycle", sa.Text, nullable=False, server_default="probationary"))
    op.create_check_constraint("skills_lifecycle", "skills", "lifecycle IN ('probationary', 'active', 'retired')")


def downgrade() -> None:
    op.drop_constraint("skills_lifecycle", "skills")
    op.drop_column("skills", "lifecycle")
    for table in ("memory_records", "skills"):
        op.drop_column(table, "unhelpful_count")
        op.drop_column(table, "helpful_count")
    op.drop_index("feedback_events_target", "feedback_events")
    op.drop_table("feedback_events")
