"""The memories' words indexed with their owner, so that the lexical arm of a search
filtered to an agent, a team (agents and the shared memories) or a tag reads only that
owner's matches.

Without them, the planner intersected the query words' matches in the whole store with
the filter's own index, and reading that index was most of a filtered search at 1M
memories (EXPLAIN ANALYZE on ``benchmarks/filtered_search.py``'s store: 4.6 ms of a team's
13.1 ms for the 40,000 entries of its two agents, 4.9 ms of a 5% tag's 11.7 ms).

* ``ix_memory_records_agent_words``: GIN on (``agent_id``, ``search_tsv``), through the
  ``btree_gin`` extension (PostgreSQL's contrib, trusted: the store's owner may create
  it). One index serves every agent: GIN finds the rows holding both the agent and the
  words, skipping through the agent's entries rather than reading them all.
* ``ix_memory_records_tag_words``: GIN on (``tags``, ``search_tsv``), for every tag.
* ``ix_memory_records_shared_words``: the words of the shared memories alone.

Partial indexes per owner, like the owner graphs of revision 0017, did as well on those
searches, but 67 of them (50 agents, the shared memories, 16 tags) cost every search's
planning about 0.4 ms at 100k memories, the unfiltered one too, and took 341 MB at 1M
memories against 190 MB for these three.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

ACTIVE = "status = 'active'"
INDEXES = {
    "ix_memory_records_agent_words": f"USING gin (agent_id, search_tsv) WHERE {ACTIVE}",
    "ix_memory_records_tag_words": f"USING gin (tags, search_tsv) WHERE {ACTIVE}",
    "ix_memory_records_shared_words": f"USING gin (search_tsv) WHERE shared AND {ACTIVE}",
}


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    for name, how in INDEXES.items():
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON memory_records {how}")


def downgrade() -> None:
    for name in INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {name}")
    op.execute("DROP EXTENSION IF EXISTS btree_gin")
