"""``from ultron import Ultron``: the SDK agents, the CLI, the HTTP API and the Dagster
assets share, so the paths into the system cannot drift apart."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable

from ultron.db import sessions as store
from ultron.db.database import Database
from ultron.ingestion import IngestReport, IngestService
from ultron.settings import Settings


class Ultron:
    """Facade over Ultron's services, bound to one database.

    Creating it connects (starting the embedded server if needed) and applies
    migrations, so the first call on a fresh machine just works. ``provider``
    overrides the LLM provider the settings would pick (the Dagster ``llm``
    resource passes its own).
    """

    def __init__(self, settings: Settings | None = None, *, db: Database | None = None, provider=None) -> None:
        self.settings = settings or Settings.from_env()
        self.db = db or Database.open(self.settings)
        self.ingestion = IngestService(self.db, self.settings)
        self._provider = provider
        self._trajectory_service = None
        self._clusters = None
        self._skills = None

    # -- services -------------------------------------------------------------------------

    @property
    def trajectory_service(self):
        """Segmentation, quality labels, memory extraction, SFT export, stats (ultron.trajectory.service)."""
        if self._trajectory_service is None:
            from ultron.trajectory.service import TrajectoryService

            self._trajectory_service = TrajectoryService(self.db, self.settings, self._provider)
        return self._trajectory_service

    @property
    def memory(self):
        """The Memory Service (upload, search, details, tiers, consolidation, forget)."""
        return self.trajectory_service.memory

    @property
    def clusters(self):
        """Knowledge clusters (HDBSCAN batch runs, assignment between runs, topics)."""
        if self._clusters is None:
            from ultron.clusters.service import ClusterService

            self._clusters = ClusterService(self.memory)
        return self._clusters

    @property
    def skills(self):
        """Skill Hub: crystallisation, versions, SKILL.md files, skill search."""
        if self._skills is None:
            from ultron.skills.service import SkillService

            self._skills = SkillService(self.memory)
        return self._skills

    # -- ingestion ------------------------------------------------------------------------

    def ingest(self, paths: Iterable[str | os.PathLike[str]] | str, agent_id: str,
               progress: Callable[[int, int, str], None] | None = None) -> IngestReport:
        """Ingest session .jsonl files and directories; see IngestReport for the per-file outcome."""
        return self.ingestion.ingest(paths, agent_id, progress=progress)

    def ingest_text(self, text: str, agent_id: str | None = None) -> dict[str, Any]:
        """Extract memories from plain text and upload them directly (no trajectory rows)."""
        from ultron.memory.text import ingest_text

        return ingest_text(self.memory, self.db, self.settings, text, agent_id)

    # -- memories ---------------------------------------------------------------------------

    def upload_memory(self, content: str, context: str = "", resolution: str = "", tags=None):
        """Store a memory (type decided by the server); returns the record as stored or merged."""
        return self.memory.upload_memory(content, context, resolution, tags).record

    def search_memories(self, query: str, detail_level: str = "l1", limit: int = 10, tier: str | None = None,
                        tags=None, agent_id: str | None = None):
        return self.memory.search_memories(query, detail_level, limit, tier, tags, agent_id)

    def get_memory_details(self, ids):
        return self.memory.get_memory_details(ids)

    def forget(self, memory_ids=None, segment_id: str | None = None, session_file: str | None = None,
               agent_id: str | None = None) -> dict[str, int]:
        return self.memory.forget(memory_ids, segment_id, session_file, agent_id)

    # -- skills -------------------------------------------------------------------------------

    def search_skills(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Current skill versions closest to the query (HNSW); superseded versions never appear."""
        return self.skills.search_skills(query, limit)

    def get_skill(self, slug: str) -> dict[str, Any] | None:
        """The current version of a skill, its SKILL.md included; None when unknown."""
        return self.skills.get_skill(slug)

    # -- maintenance ----------------------------------------------------------------------------

    def run_tier_rebalance(self) -> dict[str, int]:
        return self.memory.run_tier_rebalance()

    def run_clustering(self) -> dict[str, Any]:
        return self.clusters.run_clustering().to_dict()

    def run_skill_evolution(self) -> dict[str, Any]:
        return self.skills.run_skill_evolution().to_dict()

    def run_maintenance(self, batch_size: int = 100_000) -> dict[str, Any]:
        """Everything the maintenance schedule does, in its order: refresh (re-ingest session files
        changed on disk and inbox files never ingested) → segment → label → extract → tier rebalance →
        clustering → skill evolution → consolidation (if enabled) → raw archive purge (past its retention)."""
        ts = self.trajectory_service
        out: dict[str, Any] = {
            "refreshed": self.ingestion.refresh().totals,
            "segmented": sum(1 for r in ts.segment_pending_sessions(batch_size) if r.status == "segmented"),
            "labeled": sum(1 for r in ts.label_pending_segments(batch_size) if r.status == "labeled"),
            "extracted": sum(1 for r in ts.extract_memories_from_segments(batch_size) if r.status == "extracted"),
        }
        out["tiers"] = self.run_tier_rebalance()
        out["clusters"] = self.run_clustering()
        out["skills"] = self.run_skill_evolution()
        out["consolidation"] = self.memory.consolidate(max_merges=1000) if self.settings.consolidate_enabled else None
        with self.db.engine.begin() as conn:
            out["raw_archive_purged"] = store.purge_raw_archive(conn, self.settings.raw_archive_retention_days)
        return out

    # -- status -----------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """What a person checks first: sessions, segments, memories by tier and type, clusters, skills."""
        trajectory = self.trajectory_service.get_trajectory_stats()
        return {
            "sessions": trajectory["sessions"],
            "segments": trajectory["segments"],
            "score_buckets": trajectory["score_buckets"],
            "memories": self.memory.stats(),
            "clusters": self.clusters.stats(),
            "skills": self.skills.stats(),
            "llm_provider": trajectory["llm_provider"],
        }

    def status(self) -> dict[str, Any]:
        with self.db.engine.connect() as conn:
            return {
                "database": self.db.urls.ultron.split("@")[-1],
                "schema_revision": self.db.revision,
                "tables": store.table_counts(conn),
                "pending": store.pending_counts(conn),
            }
