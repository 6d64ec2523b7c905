"""Who this worker is, that it is alive, and the loops that take pending work in small
claimed batches.

Several workers (two ``run_maintenance`` processes, Dagster runs, the daemon) may run the
same step over the same store. Each claims items a few at a time (``ultron.db.claims``),
so they share the work instead of all doing all of it. Batches are small so a claim is not
held long before its item is started.

A claim is free as soon as its worker is gone. Before its first claim on a database, a
process opens one connection of its own to it (not the pool's; held for the process's
life) and takes a session-level advisory lock keyed by its worker id (:func:`alive`);
other workers treat a claim or lease whose holder's lock is not held as free. When the
process dies, however it dies, the server ends the session and the lock with it, so a
retry started the next second finds the work free. ULTRON_CLAIM_LEASE_SECONDS stays as
the backstop for a worker that is alive but stuck. Processes that never claim (the API
server) never open the connection. This needs a session-level connection to Postgres
(not PgBouncer in transaction mode), as Dagster itself does.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence, TypeVar

import sqlalchemy as sa

from ultron.db import claims as store

log = logging.getLogger(__name__)

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


class _Liveness:
    """This process's liveness connection to one database, holding its worker id's lock."""

    def __init__(self, url: sa.URL) -> None:
        # An engine of its own without a pool: the connection is opened fresh (never one of
        # the pool's, which a forked child shares with its parent) and is closed for real.
        self.engine = sa.create_engine(url, poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
        self.conn: sa.Connection | None = None
        self.fd: int | None = None
        #: True once this session holds the lock. False after a reconnect whose old session
        #: the server has not ended yet: that session still holds the lock for us, and the
        #: next :meth:`ensure` takes it over once it is gone.
        self.held = False

    def ensure(self, me: str) -> None:
        if self.conn is not None:
            try:
                if self.held:
                    store.ping(self.conn)
                else:
                    self.held = store.try_hold_liveness(self.conn, me)
                self.conn.commit()
                return
            except sa.exc.DBAPIError:
                # The session is gone, and the lock with it: other workers may already be
                # taking over our claims. We take the same key again rather than a new worker
                # id: the loops under way keep claiming under the id they started with, and
                # their claims must stay protected; items another worker took meanwhile are
                # claimed in its name now, and our done-marking re-checks them.
                log.warning("worker %s lost its liveness connection; reconnecting", me)
                self.close()
        conn = self.engine.connect()
        try:
            store.prepare_liveness_session(conn)
            self.held = store.try_hold_liveness(conn, me)
            conn.commit()
            self.fd = conn.connection.dbapi_connection.fileno()
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        if not self.held:
            log.warning("worker %s: its lock is still held by its previous session; taking it over later", me)

    def close(self) -> None:
        conn, self.conn, self.fd, self.held = self.conn, None, None, False
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:  # noqa: BLE001 - the session is gone already
                pass

    def abandon(self) -> None:
        """In a forked child: this is the parent's session. Closing it, even by garbage
        collection, would send the server a Terminate on the shared socket and end the
        parent's lock, so the child's copy of the socket is pointed at /dev/null first."""
        if self.fd is not None:
            null = os.open(os.devnull, os.O_RDWR)
            try:
                os.dup2(null, self.fd)
            finally:
                os.close(null)
        _abandoned.append(self)


_liveness: dict[str, _Liveness] = {}
_liveness_lock = threading.Lock()
#: Liveness connections inherited from the parent process, kept so they are never closed.
_abandoned: list[_Liveness] = []


def _after_fork_in_child() -> None:
    global _liveness, _liveness_lock
    inherited, _liveness, _liveness_lock = _liveness, {}, threading.Lock()
    for entry in inherited.values():
        entry.abandon()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def alive(engine: sa.Engine) -> str:
    """This process's worker id, with its liveness lock held on ``engine``'s database: call
    before claiming (the loops here and :func:`lease` do). The first call opens the
    connection; later ones check it with one round trip and open it again if it dropped."""
    me = worker_id()
    key = engine.url.render_as_string(hide_password=True)
    with _liveness_lock:
        entry = _liveness.get(key)
        if entry is None:
            entry = _liveness[key] = _Liveness(engine.url)
        entry.ensure(me)
    return me


def claimed_items(engine: sa.Engine, claim: Callable[[sa.Connection, int, list[str]], list[T]],
                  key: Callable[[T], str], release: Callable[[sa.Connection, T], None], limit: int) -> Iterator[T]:
    """Claim and yield up to ``limit`` items, :data:`CLAIM_BATCH` at a time.

    ``claim(conn, n, tried)`` must skip the ids in ``tried``: an item this run gave back
    after a failure is pending again and would otherwise be claimed again at once. Items
    claimed but never handed out (the caller stopped or raised) are released."""
    tried: list[str] = []
    while len(tried) < limit:
        alive(engine)
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
    me = alive(engine)
    holder = f"{me}/{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        upstream = store.live_claim_holder(conn, me)
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
    alive(engine)
    with engine.begin() as conn:
        return store.renew_lease(conn, name, holder, lease_seconds)
