"""Agent visibility for a team server: a memory is its agent's unless marked ``shared``.

* ``memory_records.shared`` (false): a token bound to agents sees its agents' memories and
  the shared ones (``ultron.access``). Adding a column with a constant default does not
  rewrite the table.
* A partial index on the shared memories, newest first, so a bound token's pages and its
  filtered searches find the shared side of ``(shared OR agent_id = ANY(...))`` through an
  index as they find the agent side through ``ix_memory_records_browse_agent``.

Memories merged across agents before this revision stay with the agent that contributed
first; from now on an upload only merges into a memory of the same agent and the same
``shared`` flag.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("memory_records", sa.Column("shared", sa.Boolean, nullable=False, server_default=sa.false()))
    op.create_index("ix_memory_records_shared", "memory_records", ["created_at", "id"],
                    postgresql_where=sa.text("shared AND status = 'active'"))


def downgrade() -> None:
    op.drop_index("ix_memory_records_shared", table_name="memory_records")
    op.drop_column("memory_records", "shared")
