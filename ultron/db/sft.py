"""SQL for the SFT export: which segments qualify, and their messages in batches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import sqlalchemy as sa

from ultron.sessions.messages import Message


@dataclass(frozen=True)
class SFTCandidate:
    """One segment chosen for export; ``copies`` counts the eligible segments sharing its
    fingerprint (this one included), so the manifest can say how many were deduplicated."""

    id: str
    agent_id: str
    session_file: str
    start_line: int
    end_line: int
    fingerprint: str
    topic: str | None
    score: float
    task_type: str | None
    summary: dict[str, Any]
    copies: int


# The score is read from the stored JSON by Postgres. quality_metrics is a TEXT column, so a
# row that is not a JSON object, or whose overall_score is not a number, is simply not
# eligible instead of failing the whole query on a cast error.
_SELECT = """
WITH labeled AS (
    SELECT s.id, s.agent_id, s.session_file, s.start_line, s.end_line, s.fingerprint, s.topic,
           CASE WHEN s.quality_metrics IS JSON OBJECT
                THEN CAST(s.quality_metrics AS jsonb) -> 'summary' END AS summary
    FROM task_segments s
    WHERE s.labeled = 1 AND s.quality_metrics IS NOT NULL
      AND EXISTS (SELECT 1 FROM trajectory_records r
                  WHERE r.agent_id = s.agent_id AND r.session_file = s.session_file AND r.segmented = 1)
), scored AS (
    SELECT *,
           CASE WHEN jsonb_typeof(summary -> 'overall_score') = 'number'
                THEN CAST(summary ->> 'overall_score' AS float) END AS score,
           summary ->> 'task_type' AS task_type
    FROM labeled
), eligible AS (
    SELECT *,
           count(*) OVER (PARTITION BY fingerprint) AS copies,
           row_number() OVER (PARTITION BY fingerprint ORDER BY score DESC, id) AS rank
    FROM scored
    WHERE score >= :min {task_filter}
)
SELECT id, agent_id, session_file, start_line, end_line, fingerprint, topic, score, task_type, summary, copies
FROM eligible WHERE rank = 1
ORDER BY score DESC, id
{limit}
"""


def select_candidates(conn: sa.Connection, *, min_score: float, task_type: str | None = None,
                      limit: int | None = None) -> list[SFTCandidate]:
    """Eligible segments of current segmentations, one per fingerprint (its best score),
    best first. Dedup happens before the limit, so ``limit`` counts distinct contents."""
    params: dict[str, Any] = {"min": float(min_score)}
    task_filter = ""
    if task_type is not None:
        task_filter = "AND task_type = :tt"
        params["tt"] = task_type
    limit_sql = ""
    if limit is not None:
        limit_sql = "LIMIT :limit"
        params["limit"] = int(limit)
    rows = conn.execute(sa.text(_SELECT.format(task_filter=task_filter, limit=limit_sql)), params)
    return [SFTCandidate(**{**r._mapping, "summary": r.summary or {}}) for r in rows]


def messages_for(conn: sa.Connection, segments: Sequence[Any]) -> dict[str, list[Message]]:
    """Messages of many segments in one query (a segment is the lines in its range of its
    session), keyed by segment id; objects need id, agent_id, session_file, start_line, end_line."""
    if not segments:
        return {}
    rows = conn.execute(sa.text(
        """
        SELECT s.seg_id, m.line, m.role, m.content, m.reasoning_content, m.tool_calls, m.tool_call_id, m.name,
               m.is_sidechain, m.source_id
        FROM unnest(CAST(:ids AS text[]), CAST(:a AS text[]), CAST(:f AS text[]), CAST(:s AS int[]),
                    CAST(:e AS int[])) AS s(seg_id, agent_id, session_file, start_line, end_line)
        JOIN trajectory_records r ON r.agent_id = s.agent_id AND r.session_file = s.session_file
        JOIN session_messages m ON m.record_id = r.id AND m.line BETWEEN s.start_line AND s.end_line
        ORDER BY s.seg_id, m.seq
        """), {"ids": [s.id for s in segments], "a": [s.agent_id for s in segments],
               "f": [s.session_file for s in segments], "s": [s.start_line for s in segments],
               "e": [s.end_line for s in segments]})
    out: dict[str, list[Message]] = {s.id: [] for s in segments}
    for r in rows:  # every column but seg_id is a Message field of the same name
        f = dict(r._mapping)
        out[f.pop("seg_id")].append(Message(**f))
    return out
