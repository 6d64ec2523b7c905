"""Keeping the per-owner vector graphs in line with the store (``ultron.db.vector_indexes``):
the maintenance step ``index_owners``. Owners here are agents, the shared memories and the
``ULTRON_TAG_INDEXES`` commonest tags.

An agent reaching ``ULTRON_OWNER_INDEX_MIN`` active memories gets a graph; one falling
below half of that (or forgotten) loses it, so an agent hovering at the threshold is not
indexed and dropped on alternate runs. A graph is built in a table of its own while
searches and uploads go on, then attached as a partition (uploads wait for the attach, not
for the build). A build that failed (a killed worker, a full disk) leaves a table nobody
reads; the next run replaces it. The work lease keeps two workers from doubling the work.
"""

from __future__ import annotations

import logging
from typing import Any

from ultron.claims import lease
from ultron.db import vector_indexes as store
from ultron.db.database import Database
from ultron.settings import Settings

log = logging.getLogger("ultron.memory")


def refresh_owner_indexes(db: Database, settings: Settings) -> dict[str, Any]:
    """Build the missing indexes, drop the ones no longer worth their upkeep; returns
    ``{"created", "dropped", "kept"}`` (scopes) or ``{"skipped": why}``."""
    with lease(db.engine, "index_owners", settings.claim_lease_seconds) as (_me, busy):
        if busy is not None:
            return {"skipped": busy}
        threshold = settings.owner_index_min
        with db.engine.connect() as conn:
            wanted = store.owner_counts(conn, max(1, threshold // 2), settings.tag_indexes)
            have = store.recorded(conn)
        created, dropped, kept = [], [], []
        for scope, info in sorted(have.items()):
            if scope in wanted and info["valid"]:
                kept.append(scope)
                continue
            with db.engine.begin() as conn:
                store.drop(conn, scope)
            if scope not in wanted:
                dropped.append(scope)
        for scope, n in sorted(wanted.items()):
            if scope in kept or n < threshold:
                continue
            log.info("building the vector graph of %s (%d memories)", scope, n)
            store.build(db.engine, scope)
            created.append(scope)
        return {"created": created, "dropped": dropped, "kept": kept}
