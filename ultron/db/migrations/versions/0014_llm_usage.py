"""LLM usage kept in the store, so a page served by a process that does no LLM work (the API's
overview) can show calls, tokens, failures and rules fallbacks over time.

* ``llm_usage``: one row per UTC day, provider (``openai``; the rules provider records
  nothing), model and task (a method of the provider interface: ``segment``, ``judge``,
  ``extract_memories``, ``classify_memory``, ``summarize``, ...). Workers add their deltas
  to it (``ultron.db.llm_usage.add_usage``: INSERT ... ON CONFLICT DO UPDATE adding the
  counts), so any number of processes write the same row without losing a count.
  ``fallbacks`` counts the times the rules answered because the LLM failed.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

COUNTS = ("calls", "prompt_tokens", "completion_tokens", "failures", "retries", "fallbacks")


def upgrade() -> None:
    op.create_table(
        "llm_usage",
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("provider", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("task", sa.Text, nullable=False),
        *(sa.Column(name, sa.BigInteger, nullable=False, server_default="0") for name in COUNTS),
        sa.Column("updated_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.PrimaryKeyConstraint("day", "provider", "model", "task", name="pk_llm_usage"),
    )


def downgrade() -> None:
    op.drop_table("llm_usage")
