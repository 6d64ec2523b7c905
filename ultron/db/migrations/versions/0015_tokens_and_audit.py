"""Principals for a team server: named API tokens with a scope, and an audit log.

* ``api_tokens``: one row per token ever issued. Only an HMAC of the secret is kept
  (``token_hash``, keyed by the server's token secret, never the token itself), looked up by
  the public ``id`` the token starts with. ``scope`` is read, write or admin; ``agents``
  (NULL: every agent) is kept for agent-bound tokens. Revoked and expired tokens stay, so
  the audit log's names keep meaning something; ``last_used_at`` is written at most once a
  minute per token.
* ``audit_log``: who did what to which target, when: forget, edits, token changes,
  exports and ingest by path. ``detail`` holds counts and paths only, never memory text or
  secrets.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

NOW = sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("token_hash", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("agents", pg.ARRAY(sa.Text)),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.Column("expires_at", sa.TIMESTAMP(timezone=True)),
        sa.Column("revoked_at", sa.TIMESTAMP(timezone=True)),
        sa.Column("last_used_at", sa.TIMESTAMP(timezone=True)),
        sa.Column("rotated_from", sa.Text),
        sa.CheckConstraint("scope IN ('read', 'write', 'admin')", name="ck_api_tokens_scope"),
    )
    # A name belongs to one live token at a time (a rotated or revoked one frees it).
    op.execute("CREATE UNIQUE INDEX uq_api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL")
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=NOW),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False, server_default=""),
        sa.Column("detail", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_at", table_name="audit_log")
    op.drop_table("audit_log")
    op.execute("DROP INDEX IF EXISTS uq_api_tokens_live_name")
    op.drop_table("api_tokens")
