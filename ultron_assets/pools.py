"""Concurrency pools shared by assets and ops.

The store-wide steps (tier rebalance, clustering, skill evolution, consolidation) each
take a Postgres advisory lock on the whole memory store, so two runs doing them at once
only wait on each other. dagster.yaml limits every pool to one slot with run granularity:
a second run that needs the pool stays queued instead of holding a run slot.
"""

#: the pool of every step that reads or rewrites the whole memory store
STORE_POOL = "ultron_store"
