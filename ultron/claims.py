"""Who this worker is, and the loops that take pending work in small claimed batches.

Several workers (two ``run_maintenance`` processes, Dagster runs, the daemon) may run the
same step over the same store. Each claims items a few at a time (``ultron.db.claims``),
so they share the work instead of all doing all of it, and a claim lasts
ULTRON_CLAIM_LEASE_SECONDS, so a crashed worker's items are taken over later. Batches
are small so a claim is not held long before its item is started, and the lease only
needs to cover a few items' LLM calls.
"""

from __future__ import annotations

import os
import socket
import uuid
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence, TypeVar

import sqlalchemy as sa

from ultron.db import claims as store

T = TypeVar("T")
R = TypeVar("R")

#: Items claimed per round trip.
CLAIM_BATCH = 4

_worker: tuple[int, str] | None = None


def worker_id() -> str:
    """This process's id (host, pid and a uuid); a forked child gets its own."""
    global _worker
    pid = os.getpid()
    if _worker is None or _worker[0] != pid:
        _worker = (pid, f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:12]}")
    return _worker[1]


def claimed_items(engine: sa.Engine, claim: Callable[[sa.Connection, int, list[str]], list[T]],
                  key: Callable[[T], str], release: Callable[[sa.Connection, T], None], limit: int) -> Iterator[T]:
    """Claim and yield up to ``limit`` items, :data:`CLAIM_BATCH` at a time.

    ``claim(conn, n, tried)`` must skip the ids in ``tried``: an item this run gave back
    after a failure is pending again and would otherwise be claimed again at once. Items
    claimed but never handed out (the caller stopped or raised) are released."""
    tried: list[str] = []
    while len(tried) < limit:
        with engine.begin() as conn:
            batch = claim(conn, min(CLAIM_BATCH, limit - len(tried)), tried)
        if not batch:
            return
        tried.extend(key(item) for item in batch)
        left = list(batch)
        try:
            while left:
                yield left[0]
                left.pop(0)
        finally:
            if left:
                with engine.begin() as conn:
                    for item in left:
                        release(conn, item)


def work_claimed(engine: sa.Engine, claim: Callable[[sa.Connection, int, list[str]], list[T]],
                 key: Callable[[T], str], release: Callable[[sa.Connection, T], None], limit: int,
                 work: Callable[[T], R], done: Callable[[R], bool]) -> list[R]:
    """``work`` on each item :func:`claimed_items` hands out; an item whose work raised or did
    not end ``done`` is released, so it is pending again for the next run."""
    out = []
    for item in claimed_items(engine, claim, key, release, limit):
        result = None
        try:
            result = work(item)
        finally:
            if result is None or not done(result):
                with engine.begin() as conn:
                    release(conn, item)
        out.append(result)
    return out


@contextmanager
def lease(engine: sa.Engine, name: str, lease_seconds: float, *, after: Sequence[str] = ()
          ) -> Iterator[tuple[str, str | None]]:
    """Hold the store-wide lease ``name`` for the block: yields (our holder id, None), or
    (our holder id, why not) when the step should be skipped: "held by <holder>" when
    another live worker runs it, "upstream work held by <holder>" when another worker still
    holds claims on sessions or segments (or the leases named in ``after``), whose output
    this step would miss; that worker runs the step itself when it is done. Every
    acquisition has its own holder id, so two runs in one process exclude each other too."""
    holder = f"{worker_id()}/{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        upstream = store.live_claim_holder(conn, worker_id())
        upstream = upstream or next((h for h in (store.lease_holder(conn, n) for n in after) if h), None)
        other = None if upstream else store.acquire_lease(conn, name, holder, lease_seconds)
    busy = f"upstream work held by {upstream}" if upstream else (f"held by {other}" if other else None)
    try:
        yield holder, busy
    finally:
        if busy is None:
            with engine.begin() as conn:
                store.release_lease(conn, name, holder)


def renew(engine: sa.Engine, name: str, holder: str, lease_seconds: float) -> bool:
    with engine.begin() as conn:
        return store.renew_lease(conn, name, holder, lease_seconds)
