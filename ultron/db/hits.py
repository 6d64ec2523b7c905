"""Search hits written behind the search, by one thread per process and database.

A hit count is soft state (tiering reads it; nothing breaks when the last few are lost), and
its UPDATE cost a search about 1.5 ms at 100k memories, with a p90 of 11 ms when the rows'
pages were busy (a profile on ``benchmarks/search.py``'s store). So a search only queues its
ids; a writer thread folds whatever is queued into one UPDATE, then the next, waiting at
most ``WRITE_DELAY`` (0.1 s) for others to share it: searches back to back then pay one
statement per batch, not one each. Every read of hit counts through the services calls
``flush`` first, so a process always reads its own hits; another process sees them as soon
as they are written. What a killed process had queued is lost, like the last commits of a
search were already allowed to be (``synchronous_commit = off``).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterable, Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Engine

log = logging.getLogger("ultron.db.hits")

#: seconds a queued hit may wait for others to share its UPDATE (none when a reader waits)
WRITE_DELAY = 0.1
#: batches a hit is tried in before it is dropped (its memory locked each time, or deleted)
RETRIES = 3


def add_hit_counts(conn: sa.Connection, counts: Mapping[str, int]) -> set[str]:
    """Add each id's count to its hit_count and stamp last_hit_at, in one statement, and
    return the ids counted. Rows another transaction holds locked are skipped, not waited
    for: the writer then never waits on a lock, so it can never be one end of a deadlock with
    an upload, a feedback or a forget touching the same memories (in another order)."""
    if not counts:
        return set()
    ids = list(counts)
    rows = conn.execute(sa.text(
        "WITH h AS (SELECT * FROM unnest(CAST(:ids AS text[]), CAST(:ns AS int[])) AS h(id, n)), "
        "free AS (SELECT m.id FROM memory_records m JOIN h ON h.id = m.id FOR UPDATE OF m SKIP LOCKED) "
        "UPDATE memory_records m SET hit_count = m.hit_count + h.n, last_hit_at = now() "
        "FROM h WHERE m.id = h.id AND m.id IN (SELECT id FROM free) RETURNING m.id"),
        {"ids": ids, "ns": [int(counts[i]) for i in ids]})
    return {r.id for r in rows}


class HitWriter:
    """Queued hit counts of one database, written by a daemon thread started on first use
    (and again in a forked child, which inherits no threads)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._reset()
        _register(self)

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._pending: Counter[str] = Counter()
        self._busy = False
        self._waiters = 0
        self._tries: dict[str, int] = {}
        self._thread: threading.Thread | None = None

    def add(self, ids: Iterable[str], amount: int = 1) -> None:
        """Queue ``amount`` hits on each id; returns at once."""
        if os.getpid() != self._pid:
            self._reset()
        with self._cond:
            for memory_id in ids:
                self._pending[memory_id] += amount
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="ultron-hits", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every hit queued so far is written; False when ``timeout`` ran out."""
        if os.getpid() != self._pid:
            self._reset()
        with self._cond:
            self._waiters += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)
            finally:
                self._waiters -= 1

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._pending))
                # Gather for WRITE_DELAY unless someone waits: searches back to back then share
                # one UPDATE instead of each racing the next search's query embedding for the CPU.
                self._cond.wait_for(lambda: self._waiters > 0, WRITE_DELAY)
                batch, self._pending, self._busy = dict(self._pending), Counter(), True
            left: dict[str, int] = {}
            try:
                with self._engine.connect() as conn:
                    counted = add_hit_counts(conn, batch)
                # Skipped as locked, or gone (forgotten): tried again with the next batch, up
                # to RETRIES times, so a deleted memory's hits do not circle forever.
                left = {i: n for i, n in batch.items() if i not in counted}
                if left:
                    time.sleep(0.05)  # give the lock holder a moment before the next try
            except Exception as exc:  # soft state: lose these hits, say so, keep serving
                log.warning("could not count %d search hits: %s", sum(batch.values()), exc)
            finally:
                with self._cond:
                    for memory_id, n in left.items():
                        tries = self._tries.get(memory_id, 0) + 1
                        if tries <= RETRIES:
                            self._pending[memory_id] += n
                            self._tries[memory_id] = tries
                        else:
                            self._tries.pop(memory_id, None)
                    for memory_id in batch:
                        if memory_id not in left:
                            self._tries.pop(memory_id, None)
                    self._busy = False
                    self._cond.notify_all()


_WRITERS: weakref.WeakSet[HitWriter] = weakref.WeakSet()
_REGISTER_LOCK = threading.Lock()
_at_exit_registered = False


def _register(writer: HitWriter) -> None:
    """Remember the writer (weakly) and, with the first one, register the flush at exit: after
    the embedded server's stop at exit was registered (a writer needs an open database), and
    handlers run last registered first, so the queues are written before the server goes."""
    global _at_exit_registered
    with _REGISTER_LOCK:
        if not _at_exit_registered:
            atexit.register(_flush_at_exit)
            _at_exit_registered = True
        _WRITERS.add(writer)


def flush_all(timeout: float = 5.0) -> None:
    """Write what every writer of this process has queued: at exit, and before anything
    stops a database server this process still counts hits on (a benchmark's throw-away one)."""
    for writer in list(_WRITERS):
        if writer._pid == os.getpid():
            writer.flush(timeout=timeout)


def _flush_at_exit() -> None:
    flush_all()
