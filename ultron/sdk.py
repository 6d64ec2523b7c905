"""``from ultron import Ultron``: the SDK agents, the CLI, the HTTP API and the Dagster
assets share, so the paths into the system cannot drift apart.

It is the composition root: it builds one :class:`~ultron.context.ServiceContext` and
hands it to each stage's service; the stages never build or borrow each other.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ultron.context import ServiceContext
from ultron.db import sessions as store
from ultron.db.database import Database
from ultron.db.urls import location
from ultron.ingestion import IngestReport, IngestService
from ultron.settings import Settings

if TYPE_CHECKING:
    from ultron.browse import Browser
    from ultron.tokens import Tokens
    from ultron.clusters.service import ClusterService
    from ultron.embeddings import Embedder
    from ultron.memory.extract import SegmentExtraction
    from ultron.memory.service import MemoryService
    from ultron.providers import LLMProvider
    from ultron.sft.export import SFTExport
    from ultron.skills.service import SkillService
    from ultron.trajectory.service import SegmentLabel, SessionSegmentation, TrajectoryService


#: Longest feedback note kept.
MAX_NOTE_CHARS = 2000


def _agent(agent_id: str | None) -> str | None:
    """None, or a valid agent id (ValueError otherwise)."""
    if agent_id is None:
        return None
    from ultron.sessions.discovery import validate_agent_id

    return validate_agent_id(agent_id)


def _repo_root(repo_root: str | os.PathLike[str] | None) -> str | None:
    """None, or the directory as an absolute path (ValueError when it is not a directory)."""
    if repo_root is None:
        return None
    path = Path(os.fspath(repo_root)).expanduser()
    if not path.is_dir():
        raise ValueError(f"repo_root {os.fspath(repo_root)!r} is not a directory")
    return str(path.resolve())


class Ultron:
    """Facade over Ultron's services, bound to one database.

    Creating it connects (starting the embedded server if needed) and applies
    migrations, so the first call on a fresh machine just works. ``provider``
    overrides the LLM provider the settings would pick (the Dagster ``llm``
    resource passes its own), ``embedder`` the embedder.
    """

    def __init__(self, settings: Settings | None = None, *, db: Database | None = None,
                 provider: "LLMProvider | None" = None, embedder: "Embedder | None" = None) -> None:
        self.settings = settings or Settings.from_env()
        self.db = db or Database.open(self.settings)
        self.context = ServiceContext(self.db, self.settings, provider=provider, embedder=embedder)
        self.ingestion = IngestService(self.db, self.settings)
        self._trajectory_service: TrajectoryService | None = None
        self._memory: MemoryService | None = None
        self._clusters: ClusterService | None = None
        self._skills: SkillService | None = None
        self._browser: Browser | None = None
        self._tokens: Tokens | None = None

    # -- services (built on first use: importing them loads the heuristics) -----------------

    @property
    def trajectory_service(self) -> "TrajectoryService":
        """Segmentation, quality labels, stats (ultron.trajectory.service)."""
        if self._trajectory_service is None:
            from ultron.trajectory.service import TrajectoryService

            self._trajectory_service = TrajectoryService(self.context)
        return self._trajectory_service

    @property
    def memory(self) -> "MemoryService":
        """The Memory Service (upload, search, details, tiers, consolidation, forget)."""
        if self._memory is None:
            from ultron.memory.service import MemoryService

            self._memory = MemoryService(self.context)
        return self._memory

    @property
    def clusters(self) -> "ClusterService":
        """Knowledge clusters (HDBSCAN batch runs, assignment between runs, topics)."""
        if self._clusters is None:
            from ultron.clusters.service import ClusterService

            self._clusters = ClusterService(self.context)
        return self._clusters

    @property
    def skills(self) -> "SkillService":
        """Skill Hub: crystallisation, versions, SKILL.md files, skill search."""
        if self._skills is None:
            from ultron.skills.service import SkillService

            self._skills = SkillService(self.context)
        return self._skills

    @property
    def browser(self) -> "Browser":
        """What people curating the store read: pages, a memory's provenance, skills, overview."""
        if self._browser is None:
            from ultron.browse import Browser

            self._browser = Browser(self.context, self.memory, self.skills)
        return self._browser

    @property
    def tokens(self) -> "Tokens":
        """Named API tokens with scopes (``ultron tokens``), and resolving a presented token."""
        if self._tokens is None:
            from ultron.tokens import Tokens

            self._tokens = Tokens(self.db, self.settings)
        return self._tokens

    def audit_log(self, limit: int = 100, action: str | None = None, actor: str | None = None
                  ) -> list[dict[str, Any]]:
        """The audit log, newest first: forget, edits, token changes, exports, ingest by path."""
        from ultron.db import audit

        with self.db.engine.connect() as conn:
            return audit.entries(conn, limit=limit, action=action, actor=actor)

    def audit(self, action: str, target: str = "", **detail: Any) -> None:
        """Record an action in the audit log as whoever is acting (``ultron.access.actor``).
        ``detail``: counts, ids and paths only, never memory text or secrets."""
        from ultron.access import actor
        from ultron.db import audit

        with self.db.engine.begin() as conn:
            audit.record(conn, actor=actor(), action=action, target=target, detail=detail)

    # -- ingestion ------------------------------------------------------------------------

    def ingest(self, paths: Iterable[str | os.PathLike[str]] | str, agent_id: str,
               progress: Callable[[int, int, str], None] | None = None) -> IngestReport:
        """Ingest session .jsonl files and directories; see IngestReport for the per-file outcome.
        An agent-bound caller ingests only as its agents (``ultron.access.check_agent``)."""
        from ultron.access import check_agent

        check_agent(agent_id)
        return self.ingestion.ingest(paths, agent_id, progress=progress)

    def ingest_text(self, text: str, agent_id: str | None = None) -> dict[str, Any]:
        """Extract memories from plain text and upload them directly (no trajectory rows)."""
        from ultron.access import writing_agent
        from ultron.memory.text import ingest_text

        return ingest_text(self.memory, text, writing_agent(_agent(agent_id)))

    # -- the pipeline, step by step (what the assets and maintenance run) -----------------

    def segment_pending_sessions(self, batch_size: int = 50, *, partition_key: str | None = None
                                 ) -> list["SessionSegmentation"]:
        return self.trajectory_service.segment_pending_sessions(batch_size, partition_key=partition_key)

    def label_pending_segments(self, batch_size: int = 50, *, partition_key: str | None = None
                               ) -> list["SegmentLabel"]:
        return self.trajectory_service.label_pending_segments(batch_size, partition_key=partition_key)

    def extract_memories_from_segments(self, batch_size: int = 50, *, partition_key: str | None = None
                                       ) -> list["SegmentExtraction"]:
        """Memories from memory-eligible segments, each segment all-or-nothing and exactly once."""
        from ultron.memory.extract import extract_from_segments

        return extract_from_segments(self.memory, batch_size, partition_key=partition_key)

    def get_trajectory_stats(self) -> dict[str, Any]:
        return self.trajectory_service.get_trajectory_stats()

    # -- memories ---------------------------------------------------------------------------

    def upload_memory(self, content: str, context: str = "", resolution: str = "", tags=None,
                      agent_id: str | None = None, shared: bool = False):
        """Store a memory (type decided by the server); returns the record as stored or merged.
        ``agent_id`` records which agent it came from and owns it (``search_memories(agent_id=...)``
        scopes by it); ``shared``: tokens bound to other agents see it too."""
        from ultron.memory.service import Provenance

        return self.memory.upload_memory(content, context, resolution, tags,
                                         provenance=Provenance(agent_id=_agent(agent_id)), shared=bool(shared)).record

    def share_memories(self, memory_ids: Iterable[str] | None = None, *, agent_id: str | None = None,
                       shared: bool = True) -> int:
        """Mark memories shared (every agent-bound token sees them) or private again
        (``shared=False``): the given ids, or every memory of ``agent_id``. Returns how many
        changed. An agent-bound caller changes only its agents' memories; audited."""
        from ultron.access import check_agent, visible_agents
        from ultron.db import memories as memory_store

        ids = [str(i) for i in (memory_ids or [])]
        if not ids and agent_id is None:
            raise ValueError("give memory ids or an agent_id")
        if agent_id is not None:
            check_agent(_agent(agent_id))
        with self.db.engine.begin() as conn:
            changed = memory_store.set_shared(conn, ids=ids or None, agent_id=agent_id, shared=bool(shared),
                                              owners=visible_agents())
        from ultron.access import digest

        self.audit("memories.share" if shared else "memories.unshare",
                   f"agent:{digest(agent_id)}" if agent_id else "memories:" + ",".join(ids[:20]), changed=changed)
        return changed

    def search_memories(self, query: str, detail_level: str = "l1", limit: int = 10, tier: str | None = None,
                        tags=None, agent_id: str | None = None, repo_root: str | os.PathLike[str] | None = None):
        """Hybrid search. ``repo_root``: the checkout the caller works in; results whose files
        changed or vanished there are marked ``possibly_stale`` (with ``stale_reason``) and
        ranked lower."""
        return self.memory.search_memories(query, detail_level, limit, tier, tags, agent_id,
                                           repo_root=_repo_root(repo_root))

    def stale_memories(self, repo_root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """Memories whose recorded files changed or vanished in the repository at ``repo_root``
        (default: the current directory's): ``{"repo", "remote", "checked", "stale": [{"memory",
        "reason", "files"}]}``. ValueError when the directory is not in a git repository."""
        root = _repo_root(repo_root) or os.getcwd()
        report = self.memory.stale_memories(root)
        if report is None:
            raise ValueError(f"{root} is not inside a git repository")
        return report

    def search_memories_batch(self, queries, detail_level: str = "l1", limit: int = 10, tier: str | None = None,
                              tags=None, agent_id: str | None = None):
        """One result list per query; the queries are embedded together in one batch."""
        return self.memory.search_memories_batch(list(queries), detail_level, limit, tier, tags, agent_id)

    def get_memory_details(self, ids):
        return self.memory.get_memory_details(ids)

    def get_memory(self, memory_id: str) -> dict[str, Any] | None:
        """One memory in full (any status, feedback counts included), or None; a plain read
        that counts no hit."""
        if not isinstance(memory_id, str) or not memory_id.strip():
            return None
        record = self.memory.get_memory(memory_id.strip())
        return record.to_dict("full") if record is not None else None

    def list_memories(self, limit: int = 50, offset: int = 0, tier: str | None = None,
                      agent_id: str | None = None) -> dict[str, Any]:
        """A page of active memories, newest first: ``{"memories" (L1), "limit", "offset", "total"}``."""
        records, total = self.memory.list_memories(limit, offset, tier, agent_id)
        return {"memories": [r.to_dict("l1") for r in records], "limit": limit, "offset": offset, "total": total}

    # -- feedback and context -------------------------------------------------------------------

    def feedback(self, *, memory_id: str | None = None, skill: str | None = None, helpful: bool,
                 note: str = "", agent_id: str | None = None) -> dict[str, Any]:
        """Record whether a memory or a skill helped (exactly one of ``memory_id`` / ``skill``,
        a skill by its name). A memory: helpful adds hits and recency, not helpful lowers its
        rank and, repeated, demotes it to COLD. A skill: its reliability and lifecycle move
        (probationary → active → retired). Returns the target's new counters; KeyError for an
        unknown target, ValueError for bad arguments. Formulas: ``ultron.db.feedback``."""
        if (memory_id is None) == (skill is None):
            raise ValueError("give exactly one of memory_id or skill")
        if not isinstance(helpful, bool):
            raise ValueError("helpful must be true or false")
        if not isinstance(note, str) or len(note) > MAX_NOTE_CHARS or "\x00" in note:
            raise ValueError(f"note must be text of at most {MAX_NOTE_CHARS} characters")
        from ultron.access import writing_agent

        agent_id = writing_agent(_agent(agent_id), required=False)
        target = memory_id if memory_id is not None else skill
        if not isinstance(target, str) or not target.strip():
            raise ValueError("memory_id / skill must be a non-empty string")
        if memory_id is not None:
            return self.memory.feedback(memory_id.strip(), helpful, note, agent_id)
        return self.skills.feedback(target.strip(), helpful, note, agent_id)

    def context_bundle(self, task: str, token_budget: int = 1500, agent_id: str | None = None, *,
                       repo_root: str | os.PathLike[str] | None = None,
                       session_id: str | None = None) -> dict[str, Any]:
        """One prompt-ready block for a task within ``token_budget`` tokens (cl100k, never
        exceeded): the most relevant skills (when to use, steps), then memories (L1, or L0
        when space is short), each labelled with its id for feedback. ``agent_id`` limits the
        memories to that agent's. ``session_id`` (the agent's own session id) records what was
        served, so the session's outcome, once ingested and scored, moves each item's utility.
        Returns ``{"task", "token_budget", "tokens", "text", "items"}``."""
        from ultron.bundle import context_bundle

        return context_bundle(self.memory, self.skills, task, token_budget, _agent(agent_id),
                              repo_root=_repo_root(repo_root), session_id=session_id)

    def record_serve(self, session_id: str, agent_id: str | None, items) -> int:
        """Record that ``items`` (``("memory" | "skill", id)`` pairs) were given to the agent
        session ``session_id`` by other means than ``context_bundle`` (a hook that built its own
        context); its outcome is then attributed to them. Returns the rows written."""
        from ultron.bundle import record_serve, validate_session_id

        sid = validate_session_id(session_id)
        if sid is None:
            raise ValueError("session_id is required")
        return record_serve(self.db.engine, sid, _agent(agent_id),
                            [(str(kind), str(item_id)) for kind, item_id in items])

    def attribute_session(self, session_file: str, agent_id: str) -> dict[str, Any] | None:
        """Count a scored session's outcome for what was served to it now (labelling does
        this by itself once the last segment is scored); None when there was nothing to count."""
        return self.trajectory_service.attribute_session(agent_id, str(session_file))

    def forget(self, memory_ids=None, segment_id: str | None = None, session_file: str | None = None,
               agent_id: str | None = None, *, vacuum: bool = False, purge: bool = False) -> dict[str, Any]:
        """Forget memories, a segment, a session file or an agent everywhere: memories
        (rebuilt from what remains, or deleted), sessions, segments, raw uploads, clusters
        (members, centroid, topic), skills (re-synthesised or retired; withdrawn versions'
        rows and SKILL.md directories deleted), SFT exports (rewritten without the forgotten
        examples) and session files under ULTRON_HOME. ``vacuum``: VACUUM FULL the changed
        tables afterwards, so the deleted rows also leave PostgreSQL's table files. ``purge``:
        leave them in none of the server's files (tables, indexes, statistics, WAL; the CLI's
        and the memory browser's default), see ``ultron.db.forget.purge``.

        Returns the report (see ``ultron.forget.forget``): today's counts (``sessions``,
        ``memories_deleted``, ...) plus ``tables``, ``clusters``, ``skills``, ``files``,
        ``sft``, ``partitions`` (Dagster partition keys to remove), ``kept_on_disk``,
        ``vacuumed``, ``purge``, ``not_reached`` (copies forget cannot reach)."""
        from ultron.forget import forget

        with self.context.llm_batch():  # rebuilt memories and skills may ask the LLM
            report = forget(self.context, memory_ids, segment_id, session_file, agent_id, vacuum=vacuum,
                            purge=purge, memory=self.memory, skills=self.skills)
        from ultron.access import digest

        target = (f"agent:{digest(agent_id)}" if agent_id and not session_file else
                  f"session:{digest(session_file)}" if session_file else f"segment:{segment_id}" if segment_id else
                  "memories:" + ",".join(list(memory_ids or [])[:20]))
        if self._browser is not None:
            self._browser.forget_cached()
        self.audit("forget", target, **{k: v for k, v in report.items() if isinstance(v, int) and v})
        return report

    # -- skills -------------------------------------------------------------------------------

    def search_skills(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Current skill versions closest to the query (HNSW); superseded versions never appear."""
        return self.skills.search_skills(query, limit)

    def get_skill(self, slug: str) -> dict[str, Any] | None:
        """The current version of a skill, its SKILL.md included; None when unknown or retired."""
        return self.skills.get_skill(slug)

    def list_skills(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        """Current skills by name (retired ones never), one page: ``limit`` from ``offset``."""
        return self.skills.list_skills(limit=limit, offset=offset)

    def export_skills(self, to: str | Path) -> dict[str, Any]:
        """Write the current version of every non-retired skill as ``to/<name>/SKILL.md`` (the
        Agent Skills layout agents load, e.g. ``~/.claude/skills``), removing skills this export
        wrote before that were superseded, retired or forgotten; a user's own skill directories
        there are never touched. Returns ``{"dir", "written", "removed", "unchanged", "skipped"}``
        (unchanged skills are not rewritten). ULTRON_SKILLS_EXPORT_DIR keeps one directory in
        sync automatically."""
        from ultron.access import visible_agents
        from ultron.skills.export import export_skills

        # an agent-bound principal exports only the skills it may see; the automatic export
        # directory (sync_export) always holds them all
        result = export_skills(self.db, to, visible=visible_agents()).to_dict()
        self.audit("export.skills", str(result.get("dir", to)),
                   **{k: len(v) if isinstance(v, list) else v for k, v in result.items() if k != "dir"})
        return result

    # -- SFT export -----------------------------------------------------------------------------

    def export_sft(self, task_type: str | None = None, min_quality_score: float | None = None,
                   limit: int | None = 5000) -> list[dict[str, Any]]:
        """The seed's ``[{"messages": [...], "topic": ...}]`` (plus tools, segment_id, task_type,
        quality_score, split), cleaned and redacted exactly as the files are; nothing written.
        ``min_quality_score`` defaults to ULTRON_TRAJECTORY_SFT_SCORE_THRESHOLD (0.8)."""
        from ultron.sft.export import build_examples

        examples = build_examples(self.db, self.settings, min_score=self._sft_floor(min_quality_score),
                                  task_type=task_type, limit=limit)
        return [ex.sdk_dict() for ex in examples]

    def export_sft_dataset(self, task_type: str | None = None, min_quality_score: float | None = None,
                           limit: int | None = 5000, progress: Callable[[int, int], None] | None = None,
                           reuse_unchanged: bool = False) -> "SFTExport":
        """Write an export under ULTRON_HOME/sft/ (see ultron.sft.export); ``progress(done, total)``
        is called as segments are processed. Returns the ``SFTExport`` (directory, files, manifest)."""
        from ultron.sft.export import export_dataset

        export = export_dataset(self.db, self.settings, min_score=self._sft_floor(min_quality_score),
                                task_type=task_type, limit=limit, progress=progress, reuse_unchanged=reuse_unchanged)
        self.audit("export.sft", str(export.directory), **{k: v for k, v in export.manifest.get("counts", {}).items()
                                                          if isinstance(v, int)})
        return export

    def _sft_floor(self, min_quality_score: float | None) -> float:
        return self.settings.trajectory_sft_score_threshold if min_quality_score is None else min_quality_score

    # -- maintenance ----------------------------------------------------------------------------

    def run_tier_rebalance(self) -> dict[str, int]:
        return self.memory.run_tier_rebalance()

    def run_clustering(self) -> dict[str, Any]:
        return self.clusters.run_clustering().to_dict()

    def run_skill_evolution(self) -> dict[str, Any]:
        return self.skills.run_skill_evolution().to_dict()

    def purge_raw_archive(self) -> int:
        """Drop raw uploads older than ULTRON_RAW_ARCHIVE_RETENTION_DAYS; returns how many."""
        with self.db.engine.begin() as conn:
            return store.purge_raw_archive(conn, self.settings.raw_archive_retention_days)

    def run_maintenance(self, batch_size: int = 100_000) -> dict[str, Any]:
        """Everything the maintenance schedule does, in its order (``ultron.maintenance.STEPS``,
        the one definition the Dagster job runs too): refresh (re-ingest session files changed on
        disk and inbox files never ingested) → segment → label → extract → redo rules fallbacks →
        tier rebalance → clustering → skill evolution → consolidation (if enabled) → raw archive purge."""
        from ultron.maintenance import run_maintenance

        return run_maintenance(self, batch_size=batch_size)

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

    def stored_partition_keys(self) -> set[str]:
        """Partition keys of the sessions the store holds (forgotten ones are gone)."""
        with self.db.engine.connect() as conn:
            return store.stored_partition_keys(conn)

    def status(self) -> dict[str, Any]:
        with self.db.engine.connect() as conn:
            return {
                "database": location(self.db.urls.ultron),
                "schema_revision": self.db.revision,
                "tables": store.table_counts(conn),
                "pending": store.pending_counts(conn),
            }
