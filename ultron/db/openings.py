"""The sentences sessions open with, counted per session: how a harness's standing
instructions are told from what someone said once.

Only 64-bit hashes of the sentences are stored (``RepeatIndex.key``), never their text,
and each row belongs to its session (``ON DELETE CASCADE``): forgetting a session
forgets its counts too. ``(key_hash, record_id)`` is the primary key, so recording a
session twice (a re-run) changes nothing.
"""

from __future__ import annotations

from typing import Iterable

import sqlalchemy as sa


def record(conn: sa.Connection, agent_id: str, session_file: str, keys: Iterable[int]) -> None:
    """Count the session (agent, file) once for each of ``keys``."""
    ks = sorted({int(k) for k in keys})
    if ks:
        conn.execute(sa.text(
            "INSERT INTO opening_sentences (key_hash, record_id) "
            "SELECT k, r.id FROM unnest(CAST(:ks AS bigint[])) AS k, trajectory_records r "
            "WHERE r.agent_id = :a AND r.session_file = :f ON CONFLICT DO NOTHING"),
            {"ks": ks, "a": agent_id, "f": session_file})


def session_counts(conn: sa.Connection, keys: Iterable[int]) -> dict[int, int]:
    """How many sessions opened with each of ``keys``."""
    ks = sorted({int(k) for k in keys})
    if not ks:
        return {}
    rows = conn.execute(sa.text("SELECT key_hash, count(*) FROM opening_sentences "
                                "WHERE key_hash = ANY(CAST(:ks AS bigint[])) GROUP BY key_hash"), {"ks": ks})
    return {int(k): int(n) for k, n in rows}
