"""Fault: a worker killed while holding claims left its items claimed until the lease ran
out (ULTRON_CLAIM_LEASE_SECONDS, 900 s): a retry started at once found them claimed, skipped
them and succeeded with the work undone. Now every claiming process holds a session-level
advisory lock keyed by its worker id (``ultron.claims.alive``), and a claim or lease whose
holder's lock is gone is free at once. A live worker's claims are still left to it.

The other workers here are real processes (killed with SIGKILL) or a forked child; the lease
is left at 900 s throughout, so it is never what frees anything."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from ultron import claims
from ultron.db import claims as store

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = [ROOT / "examples" / "docker-compose-redis-worker.jsonl", ROOT / "examples" / "docker-psycopg2-binary.jsonl"]

#: Another worker: claims every pending session (or takes the clustering lease), prints its
#: worker id (or lease holder id), then stalls, holding them, until it is killed.
HOLDER = """
import sys, time
from ultron import claims
from ultron.db import claims as store
from ultron.db.database import Database
from ultron.settings import Settings
engine = Database.open(Settings.from_env()).engine
if sys.argv[1] == "sessions":
    me = claims.alive(engine)
    with engine.begin() as conn:
        got = store.claim_sessions(conn, me, 900, 100)
    print(me, len(got), flush=True)
    time.sleep(600)
else:
    with claims.lease(engine, "clustering", 900) as (holder, busy):
        assert busy is None, busy
        print(holder, flush=True)
        time.sleep(600)
"""


@pytest.fixture(autouse=True)
def _no_leases(db):
    yield
    with db.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM work_leases"))


@pytest.fixture
def holder():
    """Start HOLDER; yields (process, its first line's words); the process is killed at the end."""
    procs: list[subprocess.Popen] = []

    def start(what: str) -> tuple[subprocess.Popen, list[str]]:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, what], cwd=ROOT, env=dict(os.environ),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        line = proc.stdout.readline()
        assert line, proc.stderr.read()[-3000:]
        return proc, line.split()

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _live(db, *workers: str) -> set[str]:
    with db.engine.connect() as conn:
        return store.live_workers(conn, workers)


def _kill(db, proc: subprocess.Popen, worker: str) -> tuple[float, float]:
    """SIGKILL the worker; returns (when, seconds until the server had dropped its lock)."""
    assert _live(db, worker) == {worker}
    killed = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    while _live(db, worker):
        assert time.monotonic() - killed < 10, "the server kept a killed worker's lock"
        time.sleep(0.005)
    return killed, time.monotonic() - killed


def _ingest(client) -> list[str]:
    assert client.ingest(SESSIONS, "claims").totals["failed"] == 0
    with client.db.engine.connect() as conn:
        return list(conn.execute(sa.text("SELECT id FROM trajectory_records ORDER BY id")).scalars())


def _claimed_by(client, table: str) -> list[str | None]:
    with client.db.engine.connect() as conn:
        return list(conn.execute(sa.text(f"SELECT claimed_by FROM {table} ORDER BY id")).scalars())


def test_a_live_workers_claims_are_left_to_it_and_free_the_moment_it_is_killed(client, settings, holder):
    assert settings.claim_lease_seconds == 900
    ids = _ingest(client)
    proc, (other, claimed) = holder("sessions")
    assert other.startswith(f"{socket.gethostname()}:{proc.pid}:") and int(claimed) == len(ids)
    assert _claimed_by(client, "trajectory_records") == [other] * len(ids)

    # alive: its claims are its own, and the store-wide steps wait for it
    assert client.segment_pending_sessions(100) == []
    assert client.clusters.run_clustering().skipped_run == f"upstream work held by {other}"
    assert _claimed_by(client, "trajectory_records") == [other] * len(ids)

    killed, dropped = _kill(db=client.db, proc=proc, worker=other)
    done = client.segment_pending_sessions(100)
    took = time.monotonic() - killed
    print(f"lock dropped {dropped * 1000:.0f} ms after the kill; its {len(ids)} sessions segmented {took:.2f} s after")
    assert sorted(r.status for r in done) == ["segmented"] * len(ids)
    assert _claimed_by(client, "trajectory_records") == [None] * len(ids)
    assert took < 60    # not the 900 s lease
    assert client.clusters.run_clustering().skipped_run is None


def test_a_named_lease_is_free_the_moment_its_holder_is_killed(client, holder):
    proc, (lease_holder,) = holder("lease")
    other = lease_holder.split("/")[0]
    assert other.startswith(f"{socket.gethostname()}:{proc.pid}:")
    assert client.clusters.run_clustering().skipped_run == f"held by {lease_holder}"
    assert client.skills.run_skill_evolution().skipped_run == f"upstream work held by {lease_holder}"

    killed, dropped = _kill(client.db, proc, other)
    assert client.clusters.run_clustering().skipped_run is None
    assert client.skills.run_skill_evolution().skipped_run is None
    took = time.monotonic() - killed
    print(f"lock dropped {dropped * 1000:.0f} ms after the kill; clustering and skills ran {took:.2f} s after")
    with client.db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM work_leases")).scalar_one() == 0


def _liveness_backend(db, worker: str) -> int | None:
    """The server pid of the session holding ``worker``'s liveness lock."""
    with db.engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
            "AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(:w, :seed)"),
            {"w": worker, "seed": store.LIVENESS_SEED}).scalar_one_or_none()


def test_a_worker_whose_liveness_connection_dropped_takes_its_lock_back_and_keeps_its_claims(client):
    ids = _ingest(client)
    me = claims.alive(client.db.engine)
    with client.db.engine.begin() as conn:
        [mine] = [s.record_id for s in store.claim_sessions(conn, me, 900, 1)]
    first = _liveness_backend(client.db, me)
    assert first is not None
    with client.db.engine.connect() as conn:   # the server ends our session (a restart, a proxy...)
        conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": first})
    for _ in range(200):
        if not _live(client.db, me):
            break
        time.sleep(0.01)
    assert _live(client.db, me) == set()        # gone: while it is, others may take our claim

    assert claims.alive(client.db.engine) == me   # the next claim round reconnects, same id
    second = _liveness_backend(client.db, me)
    assert second not in (None, first) and _live(client.db, me) == {me}
    with client.db.engine.begin() as conn:       # our claim is ours again
        taken = [s.record_id for s in store.claim_sessions(conn, "someone-else", 900, 100)]
    assert sorted(taken) == sorted(set(ids) - {mine})
    assert sorted(_claimed_by(client, "trajectory_records")) == sorted([me, "someone-else"])


def test_a_forked_child_is_a_worker_of_its_own_and_its_exit_leaves_the_parents_lock(client):
    parent = claims.alive(client.db.engine)
    backend = _liveness_backend(client.db, parent)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: its own id and lock; closes what it inherited, as exit would
        try:
            os.close(read)
            child = claims.alive(client.db.engine)
            for entry in claims._abandoned:
                entry.conn.close()
            os.write(write, child.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        child = fh.read()
    os.waitpid(pid, 0)
    assert child.startswith(f"{socket.gethostname()}:{pid}:") and child != parent
    for _ in range(500):
        if not _live(client.db, child):
            break
        time.sleep(0.01)
    assert _live(client.db, parent, child) == {parent}
    assert claims.alive(client.db.engine) == parent and _liveness_backend(client.db, parent) == backend


def test_a_process_that_never_claims_opens_no_liveness_connection(client):
    out = subprocess.run([sys.executable, "-c", (
        "from ultron import claims\n"
        "from ultron.sdk import Ultron\n"
        "c = Ultron()\n"
        "c.upload_memory('pip install fails behind the proxy', 'installing', 'set REQUESTS_CA_BUNDLE')\n"
        "c.search_memories('pip proxy')\n"
        "print(len(claims._liveness))\n")], cwd=ROOT, env=dict(os.environ), capture_output=True, text=True,
        timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1] == "0"
