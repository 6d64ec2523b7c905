"""Fault: two workers did the same work twice, and nothing let a crashed worker's work be
taken over. Claims (``ultron.db.claims``): an item or store-wide step a live worker holds is
left to it; an expired claim or lease is taken over. The other workers here are names whose
liveness locks the test holds (``live_workers``): a holder without one is gone, and its claims
are free at once (``tests/storage/test_claims_die_with_worker.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from ultron.testing.live_workers import live_workers

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = [ROOT / "examples" / "docker-compose-redis-worker.jsonl", ROOT / "examples" / "docker-psycopg2-binary.jsonl"]


@pytest.fixture(autouse=True)
def _no_leases(db):
    """A lease left by a failing test would make every later clustering run skip. The other
    workers the tests name are alive throughout."""
    with live_workers(db.engine, "live-worker", "busy-worker", "other:1", "other:2", "other:3"):
        yield
    with db.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM work_leases"))


def _sessions(client) -> list[tuple[str, str]]:
    assert client.ingest(SESSIONS, "claims").totals["failed"] == 0
    with client.db.engine.connect() as conn:
        return [(r.id, r.partition_key) for r in conn.execute(sa.text(
            "SELECT id, partition_key FROM trajectory_records ORDER BY session_file"))]


def _claim(client, table: str, row_id: str, worker: str, seconds: int) -> None:
    with client.db.engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {table} SET claimed_by = :w, "
                             "claim_expires_at = now() + make_interval(secs => :s) WHERE id = :id"),
                     {"w": worker, "s": seconds, "id": row_id})


def _row(client, sql: str, **params):
    with client.db.engine.connect() as conn:
        return conn.execute(sa.text(sql), params).one()


def test_a_live_workers_claimed_session_is_skipped_and_a_crashed_workers_is_taken_over(client):
    (crashed, _), (live, live_key) = _sessions(client)
    _claim(client, "trajectory_records", crashed, "crashed-worker", -60)
    _claim(client, "trajectory_records", live, "live-worker", 3600)

    done = client.segment_pending_sessions(100)
    assert [r.status for r in done] == ["segmented"]
    assert tuple(_row(client, "SELECT segmented, claimed_by FROM trajectory_records WHERE id = :id", id=crashed)) \
        == (1, None)
    assert tuple(_row(client, "SELECT segmented, claimed_by FROM trajectory_records WHERE id = :id", id=live)) \
        == (0, "live-worker")
    # the Dagster partition run of that session leaves it to the live worker...
    assert client.segment_pending_sessions(1, partition_key=live_key) == []
    # ...and takes it once that worker's claim has expired
    _claim(client, "trajectory_records", live, "live-worker", -1)
    assert [r.status for r in client.segment_pending_sessions(1, partition_key=live_key)] == ["segmented"]


def test_a_segment_claimed_by_a_live_worker_is_not_labelled_twice(client):
    _sessions(client)
    client.segment_pending_sessions(100)
    with client.db.engine.connect() as conn:
        ids = list(conn.execute(sa.text("SELECT id FROM task_segments ORDER BY id")).scalars())
    assert len(ids) >= 2
    _claim(client, "task_segments", ids[0], "live-worker", 3600)
    labels = client.label_pending_segments(100)
    assert sorted(lb.segment_id for lb in labels) == ids[1:]
    assert tuple(_row(client, "SELECT labeled, claimed_by FROM task_segments WHERE id = :id", id=ids[0])) \
        == (0, "live-worker")
    assert _row(client, "SELECT count(*) FROM task_segments WHERE claimed_by IS NOT NULL")[0] == 1


def test_clustering_and_skills_skip_while_another_worker_holds_them_and_take_over_an_expired_lease(client):
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO work_leases (name, holder, expires_at) VALUES "
                             "('clustering', 'other:1', now() + interval '1 hour'), "
                             "('skill_evolution', 'other:2', now() + interval '1 hour')"))
    assert client.clusters.run_clustering().skipped_run == "held by other:1"
    # skills wait for clustering as well as for their own lease
    assert client.skills.run_skill_evolution().skipped_run.endswith("held by other:1")
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE work_leases SET expires_at = now() - interval '1 second'"))
    assert client.clusters.run_clustering().skipped_run is None
    assert client.skills.run_skill_evolution().skipped_run is None
    assert _row(client, "SELECT count(*) FROM work_leases WHERE holder NOT LIKE 'other:%'")[0] == 0


def test_clustering_waits_for_a_worker_still_claiming_segments(client):
    (record, _), _ = _sessions(client)
    _claim(client, "trajectory_records", record, "busy-worker", 3600)
    assert client.clusters.run_clustering().skipped_run == "upstream work held by busy-worker"
    _claim(client, "trajectory_records", record, "busy-worker", -1)
    assert client.clusters.run_clustering().skipped_run is None


def test_consolidation_skips_while_another_worker_consolidates_and_takes_over_an_expired_lease(client):
    client.upload_memory("pip install fails behind the proxy with an SSL error", "", "set REQUESTS_CA_BUNDLE")
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO work_leases (name, holder, expires_at) VALUES "
                             "('consolidate_memories', 'other:3', now() + interval '1 hour')"))
    assert client.memory.consolidate() == {"examined": 0, "merged": 0, "skipped": "held by other:3"}
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE work_leases SET expires_at = now() - interval '1 second'"))
    assert client.memory.consolidate() == {"examined": 1, "merged": 0}
