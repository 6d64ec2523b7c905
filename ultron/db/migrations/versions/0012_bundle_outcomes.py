"""Outcomes that teach the store: which bundle each agent session was given, and what the
session's outcome says about each item in it.

* ``trajectory_records.agent_session_id``: the agent's own id for the session (Claude
  Code's ``sessionId``, a Codex rollout's ``session_meta.payload.id``, else the file's
  stem), so a session ingested later can be matched to the bundles served during it.
* ``bundle_serves``: one row per item (memory or skill) of a bundle served with a session
  id. ``attributed_at`` is set once the session's outcome was counted for the item, with
  the ``outcome`` and the ``weight`` counted, so attribution never counts twice and forget
  can take a forgotten serve's weight back off.
* ``outcome_helped`` / ``outcome_unhelped`` on memories and skills: the sums of the
  weights attributed outcomes added (explicit feedback stays in its counters; the utility
  estimate combines both, ``ultron.db.outcomes``). On skills the sums travel with the slug,
  as the feedback counters do.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

NOW = sa.text("now()")


def upgrade() -> None:
    op.add_column("trajectory_records", sa.Column("agent_session_id", sa.Text))
    op.create_index("ix_trajectory_records_agent_session", "trajectory_records", ["agent_session_id"])
    op.create_table(
        "bundle_serves",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("agent_id", sa.Text),
        sa.Column("served_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.Column("item_kind", sa.Text, nullable=False),
        sa.Column("item_id", sa.Text, nullable=False),
        sa.Column("attributed_at", sa.TIMESTAMP(timezone=True)),
        sa.Column("outcome", sa.Text),
        sa.Column("weight", sa.Float, nullable=False, server_default="0"),
        sa.CheckConstraint("item_kind IN ('memory', 'skill')", name="ck_bundle_serves_kind"),
        sa.CheckConstraint("outcome IS NULL OR outcome IN ('helped', 'not_helped', 'neutral')",
                           name="ck_bundle_serves_outcome"),
    )
    op.create_index("ix_bundle_serves_pending", "bundle_serves", ["session_id"],
                    postgresql_where=sa.text("attributed_at IS NULL"))
    op.create_index("ix_bundle_serves_session", "bundle_serves", ["session_id"])
    op.create_index("ix_bundle_serves_item", "bundle_serves", ["item_kind", "item_id"])
    op.create_index("ix_bundle_serves_agent", "bundle_serves", ["agent_id"])
    for table in ("memory_records", "skills"):
        op.add_column(table, sa.Column("outcome_helped", sa.Float, nullable=False, server_default="0"))
        op.add_column(table, sa.Column("outcome_unhelped", sa.Float, nullable=False, server_default="0"))


def downgrade() -> None:
    for table in ("skills", "memory_records"):
        op.drop_column(table, "outcome_unhelped")
        op.drop_column(table, "outcome_helped")
    op.drop_table("bundle_serves")
    op.drop_index("ix_trajectory_records_agent_session", table_name="trajectory_records")
    op.drop_column("trajectory_records", "agent_session_id")
