"""``from ultron import Ultron``: the SDK agents and the Dagster assets share."""

from __future__ import annotations

import os
from typing import Any, Iterable

from ultron.db import sessions as store
from ultron.db.database import Database
from ultron.ingestion import IngestReport, IngestService
from ultron.settings import Settings


class Ultron:
    """Facade over Ultron's services, bound to one database.

    Creating it connects (starting the embedded server if needed) and applies
    migrations, so the first call on a fresh machine just works.
    """

    def __init__(self, settings: Settings | None = None, *, db: Database | None = None) -> None:
        self.settings = settings or Settings.from_env()
        self.db = db or Database.open(self.settings)
        self.ingestion = IngestService(self.db, self.settings)
        self._trajectory_service = None

    @property
    def trajectory_service(self):
        """Segmentation, quality labels and stats (see ultron.trajectory.service)."""
        if self._trajectory_service is None:
            from ultron.trajectory.service import TrajectoryService

            self._trajectory_service = TrajectoryService(self.db, self.settings)
        return self._trajectory_service

    def ingest(self, paths: Iterable[str | os.PathLike[str]] | str, agent_id: str) -> IngestReport:
        """Ingest session .jsonl files and directories; see IngestReport for the per-file outcome."""
        return self.ingestion.ingest(paths, agent_id)

    @property
    def memory(self):
        """The Memory Service (upload, search, details, tiers, consolidation, forget)."""
        return self.trajectory_service.memory

    def upload_memory(self, content: str, context: str = "", resolution: str = "", tags=None):
        """Store a memory (type decided by the server); returns the record as stored or merged."""
        return self.memory.upload_memory(content, context, resolution, tags).record

    def search_memories(self, query: str, detail_level: str = "l1", limit: int = 10, tier: str | None = None,
                        tags=None, agent_id: str | None = None):
        return self.memory.search_memories(query, detail_level, limit, tier, tags, agent_id)

    def get_memory_details(self, ids):
        return self.memory.get_memory_details(ids)

    def ingest_text(self, text: str, agent_id: str | None = None) -> dict[str, Any]:
        """Extract memories from plain text and upload them directly (no trajectory rows)."""
        from ultron.memory.text import ingest_text

        return ingest_text(self.memory, self.db, self.settings, text, agent_id)

    def forget(self, memory_ids=None, segment_id: str | None = None, session_file: str | None = None,
               agent_id: str | None = None) -> dict[str, int]:
        return self.memory.forget(memory_ids, segment_id, session_file, agent_id)

    def status(self) -> dict[str, Any]:
        with self.db.engine.connect() as conn:
            return {
                "database": self.db.urls.ultron.split("@")[-1],
                "schema_revision": self.db.revision,
                "tables": store.table_counts(conn),
                "pending": store.pending_counts(conn),
            }
