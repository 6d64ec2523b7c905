"""``ingest(paths, agent_id)``: session files into trajectory_records + parsed messages.

Per file, in one transaction: hash the bytes; stop if the stored hash matches
(re-ingest is a no-op); otherwise stream-parse into ``session_messages``, record
the problems, archive the raw bytes (<= 10 MB, in a savepoint so an archive
failure never blocks ingestion) and mark the session pending segmentation.
Any failure rolls back that file only and is reported with its location.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ultron.db import sessions as store
from ultron.db.database import Database
from ultron.sessions.discovery import expand_paths, inbox_agent_id, partition_key, scan_inbox, validate_agent_id
from ultron.sessions.identity import agent_session_id
from ultron.sessions.messages import Message
from ultron.sessions.parsing import FileRejected, Problem, SessionParser
from ultron.settings import Settings

log = logging.getLogger("ultron.ingest")

STATUSES = ("new", "unchanged", "changed", "skipped", "failed")
_HASH_CHUNK = 1 << 20


@dataclass
class FileReport:
    path: str
    status: str
    agent_id: str | None = None
    messages: int = 0
    problems: list[Problem] = field(default_factory=list)
    partition_key: str | None = None
    record_id: str | None = None
    session_format: str | None = None
    size_bytes: int = 0
    roles: dict[str, int] = field(default_factory=dict)
    archived: bool = False
    archive_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "status": self.status, "agent_id": self.agent_id,
            "messages": self.messages, "problems": [p.to_dict() for p in self.problems],
            "partition_key": self.partition_key, "record_id": self.record_id,
            "format": self.session_format, "size_bytes": self.size_bytes, "roles": self.roles,
            "archived": self.archived, "archive_error": self.archive_error,
        }


@dataclass
class IngestReport:
    files: list[FileReport]

    @property
    def totals(self) -> dict[str, int]:
        by_status = Counter(f.status for f in self.files)
        out = {"files": len(self.files), **{s: by_status.get(s, 0) for s in STATUSES}}
        out["messages"] = sum(f.messages for f in self.files if f.status in ("new", "changed", "unchanged"))
        out["problems"] = sum(len(f.problems) for f in self.files)
        return out

    def to_dict(self) -> dict[str, Any]:
        totals = self.totals
        return {
            "files": [f.to_dict() for f in self.files],
            "totals": totals,
            "total_files": totals["files"],
            # The seed's field: .jsonl ingestion creates no memories directly.
            "total_memories": 0,
        }


class IngestService:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings

    def ingest(self, paths: Iterable[str | os.PathLike[str]] | str, agent_id: str,
               progress: Callable[[int, int, str], None] | None = None) -> IngestReport:
        """``progress(done, total, path)`` is called after each file (passed-over paths
        included); the paths are expanded first so that ``total`` is known from the start."""
        validate_agent_id(agent_id)
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        found_all = list(expand_paths(paths))
        reports = []
        for done, found in enumerate(found_all, 1):
            if found.status != "ok":
                reports.append(FileReport(str(found.path), found.status, agent_id, problems=[Problem(None, found.reason or "")]))
            else:
                reports.append(self.ingest_file(found.path, agent_id))
            if progress is not None:
                progress(done, len(found_all), str(found.path))
        return IngestReport(reports)

    def refresh(self) -> IngestReport:
        """Re-ingest whatever the sensor may have missed: known files that changed on
        disk since their last ingest, and inbox files never ingested.

        Driven by stat results against stored (size, mtime), so it reads only the
        files that need it; ingestion's hash check still guards against touch-only changes.
        """
        with self.db.engine.connect() as conn:
            records = store.list_records(conn)
        known = {(r.agent_id, r.session_file) for r in records}
        reports: list[FileReport] = []
        for rec in records:
            path = Path(rec.session_file)
            try:
                st = path.stat()
            except OSError:
                continue  # the file is gone; what was ingested stays
            if st.st_size != rec.size_bytes or st.st_mtime_ns != rec.mtime_ns:
                reports.append(self.ingest_file(path, rec.agent_id))
        for inbox in self.settings.inbox:
            for path, _mtime, _size in scan_inbox(inbox):
                agent_id = inbox_agent_id(path, inbox, self.settings.default_agent_id)
                if (agent_id, str(path)) not in known:
                    reports.append(self.ingest_file(path, agent_id))
        return IngestReport(reports)

    def ingest_file(self, path: Path, agent_id: str) -> FileReport:
        report = FileReport(str(path), "failed", agent_id)
        try:
            report.partition_key = partition_key(agent_id, path, self.settings.inbox)
        except ValueError as exc:
            report.problems = [Problem(None, str(exc))]
            return report
        try:
            self._ingest_file(path, agent_id, report)
        except _NothingUsable as exc:
            report.status = "failed"
            report.problems = report.problems + [Problem(None, str(exc))]
        except FileRejected as exc:
            report.status, report.problems = "failed", [Problem(None, str(exc))]
        except OSError as exc:
            report.status, report.problems = "failed", [Problem(None, f"cannot read file: {exc.strerror or exc}")]
        except Exception as exc:  # noqa: BLE001 - one file's failure must not stop the others
            log.exception("ingest of %s failed", path)
            report.status = "failed"
            report.problems = report.problems + [Problem(None, f"{type(exc).__name__}: {exc}")]
        if report.status == "failed":
            report.messages = 0
            log.warning("%s: failed: %s", path, "; ".join(p.error for p in report.problems[:3]))
        return report

    def _ingest_file(self, path: Path, agent_id: str, report: FileReport) -> None:
        st = path.stat()
        report.size_bytes = st.st_size
        if st.st_size == 0:
            report.status, report.problems = "skipped", [Problem(None, "empty file")]
            return
        digest = _sha256_file(path)
        with self.db.engine.begin() as conn:
            store.lock_record_key(conn, agent_id, str(path))
            existing = store.get_record(conn, agent_id, str(path))
            if existing is not None and existing.content_hash == digest:
                if existing.mtime_ns != st.st_mtime_ns:
                    store.touch_mtime(conn, existing.id, st.st_mtime_ns)
                report.status = "unchanged"
                report.record_id = existing.id
                report.messages = existing.message_count
                report.session_format = existing.session_format
                report.roles = dict(existing.role_counts)
                report.problems = store.get_problems(conn, existing.id)
                return
            record_id = store.upsert_record(
                conn, agent_id=agent_id, session_file=str(path), partition_key=report.partition_key,
                content_hash=digest, size_bytes=st.st_size, mtime_ns=st.st_mtime_ns,
            )
            if existing is not None:
                store.clear_parsed(conn, record_id)
            parser = SessionParser(
                max_line_bytes=self.settings.max_line_bytes, max_problems=self.settings.max_problems_per_file
            )
            # Parsed messages are stored redacted; only the raw archive keeps the original bytes.
            from ultron.redaction import get_redactor

            with open(path, "rb") as fh:
                count = store.copy_messages(conn, record_id, redacted(parser.messages(fh), get_redactor()))
            problems = parser.finish_problems()
            report.problems = problems
            if count == 0 and parser.stats.problem_total > 0:
                # Nothing usable at all: keep whatever an earlier version stored.
                raise _NothingUsable()
            store.insert_problems(conn, record_id, problems)
            store.finish_record(
                conn, record_id, content_hash=parser.sha256, size_bytes=parser.stats.bytes_read,
                line_count=parser.stats.lines, message_count=count, problem_count=parser.stats.problem_total,
                session_format=parser.stats.format, role_counts=dict(parser.stats.roles),
                agent_session_id=agent_session_id(parser.stats.session_id, path),
            )
            report.status = "changed" if existing is not None else "new"
            report.record_id = record_id
            report.messages = count
            report.session_format = parser.stats.format
            report.roles = dict(parser.stats.roles)
            report.size_bytes = parser.stats.bytes_read
            if self.settings.raw_archive and parser.stats.bytes_read <= self.settings.archive_max_bytes:
                self._archive(conn, path, agent_id, parser.sha256, report)
        log.info("%s: %s, %d messages, %d problems", path, report.status, report.messages, len(report.problems))

    def _archive(self, conn, path: Path, agent_id: str, digest: str, report: FileReport) -> None:
        try:
            with conn.begin_nested():
                content = path.read_bytes()
                if hashlib.sha256(content).hexdigest() != digest:
                    raise RuntimeError("file changed while it was being ingested; not archived")
                store.archive_file(conn, agent_id=agent_id, source_path=str(path), content_hash=digest, content=content)
            report.archived = True
        except Exception as exc:  # noqa: BLE001 - archiving is best effort by design
            report.archive_error = f"{type(exc).__name__}: {exc}"
            log.warning("%s: raw archive failed (ingestion continues): %s", path, report.archive_error)


class _NothingUsable(Exception):
    def __str__(self) -> str:
        return "no usable message in the file; see the line problems"


def redacted(messages: Iterable[Message], redactor) -> Iterator[Message]:
    for msg in messages:
        if msg.content:
            msg.content = redactor.redact(msg.content)
        if msg.reasoning_content:
            msg.reasoning_content = redactor.redact(msg.reasoning_content)
        for call in msg.tool_calls or []:
            fn = call.get("function") or {}
            if isinstance(fn.get("arguments"), str) and fn["arguments"]:
                fn["arguments"] = redactor.redact(fn["arguments"])
        yield msg


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()
