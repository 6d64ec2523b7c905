"""Room on every heap page so that counting a search hit is a HOT update.

Every search counts a hit on each memory it returns (``hit_count``, ``last_hit_at``). When
the new row version fits on its page, Postgres updates it in place (a HOT update) and no
index is touched; when it does not, every index gets a new entry, the HNSW index included,
which costs milliseconds per row. A memory row is wide (its texts and tsvector stay inline: about
1.7 kB), so at fillfactor 80 only about a third of the hit updates at 100k memories were HOT
and counting ten hits took 30 ms at the median; at 50, 95% were HOT and it took 2 ms, for
a heap about 1.8 times larger (a one-off measurement on the store ``benchmarks/search.py``
builds, 3,000 random 10-row hit updates, on a busy machine: not a benchmark kept in the
repository). Existing pages keep their fill
until they are rewritten (``VACUUM FULL memory_records`` does it at once).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE memory_records SET (fillfactor = 50)")


def downgrade() -> None:
    op.execute("ALTER TABLE memory_records SET (fillfactor = 80)")
