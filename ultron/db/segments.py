"""SQL for task_segments (and archiving the memories of a replaced segment)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ultron.sessions.messages import Message


@dataclass(frozen=True)
class PendingSession:
    record_id: str
    agent_id: str
    session_file: str
    partition_key: str | None
    content_hash: str


@dataclass(frozen=True)
class SegmentRow:
    id: str
    agent_id: str
    session_file: str
    segment_index: int
    start_line: int
    end_line: int
    fingerprint: str
    topic: str | None
    quality_metrics: str | None
    labeled: int
    memory_extracted: int
    #: The session's partition key; filled only by the queries that join trajectory_records
    #: (unlabeled_segments, extractable_segments), None elsewhere.
    partition_key: str | None = None

    @property
    def metrics(self) -> dict[str, Any] | None:
        return json.loads(self.quality_metrics) if self.quality_metrics else None


_SEG_COLUMNS = ("id", "agent_id", "session_file", "segment_index", "start_line", "end_line", "fingerprint", "topic",
                "quality_metrics", "labeled", "memory_extracted")
_SEG_COLS = ", ".join(_SEG_COLUMNS)
#: The same columns of ``task_segments s``, plus the partition key of the joined ``trajectory_records r``.
_JOINED_SEG_COLS = ", ".join(f"s.{c}" for c in _SEG_COLUMNS) + ", r.partition_key"


def pending_sessions(conn: sa.Connection, limit: int, partition_key: str | None = None) -> list[PendingSession]:
    sql = ("SELECT id AS record_id, agent_id, session_file, partition_key, content_hash FROM trajectory_records "
           "WHERE segmented = 0")
    params: dict[str, Any] = {"limit": limit}
    if partition_key is not None:
        sql += " AND partition_key = :k"
        params["k"] = partition_key
    rows = conn.execute(sa.text(sql + " ORDER BY updated_at, id LIMIT :limit"), params)
    return [PendingSession(**r._mapping) for r in rows]


def session_by_partition(conn: sa.Connection, partition_key: str) -> PendingSession | None:
    row = conn.execute(sa.text(
        "SELECT id AS record_id, agent_id, session_file, partition_key, content_hash FROM trajectory_records "
        "WHERE partition_key = :k ORDER BY updated_at DESC LIMIT 1"), {"k": partition_key}).first()
    return PendingSession(**row._mapping) if row else None


def segments_for(conn: sa.Connection, agent_id: str, session_file: str) -> list[SegmentRow]:
    rows = conn.execute(sa.text(
        f"SELECT {_SEG_COLS} FROM task_segments WHERE agent_id = :a AND session_file = :f ORDER BY segment_index"),
        {"a": agent_id, "f": session_file})
    return [SegmentRow(**r._mapping) for r in rows]


def unlabeled_segments(conn: sa.Connection, limit: int, agent_id: str | None = None,
                       session_file: str | None = None) -> list[SegmentRow]:
    # Only segments of sessions whose segmentation is current: a session pending
    # re-segmentation may have new messages under the old line ranges. (agent_id,
    # session_file) is unique in trajectory_records, so the join adds no rows.
    sql = (f"SELECT {_JOINED_SEG_COLS} FROM task_segments s "
           "JOIN trajectory_records r ON r.agent_id = s.agent_id AND r.session_file = s.session_file "
           "WHERE s.labeled = 0 AND r.segmented = 1")
    params: dict[str, Any] = {"limit": limit}
    if agent_id is not None:
        sql += " AND s.agent_id = :a AND s.session_file = :f"
        params.update(a=agent_id, f=session_file)
    rows = conn.execute(sa.text(sql + " ORDER BY s.created_at, s.id LIMIT :limit"), params)
    return [SegmentRow(**r._mapping) for r in rows]


#: a session's messages, by the segment's agent and file; the caller adds the line range
_MESSAGES = """
    SELECT m.line, m.role, m.content, m.reasoning_content, m.tool_calls, m.tool_call_id, m.name,
           m.is_sidechain, m.source_id
    FROM session_messages m JOIN trajectory_records r ON r.id = m.record_id
    WHERE r.agent_id = :a AND r.session_file = :f AND """


def segment_messages(conn: sa.Connection, seg: SegmentRow) -> list[Message]:
    """The segment's messages: the session's messages whose source line is in its range."""
    rows = conn.execute(sa.text(_MESSAGES + "m.line BETWEEN :s AND :e ORDER BY m.seq"),
                        {"a": seg.agent_id, "f": seg.session_file, "s": seg.start_line, "e": seg.end_line})
    return [Message(**r._mapping) for r in rows]


def message_after(conn: sa.Connection, seg: SegmentRow) -> Message | None:
    """The session's first message after the segment (the next task's opening), if any."""
    row = conn.execute(sa.text(_MESSAGES + "m.line > :e ORDER BY m.seq LIMIT 1"),
                       {"a": seg.agent_id, "f": seg.session_file, "e": seg.end_line}).first()
    return Message(**row._mapping) if row is not None else None


def system_prompt(conn: sa.Connection, seg: SegmentRow) -> str:
    """The session's system prompt (its first system message), whichever segment this is."""
    row = conn.execute(sa.text(_MESSAGES + "m.role = 'system' ORDER BY m.seq LIMIT 1"),
                       {"a": seg.agent_id, "f": seg.session_file}).first()
    return row.content if row is not None and isinstance(row.content, str) else ""


def current_hash(conn: sa.Connection, record_id: str) -> str | None:
    return conn.execute(sa.text("SELECT content_hash FROM trajectory_records WHERE id = :id"),
                        {"id": record_id}).scalar_one_or_none()


def delete_segment(conn: sa.Connection, segment_id: str) -> None:
    conn.execute(sa.text("DELETE FROM task_segments WHERE id = :id"), {"id": segment_id})


def archive_memories_by_tag(conn: sa.Connection, tag: str) -> int:
    return conn.execute(sa.text(
        "UPDATE memory_records SET status = 'archived', updated_at = now() "
        "WHERE status = 'active' AND tags @> ARRAY[CAST(:t AS text)]"), {"t": tag}).rowcount


def insert_segment(conn: sa.Connection, *, agent_id: str, session_file: str, segment_index: int,
                   start_line: int, end_line: int, fingerprint: str, topic: str) -> str | None:
    """Returns the new id, or None when this file already has a segment with this fingerprint."""
    return conn.execute(sa.text(
        """
        INSERT INTO task_segments (id, agent_id, session_file, segment_index, start_line, end_line, fingerprint, topic)
        VALUES (:id, :a, :f, :i, :s, :e, :fp, :t)
        ON CONFLICT (agent_id, session_file, fingerprint) DO NOTHING
        RETURNING id
        """), {"id": str(uuid.uuid4()), "a": agent_id, "f": session_file, "i": segment_index,
               "s": start_line, "e": end_line, "fp": fingerprint, "t": topic}).scalar_one_or_none()


def move_segment(conn: sa.Connection, segment_id: str, segment_index: int, start_line: int, end_line: int) -> None:
    conn.execute(sa.text(
        "UPDATE task_segments SET segment_index = :i, start_line = :s, end_line = :e, updated_at = now() "
        "WHERE id = :id AND (segment_index, start_line, end_line) IS DISTINCT FROM (:i, :s, :e)"),
        {"id": segment_id, "i": segment_index, "s": start_line, "e": end_line})


def mark_segmented(conn: sa.Connection, record_id: str) -> None:
    # Done clears the claim (ultron.db.claims) in the same statement.
    conn.execute(sa.text("UPDATE trajectory_records SET segmented = 1, claimed_by = NULL, claim_expires_at = NULL, "
                         "updated_at = now() WHERE id = :id"), {"id": record_id})


@dataclass(frozen=True)
class SessionScoring:
    """Where a session's scoring stands, for attributing its outcome."""

    agent_session_id: str | None
    segmented: int
    updated_at: Any
    segments: int
    unlabeled: int

    @property
    def complete(self) -> bool:
        return self.segmented == 1 and self.segments > 0 and self.unlabeled == 0


def session_scoring(conn: sa.Connection, agent_id: str, session_file: str) -> SessionScoring | None:
    row = conn.execute(sa.text(
        """SELECT r.agent_session_id, r.segmented, r.updated_at,
                  (SELECT count(*) FROM task_segments s WHERE s.agent_id = r.agent_id
                      AND s.session_file = r.session_file) AS segments,
                  (SELECT count(*) FROM task_segments s WHERE s.agent_id = r.agent_id
                      AND s.session_file = r.session_file AND s.labeled = 0) AS unlabeled
           FROM trajectory_records r WHERE r.agent_id = :a AND r.session_file = :f"""),
        {"a": agent_id, "f": session_file}).first()
    return SessionScoring(**row._mapping) if row else None


def save_label(conn: sa.Connection, segment_id: str, metrics: dict[str, Any]) -> None:
    conn.execute(sa.text(
        "UPDATE task_segments SET quality_metrics = :q, labeled = 1, claimed_by = NULL, claim_expires_at = NULL, "
        "updated_at = now() WHERE id = :id"),
        {"id": segment_id, "q": json.dumps(metrics)})


def segment_stats(conn: sa.Connection, memory_threshold: float, sft_threshold: float,
                  excellent_threshold: float) -> dict[str, Any]:
    row = conn.execute(sa.text(
        """
        WITH s AS (
            SELECT labeled, memory_extracted,
                   CASE WHEN labeled = 1 AND quality_metrics IS NOT NULL
                        THEN (CAST(quality_metrics AS jsonb) -> 'summary' ->> 'overall_score')::float END AS score
            FROM task_segments)
        SELECT count(*) AS total,
               count(*) FILTER (WHERE labeled = 1) AS labeled,
               count(*) FILTER (WHERE score >= :mem) AS memory_eligible,
               count(*) FILTER (WHERE score >= :sft) AS sft_eligible,
               count(*) FILTER (WHERE memory_extracted = 1) AS memory_extracted,
               count(*) FILTER (WHERE score >= :exc) AS excellent,
               count(*) FILTER (WHERE score >= :mem AND score < :exc) AS usable,
               count(*) FILTER (WHERE score < :mem) AS weak
        FROM s
        """), {"mem": memory_threshold, "sft": sft_threshold, "exc": excellent_threshold}).one()
    return dict(row._mapping)


def session_counts(conn: sa.Connection) -> dict[str, int]:
    row = conn.execute(sa.text(
        "SELECT count(*) AS total, count(*) FILTER (WHERE segmented = 1) AS segmented, "
        "count(*) FILTER (WHERE segmented = 0) AS pending FROM trajectory_records")).one()
    return dict(row._mapping)


def message_lines(conn: sa.Connection, agent_id: str, session_file: str) -> list[int]:
    return list(conn.execute(sa.text(
        "SELECT m.line FROM session_messages m JOIN trajectory_records r ON r.id = m.record_id "
        "WHERE r.agent_id = :a AND r.session_file = :f"), {"a": agent_id, "f": session_file}).scalars())


def extractable_segments(conn: sa.Connection, limit: int, min_score: float,
                         partition_key: str | None = None) -> list[SegmentRow]:
    """Labeled, not yet extracted, past the coarse score filter or teaching a lesson in the
    user's words (both read from the JSON; ultron.memory.selection says why)."""
    sql = (f"SELECT {_JOINED_SEG_COLS} FROM task_segments s "
           "JOIN trajectory_records r ON r.agent_id = s.agent_id AND r.session_file = s.session_file "
           "WHERE s.labeled = 1 AND s.memory_extracted = 0 AND r.segmented = 1 "
           "AND ((CAST(s.quality_metrics AS jsonb) -> 'summary' ->> 'overall_score')::float >= :min "
           "OR (CAST(s.quality_metrics AS jsonb) -> 'summary' ->> 'teaches_lesson') = 'true')")
    params: dict[str, Any] = {"min": min_score, "limit": limit}
    if partition_key is not None:
        sql += " AND r.partition_key = :k"
        params["k"] = partition_key
    return [SegmentRow(**r._mapping) for r in conn.execute(sa.text(sql + " ORDER BY s.created_at, s.id LIMIT :limit"),
                                                           params)]


def claim_for_extraction(conn: sa.Connection, segment_id: str) -> bool:
    """Lock the segment row for this transaction; False if it was extracted meanwhile."""
    return conn.execute(sa.text(
        "SELECT 1 FROM task_segments WHERE id = :id AND memory_extracted = 0 FOR UPDATE"), {"id": segment_id}
    ).first() is not None


def mark_extracted(conn: sa.Connection, segment_id: str) -> None:
    conn.execute(sa.text("UPDATE task_segments SET memory_extracted = 1, claimed_by = NULL, claim_expires_at = NULL, "
                         "updated_at = now() WHERE id = :id"), {"id": segment_id})
