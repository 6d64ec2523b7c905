"""Stand-ins for other workers that are alive, for tests that write claims and leases in
other workers' names (``ultron.claims``: a claim whose holder holds no liveness lock is free)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import sqlalchemy as sa

from ultron.db import claims as store


@contextmanager
def live_workers(engine: sa.Engine, *workers: str) -> Iterator[None]:
    """``workers`` count as alive for the block: their liveness locks are held on a connection
    of the caller's, closed at the end (the locks die with it, as with a worker that exits)."""
    conn = engine.connect()
    try:
        for worker in workers:
            assert store.try_hold_liveness(conn, worker), f"{worker} is alive elsewhere already"
        conn.commit()
        yield
    finally:
        conn.invalidate()   # never back to the pool with the locks still held
        conn.close()
