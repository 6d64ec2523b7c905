"""A word index for each owner with a graph of its own: the ``search_tsv`` GIN index, partial
on the same rows as the scope's HNSW index (``ultron.db.vector_indexes``), so the lexical
arm of a search filtered to an agent, a team or one indexed tag reads only that owner's
matches instead of intersecting the store's matches with the filter's own index.

* Upgrading builds one for every scope in ``memory_vector_indexes``, in this transaction;
  later ones come with their graph from the maintenance step ``index_owners``, which also
  builds a missing or broken one.
* Downgrading drops them.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

from ultron.db import vector_indexes as vi

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def _scopes() -> list[str]:
    return list(op.get_bind().execute(sa.text("SELECT scope FROM memory_vector_indexes ORDER BY scope")).scalars())


def upgrade() -> None:
    conn = op.get_bind()
    for scope in _scopes():
        conn.exec_driver_sql(vi.create_text_sql(scope, concurrently=False))


def downgrade() -> None:
    conn = op.get_bind()
    for scope in _scopes():
        conn.exec_driver_sql(vi.drop_text_sql(scope, concurrently=False))
