"""Memory rows two to a page: the table's ``fillfactor`` from 50 to 60.

Revision 0008 left half of each page free so that counting a search hit is a HOT update
(the new row version on the same page, no index touched), when a row was about 1.7 kB.
Since the vector and the words are kept in the row (revisions 0018 and 0019) a row is
2-2.7 kB, so at 50 a page held one: the heap was twice its rows' size (7.8 GB at 1M
memories, more than the embedded server's shared buffers), and an exact scan of the
memories a filter keeps (``ultron.db.search_arms._dense_arm``) read one page per memory.

At 60 a page takes two such rows and keeps 40% free: room for a new version of any row
up to 3.2 kB, and a longer row is alone on its page with more room still. So the hit
counts stay HOT (``benchmarks/hit_writes.py``: the share of HOT updates and the time of a
hit batch at 50, 60 and 75), and the heap is half as large.

Existing rows are rewritten to the new fill as revision 0018 rewrote them (its ``_rewrite``:
every index rebuilt, with room in ``maintenance_work_mem`` for the graphs); downgrading
sets 50 again and rewrites them back.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-29
"""

import importlib

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_inline = importlib.import_module("ultron.db.migrations.versions.0018_inline_vectors")


def upgrade() -> None:
    op.execute("ALTER TABLE memory_records SET (fillfactor = 60)")
    _inline._rewrite("MAIN")


def downgrade() -> None:
    op.execute("ALTER TABLE memory_records SET (fillfactor = 50)")
    _inline._rewrite("MAIN")
