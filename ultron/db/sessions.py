"""SQL for session files: trajectory_records, session_messages, parse_problems, raw_user_uploads.

Functions take an open SQLAlchemy connection so the caller decides the
transaction: ingestion writes one file per transaction, so a failure rolls back
that file only.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import sqlalchemy as sa

from ultron.sessions.messages import Message
from ultron.sessions.parsing import Problem

MESSAGE_COLUMNS = (
    "record_id", "seq", "line", "role", "content", "reasoning_content",
    "tool_calls", "tool_call_id", "name", "is_sidechain", "source_id",
)
TABLES = ("trajectory_records", "session_messages", "parse_problems", "raw_user_uploads", "task_segments",
          "memory_records", "memory_contributions", "knowledge_clusters", "skills", "feedback_events",
          "bundle_serves", "memory_files")


@dataclass(frozen=True)
class SessionRecord:
    id: str
    agent_id: str
    session_file: str
    partition_key: str | None
    segmented: int
    content_hash: str
    size_bytes: int
    mtime_ns: int | None
    message_count: int
    problem_count: int
    session_format: str | None
    role_counts: dict[str, int]


_RECORD_COLS = (
    "id, agent_id, session_file, partition_key, segmented, content_hash, size_bytes, mtime_ns, "
    "message_count, problem_count, session_format, role_counts"
)


def _record(row: Any) -> SessionRecord:
    return SessionRecord(**row._mapping)


def get_record(conn: sa.Connection, agent_id: str, session_file: str) -> SessionRecord | None:
    row = conn.execute(
        sa.text(f"SELECT {_RECORD_COLS} FROM trajectory_records WHERE agent_id = :a AND session_file = :f"),
        {"a": agent_id, "f": session_file},
    ).first()
    return _record(row) if row else None


def list_records(conn: sa.Connection) -> list[SessionRecord]:
    rows = conn.execute(sa.text(f"SELECT {_RECORD_COLS} FROM trajectory_records ORDER BY session_file"))
    return [_record(r) for r in rows]


def lock_record_key(conn: sa.Connection, agent_id: str, session_file: str) -> None:
    """Serialise concurrent ingests of the same file (sensor run + CLI) for this transaction."""
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": f"{agent_id}\x1f{session_file}"})


def upsert_record(
    conn: sa.Connection, *, agent_id: str, session_file: str, partition_key: str | None,
    content_hash: str, size_bytes: int, mtime_ns: int | None,
) -> str:
    """Insert or refresh the row and mark it pending segmentation. Returns its id."""
    return conn.execute(
        sa.text(
            """
            INSERT INTO trajectory_records (id, agent_id, session_file, partition_key, segmented,
                                            content_hash, size_bytes, mtime_ns)
            VALUES (:id, :a, :f, :k, 0, :h, :s, :m)
            ON CONFLICT (agent_id, session_file) DO UPDATE SET
                partition_key = EXCLUDED.partition_key, segmented = 0,
                content_hash = EXCLUDED.content_hash, size_bytes = EXCLUDED.size_bytes,
                mtime_ns = EXCLUDED.mtime_ns, updated_at = now()
            RETURNING id
            """
        ),
        {"id": str(uuid.uuid4()), "a": agent_id, "f": session_file, "k": partition_key,
         "h": content_hash, "s": size_bytes, "m": mtime_ns},
    ).scalar_one()


def finish_record(
    conn: sa.Connection, record_id: str, *, content_hash: str, size_bytes: int, line_count: int,
    message_count: int, problem_count: int, session_format: str | None, role_counts: dict[str, int],
    agent_session_id: str | None = None,
) -> None:
    """``agent_session_id``: the agent's own id for the session (``ultron.sessions.identity``);
    bundles served with it are credited with this session's outcome."""
    conn.execute(
        sa.text(
            """
            UPDATE trajectory_records SET content_hash = :h, size_bytes = :s, line_count = :l,
                message_count = :n, problem_count = :p, session_format = :fmt,
                role_counts = CAST(:roles AS jsonb), agent_session_id = :sid, updated_at = now()
            WHERE id = :id
            """
        ),
        {"id": record_id, "h": content_hash, "s": size_bytes, "l": line_count, "n": message_count,
         "p": problem_count, "fmt": session_format, "roles": json.dumps(role_counts), "sid": agent_session_id},
    )


def touch_mtime(conn: sa.Connection, record_id: str, mtime_ns: int) -> None:
    conn.execute(sa.text("UPDATE trajectory_records SET mtime_ns = :m WHERE id = :id"), {"id": record_id, "m": mtime_ns})


def clear_parsed(conn: sa.Connection, record_id: str) -> None:
    conn.execute(sa.text("DELETE FROM session_messages WHERE record_id = :id"), {"id": record_id})
    conn.execute(sa.text("DELETE FROM parse_problems WHERE record_id = :id"), {"id": record_id})


def copy_messages(conn: sa.Connection, record_id: str, messages: Iterable[Message]) -> int:
    """Stream messages into session_messages with COPY; returns how many were written."""
    raw = conn.connection.driver_connection
    n = 0
    with raw.cursor() as cur:
        with cur.copy(f"COPY session_messages ({', '.join(MESSAGE_COLUMNS)}) FROM STDIN") as copy:
            for msg in messages:
                copy.write_row((
                    record_id, n, msg.line, msg.role, msg.content, msg.reasoning_content,
                    json.dumps(msg.tool_calls, ensure_ascii=False) if msg.tool_calls else None,
                    msg.tool_call_id, msg.name, msg.is_sidechain, msg.source_id,
                ))
                n += 1
    return n


def insert_problems(conn: sa.Connection, record_id: str, problems: list[Problem]) -> None:
    if problems:
        conn.execute(
            sa.text("INSERT INTO parse_problems (record_id, seq, line, error) VALUES (:id, :seq, :line, :error)"),
            [{"id": record_id, "seq": i, "line": p.line, "error": p.error} for i, p in enumerate(problems)],
        )


def get_problems(conn: sa.Connection, record_id: str) -> list[Problem]:
    rows = conn.execute(
        sa.text("SELECT line, error FROM parse_problems WHERE record_id = :id ORDER BY seq"), {"id": record_id}
    )
    return [Problem(r.line, r.error) for r in rows]


def iter_messages(conn: sa.Connection, record_id: str, *, limit: int | None = None) -> Iterator[Message]:
    sql = (
        "SELECT line, role, content, reasoning_content, tool_calls, tool_call_id, name, is_sidechain, source_id "
        "FROM session_messages WHERE record_id = :id ORDER BY seq"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    for r in conn.execute(sa.text(sql), {"id": record_id}):
        yield Message(**r._mapping)


def archive_file(
    conn: sa.Connection, *, agent_id: str, source_path: str, content_hash: str, content: bytes,
) -> None:
    """Keep the raw bytes of a session file: one row per file, holding its latest version,
    so a file that grows all day does not pile up a copy per version."""
    conn.execute(
        sa.text(
            """
            INSERT INTO raw_user_uploads (id, kind, agent_id, source_path, content_hash, size_bytes, content)
            VALUES (:id, 'ingest_file', :a, :p, :h, :s, :c)
            ON CONFLICT (agent_id, source_path) WHERE kind = 'ingest_file' DO UPDATE SET
                content_hash = EXCLUDED.content_hash, size_bytes = EXCLUDED.size_bytes,
                content = EXCLUDED.content, created_at = now()
            """
        ),
        {"id": str(uuid.uuid4()), "a": agent_id, "p": source_path, "h": content_hash,
         "s": len(content), "c": content},
    )


def archive_text(conn: sa.Connection, *, agent_id: str | None, content_hash: str, content: bytes) -> None:
    """One ingest_text row per distinct text."""
    conn.execute(
        sa.text(
            """
            INSERT INTO raw_user_uploads (id, kind, agent_id, source_path, content_hash, size_bytes, content)
            VALUES (:id, 'ingest_text', :a, NULL, :h, :s, :c)
            ON CONFLICT (content_hash) WHERE kind = 'ingest_text' DO NOTHING
            """
        ),
        {"id": str(uuid.uuid4()), "a": agent_id, "h": content_hash, "s": len(content), "c": content},
    )


def purge_raw_archive(conn: sa.Connection, older_than_days: float) -> int:
    return conn.execute(sa.text(
        "DELETE FROM raw_user_uploads WHERE created_at < now() - make_interval(secs => :d * 86400)"),
        {"d": older_than_days}).rowcount


def table_counts(conn: sa.Connection) -> dict[str, int]:
    return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES}


def pending_counts(conn: sa.Connection) -> dict[str, int]:
    row = conn.execute(
        sa.text(
            """
            SELECT
              (SELECT count(*) FROM trajectory_records WHERE segmented = 0) AS sessions_pending_segmentation,
              (SELECT count(*) FROM task_segments WHERE labeled = 0) AS segments_pending_labeling,
              (SELECT count(*) FROM task_segments WHERE labeled = 1 AND memory_extracted = 0)
                  AS segments_pending_extraction
            """
        )
    ).one()
    return dict(row._mapping)


def stored_partition_keys(conn: sa.Connection) -> set[str]:
    """The partition keys of every session row: what the Dagster partitions should mirror."""
    return set(conn.execute(sa.text(
        "SELECT partition_key FROM trajectory_records WHERE partition_key IS NOT NULL")).scalars())
