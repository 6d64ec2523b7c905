"""SQL for claims on pending work (migration 0007), so N workers share it without overlap.

An item (a session to segment, a segment to label or extract) is taken by writing the
worker's id and an expiry into ``claimed_by`` / ``claim_expires_at``. The rows are picked
with ``FOR UPDATE SKIP LOCKED``: two workers claiming at the same instant get disjoint
rows instead of waiting for each other and then both taking the same ones. A claim is
cleared when the item is marked done (``ultron.db.segments``) or released on failure.

Store-wide steps (clustering, skill evolution) hold a named lease in ``work_leases``
instead: a second worker sees who holds it and skips the step rather than waiting and
then redoing it.

**A claim dies with its worker.** Every worker that claims holds a session-level advisory
lock for as long as it lives, on a connection of its own (``ultron.claims``), keyed by its
id (:data:`_KEY`). A claim or lease whose holder's lock is not held is free at once: the
server drops a session's locks the moment its client goes away, however it went (exit,
``kill -9``, a lost machine once TCP keepalive notices), and every worker, on any machine,
sees the same ``pg_locks``. The expiry stays as a backstop for a worker that is alive but
stuck. Each claim statement reads ``pg_locks`` once (the ``live`` CTE, :data:`_LIVE`) and
tests holders against it with a hashed subplan, not one lookup per row.
"""

from __future__ import annotations

from typing import Any, Sequence

import sqlalchemy as sa

from ultron.db.segments import _JOINED_SEG_COLS, PendingSession, SegmentRow

#: Seed of the hash of a worker id into its 64-bit liveness lock key; not 0, so the keys
#: stay apart from the project's other ``hashtextextended(text, 0)`` advisory locks.
LIVENESS_SEED = 0x756C7472  # "ultr"
#: The liveness lock key of the worker id in the SQL expression ``{w}``.
_KEY = f"hashtextextended({{w}}, {LIVENESS_SEED})"
#: The keys of the liveness locks held right now in this database, as one CTE. A one-bigint
#: advisory lock shows in pg_locks as its high half in classid, low half in objid, objsubid 1.
_LIVE = """live AS MATERIALIZED (
    SELECT (l.classid::bigint << 32) | l.objid::bigint AS k FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))"""
#: The worker id of a claim (``claimed_by``) or of a lease (``holder``: worker id "/" run).
_WORKER = "split_part({c}, '/', 1)"
#: A row is free when nobody claimed it, its claim expired, or its claimer is gone (needs ``live``).
_FREE = ("({t}.claimed_by IS NULL OR {t}.claim_expires_at < now() OR "
         + _KEY.format(w="{t}.claimed_by") + " NOT IN (SELECT k FROM live))")
_CLAIM = "claimed_by = :me, claim_expires_at = now() + make_interval(secs => :lease)"


def claim_sessions(conn: sa.Connection, worker: str, lease_seconds: float, limit: int,
                   partition_key: str | None = None, exclude: Sequence[str] = ()) -> list[PendingSession]:
    """Claim up to ``limit`` sessions pending segmentation (``exclude``: ids this run already tried)."""
    where = "segmented = 0 AND " + _FREE.format(t="r") + " AND NOT (r.id = ANY(:skip))"
    params: dict[str, Any] = {"me": worker, "lease": float(lease_seconds), "limit": limit, "skip": list(exclude)}
    if partition_key is not None:
        where += " AND r.partition_key = :k"
        params["k"] = partition_key
    rows = conn.execute(sa.text(
        f"""
        WITH {_LIVE}
        UPDATE trajectory_records SET {_CLAIM}
        WHERE id IN (SELECT r.id FROM trajectory_records r WHERE {where}
                     ORDER BY r.updated_at, r.id LIMIT :limit FOR UPDATE SKIP LOCKED)
        RETURNING id AS record_id, agent_id, session_file, partition_key, content_hash, updated_at
        """), params).all()
    rows.sort(key=lambda r: (r.updated_at, r.record_id))
    return [PendingSession(r.record_id, r.agent_id, r.session_file, r.partition_key, r.content_hash) for r in rows]


def _claim_segments(conn: sa.Connection, worker: str, lease_seconds: float, limit: int, where: str,
                    params: dict[str, Any], exclude: Sequence[str]) -> list[SegmentRow]:
    params = {**params, "me": worker, "lease": float(lease_seconds), "limit": limit, "skip": list(exclude)}
    # The join only filters (a session pending re-segmentation may hold new messages under
    # old line ranges); the lock is taken on the segment rows alone.
    ids = conn.execute(sa.text(
        f"""
        WITH {_LIVE}
        UPDATE task_segments SET {_CLAIM}
        WHERE id IN (SELECT s.id FROM task_segments s
                     JOIN trajectory_records r ON r.agent_id = s.agent_id AND r.session_file = s.session_file
                     WHERE r.segmented = 1 AND {_FREE.format(t="s")} AND NOT (s.id = ANY(:skip)) AND {where}
                     ORDER BY s.created_at, s.id LIMIT :limit FOR UPDATE OF s SKIP LOCKED)
        RETURNING id
        """), params).scalars().all()
    if not ids:
        return []
    rows = conn.execute(sa.text(
        f"SELECT {_JOINED_SEG_COLS} FROM task_segments s "
        "JOIN trajectory_records r ON r.agent_id = s.agent_id AND r.session_file = s.session_file "
        "WHERE s.id = ANY(:ids) ORDER BY s.created_at, s.id"), {"ids": list(ids)})
    return [SegmentRow(**r._mapping) for r in rows]


def claim_unlabeled(conn: sa.Connection, worker: str, lease_seconds: float, limit: int,
                    agent_id: str | None = None, session_file: str | None = None,
                    exclude: Sequence[str] = ()) -> list[SegmentRow]:
    """Claim up to ``limit`` segments to label (of one session file when given)."""
    where, params = "s.labeled = 0", {}
    if agent_id is not None:
        where += " AND s.agent_id = :a AND s.session_file = :f"
        params = {"a": agent_id, "f": session_file}
    return _claim_segments(conn, worker, lease_seconds, limit, where, params, exclude)


def claim_extractable(conn: sa.Connection, worker: str, lease_seconds: float, limit: int, min_score: float,
                      partition_key: str | None = None, exclude: Sequence[str] = ()) -> list[SegmentRow]:
    """Claim up to ``limit`` segments to extract; the filter is ``segments.extractable_segments``'s."""
    where = ("s.labeled = 1 AND s.memory_extracted = 0 "
             "AND ((CAST(s.quality_metrics AS jsonb) -> 'summary' ->> 'overall_score')::float >= :min "
             "OR (CAST(s.quality_metrics AS jsonb) -> 'summary' ->> 'teaches_lesson') = 'true')")
    params: dict[str, Any] = {"min": min_score}
    if partition_key is not None:
        where += " AND r.partition_key = :k"
        params["k"] = partition_key
    return _claim_segments(conn, worker, lease_seconds, limit, where, params, exclude)


def release_session(conn: sa.Connection, record_id: str, worker: str) -> None:
    """Give a session back (it stays pending for the next run); only our own claim."""
    conn.execute(sa.text(
        "UPDATE trajectory_records SET claimed_by = NULL, claim_expires_at = NULL "
        "WHERE id = :id AND claimed_by = :me"), {"id": record_id, "me": worker})


def release_segment(conn: sa.Connection, segment_id: str, worker: str) -> None:
    conn.execute(sa.text(
        "UPDATE task_segments SET claimed_by = NULL, claim_expires_at = NULL "
        "WHERE id = :id AND claimed_by = :me"), {"id": segment_id, "me": worker})


# -- store-wide leases -------------------------------------------------------------------


def acquire_lease(conn: sa.Connection, name: str, holder: str, lease_seconds: float) -> str | None:
    """Take the lease ``name`` if free, expired or held by a worker that is gone. None =
    taken; else the live holder's id."""
    taken = conn.execute(sa.text(
        f"""
        WITH {_LIVE}
        INSERT INTO work_leases (name, holder, expires_at) VALUES (:n, :h, now() + make_interval(secs => :s))
        ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
                                         acquired_at = now()
        WHERE work_leases.expires_at < now()
           OR {_KEY.format(w=_WORKER.format(c="work_leases.holder"))} NOT IN (SELECT k FROM live)
        RETURNING holder
        """), {"n": name, "h": holder, "s": float(lease_seconds)}).scalar_one_or_none()
    if taken is not None:
        return None
    return conn.execute(sa.text("SELECT holder FROM work_leases WHERE name = :n"), {"n": name}).scalar_one_or_none() \
        or "another worker"


def renew_lease(conn: sa.Connection, name: str, holder: str, lease_seconds: float) -> bool:
    """Push our lease's expiry out again (a long run); False if it expired and was taken over."""
    return conn.execute(sa.text(
        "UPDATE work_leases SET expires_at = now() + make_interval(secs => :s) WHERE name = :n AND holder = :h"),
        {"n": name, "h": holder, "s": float(lease_seconds)}).rowcount == 1


def release_lease(conn: sa.Connection, name: str, holder: str) -> None:
    conn.execute(sa.text("DELETE FROM work_leases WHERE name = :n AND holder = :h"), {"n": name, "h": holder})


def live_claim_holder(conn: sa.Connection, other_than: str) -> str | None:
    """A live worker other than ``other_than`` holding an unexpired claim on a session or
    segment, if any: a store-wide step started now would miss what it is still producing."""
    alive = f"{_KEY.format(w='claimed_by')} IN (SELECT k FROM live)"
    return conn.execute(sa.text(
        f"""
        WITH {_LIVE}
        (SELECT claimed_by FROM trajectory_records
         WHERE claimed_by IS NOT NULL AND claimed_by <> :me AND claim_expires_at >= now() AND {alive} LIMIT 1)
        UNION ALL
        (SELECT claimed_by FROM task_segments
         WHERE claimed_by IS NOT NULL AND claimed_by <> :me AND claim_expires_at >= now() AND {alive} LIMIT 1)
        LIMIT 1
        """), {"me": other_than}).scalar_one_or_none()


def lease_holder(conn: sa.Connection, name: str) -> str | None:
    """Who holds the lease ``name``, if anyone: unexpired, and its holder alive."""
    return conn.execute(sa.text(
        f"WITH {_LIVE} SELECT holder FROM work_leases WHERE name = :n AND expires_at >= now() "
        f"AND {_KEY.format(w=_WORKER.format(c='holder'))} IN (SELECT k FROM live)"),
        {"n": name}).scalar_one_or_none()


# -- worker liveness ---------------------------------------------------------------------
# Run on the worker's own liveness connection (``ultron.claims``), in autocommit.


def prepare_liveness_session(conn: sa.Connection) -> None:
    """Settings of the liveness session: the server probes the client every 10 s after 30 s
    of silence and drops the session (and the lock) after 3 unanswered probes, so the claims
    of a machine that vanished free within about a minute instead of the OS's two hours; and
    no idle timeout of the server's configuration ends this deliberately idle session."""
    conn.execute(sa.text("SET tcp_keepalives_idle = 30; SET tcp_keepalives_interval = 10; "
                         "SET tcp_keepalives_count = 3; SET idle_session_timeout = 0; "
                         "SET idle_in_transaction_session_timeout = 0"))


def try_hold_liveness(conn: sa.Connection, worker: str) -> bool:
    """Take ``worker``'s liveness lock for this session; False if another session holds it."""
    return bool(conn.execute(sa.text(f"SELECT pg_try_advisory_lock({_KEY.format(w=':w')})"),
                             {"w": worker}).scalar_one())


def ping(conn: sa.Connection) -> None:
    """One round trip: raises when the session is gone (and with it the lock)."""
    conn.execute(sa.text("SELECT 1"))


def live_workers(conn: sa.Connection, workers: Sequence[str]) -> set[str]:
    """Those of ``workers`` whose liveness lock is held in this database."""
    return set(conn.execute(sa.text(
        f"WITH {_LIVE} SELECT w FROM unnest(CAST(:ws AS text[])) AS w "
        f"WHERE {_KEY.format(w='w')} IN (SELECT k FROM live)"),
        {"ws": list(workers)}).scalars())
