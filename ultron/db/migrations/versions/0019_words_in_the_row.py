"""A memory's words (``search_tsv``) kept in its row, beside its vector.

Revision 0018 kept the vector in the row (``STORAGE MAIN``), and PostgreSQL, to bring a
row under its 2 kB TOAST threshold, then moved the next largest value out instead: the
words the lexical arm reads (about 520 bytes). At 100k memories all but 15 in 20,000 had
them out of line, against 6% before 0018, so the lexical pool fetched each of its up to 200
memories' words through the TOAST table's index. With them back in the row, an unfiltered
search at 100k memories took 7.0-7.5 ms against 7.4-8.1 ms (p50 of 200, the two layouts
taking turns on one store, owner indexes hidden).

* ``search_tsv`` gets ``STORAGE MAIN`` too: the text fields (content, resolution, context,
  summaries), which a search reads only for the memories it returns, leave the row first;
  the words are compressed in the row if it is still too long.
* Existing rows are rewritten to that layout as revision 0018 rewrote them (its
  ``_rewrite``: the vector column's type set to itself, every index rebuilt, with room
  in ``maintenance_work_mem`` for the graphs); downgrading rewrites them back.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-29
"""

import importlib

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_inline = importlib.import_module("ultron.db.migrations.versions.0018_inline_vectors")


def upgrade() -> None:
    op.execute("ALTER TABLE memory_records ALTER COLUMN search_tsv SET STORAGE MAIN")
    _inline._rewrite("MAIN")


def downgrade() -> None:
    op.execute("ALTER TABLE memory_records ALTER COLUMN search_tsv SET STORAGE EXTENDED")
    _inline._rewrite("MAIN")
