"""SkillService: crystallise knowledge clusters into versioned, searchable skills.

One evolution run looks at every active cluster that is ready (see
``ultron.db.skills.ready_clusters``) and, for each: synthesises a skill (the LLM, or
the offline rules when there is none or it fails), redacts it, grounds and gates it,
and publishes it (files first, then the row, in one transaction) or records why not.
Every attempt is written on the cluster with the member ids it saw, so a cluster
that failed waits for new members and a finished run repeated changes nothing and
calls no model.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from ultron import access
from ultron.claims import lease, renew
from ultron.clusters.service import LEASE as CLUSTERING_LEASE
from ultron.embeddings.query_cache import QUERIES
from ultron.context import ServiceContext, records_llm_usage
from ultron.db import feedback as feedback_store
from ultron.db import outcomes as outcome_store
from ultron.db import skills as store
from ultron.db.clusters import cluster_members
from ultron.db.memories import MemoryRecord
from ultron.heuristics.skill_synthesis import topic_from
from ultron.skills import gate as quality
from ultron.skills.draft import SkillDraft
from ultron.skills.export import sync_export
from ultron.skills.render import SkillHeader, meta_json, render_meta, render_skill_md, write_skill_dir
from ultron.skills.versioning import FIRST_VERSION, latest, next_minor, slug_candidates, slugify

log = logging.getLogger("ultron.skills")
#: The work_leases name of an evolution run.
LEASE = "skill_evolution"


@dataclass
class EvolutionReport:
    """What one run did, cluster by cluster (the skills asset shows it as metadata)."""

    ready: int = 0
    published: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    not_better: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    superseded: list[dict[str, str]] = field(default_factory=list)
    llm_fallbacks: int = 0
    llm_calls: int = 0
    seconds: float = 0.0
    exported: dict[str, Any] | None = None      # the ULTRON_SKILLS_EXPORT_DIR sync, when set
    #: Why this run did nothing: "held by <worker>" (another worker's run holds the evolution
    #: lease) or "upstream work held by <worker>" (claims, or a clustering run, in progress).
    skipped_run: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ready": self.ready, "published": list(self.published), "failed": list(self.failed),
                "not_better": list(self.not_better), "skipped": list(self.skipped),
                "superseded": list(self.superseded), "llm_fallbacks": self.llm_fallbacks,
                "llm_calls": self.llm_calls, "seconds": round(self.seconds, 3), "exported": self.exported,
                "skipped_run": self.skipped_run}


@dataclass(frozen=True)
class _Plan:
    slug: str
    version: str
    parent_version: str | None
    current_score: float | None
    superseded_slugs: tuple[str, ...]


class SkillService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.db = ctx.db
        self.settings = ctx.settings

    # -- evolution ---------------------------------------------------------------------------

    @records_llm_usage
    def run_skill_evolution(self) -> EvolutionReport:
        """Crystallise ready clusters, re-crystallise grown ones; see the module docstring."""
        report = EvolutionReport()
        started = time.perf_counter()
        provider = self.ctx.provider
        usage_before = provider.usage.snapshot() if getattr(provider, "usage", None) is not None else None
        lease_s = self.settings.claim_lease_seconds
        # A second worker arriving mid-run skips instead of waiting and then paying for the same
        # LLM calls; an expired lease (a crashed run) is taken over.
        with lease(self.db.engine, LEASE, lease_s, after=(CLUSTERING_LEASE,)) as (me, busy):
            if busy is not None:
                log.info("skill evolution skipped: %s", busy)
                report.skipped_run = busy
                return report
            with self.db.engine.connect() as lock_conn:
                # forget takes this lock too: it waits for a run and a run waits for it
                store.lock_evolution(lock_conn)
                lock_conn.commit()
                try:
                    with self.db.engine.connect() as conn:
                        ready = store.ready_clusters(conn, self.settings.crystallization_threshold,
                                                     self.settings.recrystallization_delta)
                    report.ready = len(ready)
                    for cluster in ready:
                        self._evolve(cluster, report)
                        # many clusters may outlast one lease; a lost one was taken over
                        if not renew(self.db.engine, LEASE, me, lease_s):
                            log.warning("skill evolution stopped: its lease expired and was taken over")
                            break
                finally:
                    store.unlock_evolution(lock_conn)
                    lock_conn.commit()
        if usage_before is not None:
            report.llm_calls = provider.usage.since(usage_before).calls
        # Agents loading the exported tree see the new versions (and no superseded ones) now.
        report.exported = sync_export(self.ctx)
        report.seconds = time.perf_counter() - started
        return report

    def evolve_clusters(self, cluster_ids: Sequence[str], *,
                        burned_versions: Mapping[str, Sequence[str]] | None = None) -> EvolutionReport:
        """Crystallise these clusters now, ready or not, through the normal path (synthesis,
        redaction, the quality gate, versions, files); one without enough active members
        (``crystallization_threshold``) is skipped. Forget uses it to rebuild a skill from
        the members that remain.

        The caller holds the evolution lock (``ultron.db.skills.lock_evolution``).
        ``burned_versions``: slug -> versions that existed and were deleted, so the new
        version is numbered after them and never reuses a withdrawn one's number."""
        report = EvolutionReport()
        started = time.perf_counter()
        threshold = self.settings.crystallization_threshold
        for cluster_id in dict.fromkeys(cluster_ids):
            with self.db.engine.connect() as conn:
                cluster = store.cluster_state(conn, cluster_id)
            if cluster is None or cluster.members < threshold:
                members = cluster.members if cluster else 0
                report.skipped.append({"cluster_id": cluster_id, "reason": f"{members} active members, "
                                                                           f"fewer than {threshold}"})
                continue
            report.ready += 1
            self._evolve(cluster, report, burned=tuple((burned_versions or {}).get(cluster.skill_slug or "", ())))
        report.seconds = time.perf_counter() - started
        return report

    def _evolve(self, cluster: store.ClusterState, report: EvolutionReport, burned: Sequence[str] = ()) -> None:
        redactor = self.ctx.redactor
        with self.db.engine.connect() as conn:
            records = cluster_members(conn, cluster.id)
            members = [_member(r) for r in records]
            topic = redactor.redact(cluster.topic.strip()) or topic_from(members)
        member_ids = [m["id"] for m in members]
        draft = self._synthesize(topic, members, report)
        draft = draft.map_text(redactor.redact)
        with self.db.engine.connect() as conn:
            # a new skill is named after what it does (its title), not the cluster's topic terms
            plan = self._plan(conn, cluster, draft.name.strip() or topic, burned)
        grounding = quality.ground(draft, members)
        header = SkillHeader(slug=plan.slug, version=plan.version, cluster_id=cluster.id, topic=topic,
                             parent_version=plan.parent_version, memory_ids=tuple(member_ids),
                             superseded_slugs=plan.superseded_slugs)
        evidence = [{"id": r.id, "memory_type": r.memory_type, "summary": redactor.redact(r.summary_l0 or "")}
                    for r in records]
        result = quality.evaluate(grounding, render_skill_md(grounding.draft, header, evidence), plan.slug, members)
        entry = {"cluster_id": cluster.id, "slug": plan.slug, "version": plan.version, "score": result.score,
                 "generator": draft.generator}
        if not result.passed:
            reason = f"quality gate: {result.reason}"
            self._record(cluster, member_ids, "failed", reason)
            report.failed.append({**entry, "reason": reason})
            log.info("cluster %s: skill %s not published: %s", cluster.id, plan.slug, reason)
            return
        if plan.current_score is not None and result.score <= plan.current_score:
            reason = (f"score {result.score:.4f} does not beat {plan.parent_version}'s {plan.current_score:.4f}")
            self._record(cluster, member_ids, "not_better", reason)
            report.not_better.append({**entry, "current_version": plan.parent_version,
                                      "current_score": plan.current_score, "reason": reason})
            return
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        header = replace(header, score=result.score, scores=result.scores, created_at=created)
        skill_md = render_skill_md(grounding.draft, header, evidence)
        meta = render_meta(grounding.draft, header, result.to_dict())
        self.ctx.check_embedding_profile()
        embedding = self.ctx.embedder.embed_one(grounding.draft.embedding_text())
        published = self._publish(cluster, plan, grounding.draft, skill_md, meta, member_ids, result, embedding)
        if published is None:
            report.skipped.append({**entry, "reason": "the cluster changed while the skill was being made"})
            return
        report.published.append({**entry, "parent_version": plan.parent_version, "path": published["path"],
                                 "skill_md": skill_md})
        report.superseded.extend(published["superseded"])

    def _plan(self, conn, cluster: store.ClusterState, topic: str, burned: Sequence[str] = ()) -> _Plan:
        """Slug and version of the skill this attempt would publish (after every version of
        the slug that exists or was ``burned``)."""
        merged = [s for s in cluster.superseded_slugs if s]
        if cluster.skill_slug:
            slug = cluster.skill_slug
        else:
            fallback = "skill-" + (slugify(cluster.id)[:12] or "cluster")
            base = slugify(topic, fallback=fallback)
            candidates = slug_candidates(base)
            taken = store.taken_slugs(conn, candidates, cluster.id)
            # A skill merged into this cluster under the same name continues its own line.
            slug = next((c for c in candidates if c not in taken or c in merged), f"{base}-{fallback}")
        current = store.get_skill(conn, slug)
        if current is not None:
            version, parent, score = next_minor(current["version"]), current["version"], float(current["score"])
        else:
            existing = store.versions_of(conn, slug)
            last = latest([*existing, *burned])
            version = next_minor(last) if last else FIRST_VERSION
            parent, score = latest(existing), None
        return _Plan(slug, version, parent, score, tuple(s for s in dict.fromkeys(merged) if s != slug))

    def _synthesize(self, topic: str, members: list[dict[str, Any]], report: EvolutionReport) -> SkillDraft:
        """The provider's skill (the LLM, or the rules for the offline provider); the rules
        when the LLM fails, counted in the report."""
        answer = self.ctx.fallback.run("synthesize_skill", topic, members)
        report.llm_fallbacks += answer.fell_back
        return SkillDraft.from_dict(answer.value, answer.by)

    def _publish(self, cluster: store.ClusterState, plan: _Plan, draft: SkillDraft, skill_md: str,
                 meta: dict[str, Any], member_ids: list[str], result: quality.GateResult, embedding
                 ) -> dict[str, Any] | None:
        root = self.settings.skills_dir
        dirname = f"{plan.slug}-{plan.version}"
        written: Path | None = None
        try:
            with self.db.engine.begin() as conn:
                now = store.cluster_state(conn, cluster.id, lock=True)
                if now is None or now.attempted_at != cluster.attempted_at or now.skill_slug != cluster.skill_slug:
                    return None
                superseded = store.supersede(conn, [plan.slug, *plan.superseded_slugs])
                store.insert_skill(conn, slug=plan.slug, version=plan.version, parent_version=plan.parent_version,
                                   cluster_id=cluster.id, name=draft.name, description=draft.description,
                                   skill_md=skill_md, meta=meta, memory_ids=member_ids, score=result.score,
                                   superseded_slugs=plan.superseded_slugs, path=str(root / dirname),
                                   embedding=embedding)
                verdict = (f"published {plan.version} (score {result.score:.4f}"
                           + (f" > {plan.current_score:.4f}" if plan.current_score is not None else "") + ")")
                store.record_attempt(conn, cluster.id, member_ids, "published", verdict, skill_slug=plan.slug)
                # The files go in place last, inside the transaction: the row insert above
                # already proved no other version owns this name, and if the commit fails
                # the directory is taken away again.
                written = write_skill_dir(root, dirname, {"SKILL.md": skill_md, "_meta.json": meta_json(meta)})
        except BaseException:
            if written is not None:
                shutil.rmtree(written, ignore_errors=True)
            raise
        return {"path": str(written), "superseded": [{"slug": s, "version": v} for s, v in superseded]}

    def _record(self, cluster: store.ClusterState, member_ids: list[str], status: str, reason: str) -> None:
        with self.db.engine.begin() as conn:
            store.record_attempt(conn, cluster.id, member_ids, status, reason)

    # -- reads -------------------------------------------------------------------------------

    def search_skills(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Current skills nearest to the query through the HNSW index, at or above the
        similarity floor (``ULTRON_SEARCH_MIN_SCORE``)."""
        if not isinstance(query, str) or not query.strip() or limit <= 0:
            return []
        self.ctx.check_embedding_profile()
        q = QUERIES.embed(self.ctx.embedder, query)
        with self.db.engine.begin() as conn:
            store.use_vector_index(conn, max(self.settings.hnsw_ef_search, limit))
            rows = store.search(conn, q, limit, visible=access.visible_agents())
        out = []
        for r in rows:
            sim = float(r.pop("similarity"))
            if sim < self.settings.search_min_score:
                continue
            out.append({**r, "similarity": round(sim, 4)})
        return out

    def get_skill(self, slug: str, version: str | None = None) -> dict[str, Any] | None:
        """The current version of ``slug`` (or the given version), SKILL.md included; None
        when unknown or retired by feedback."""
        if not isinstance(slug, str) or not slug.strip():
            return None
        with self.db.engine.connect() as conn:
            skill = store.get_skill(conn, slug.strip(), version, visible=access.visible_agents())
        return None if skill is None or skill.get("lifecycle") == "retired" else skill

    def list_skills(self, include_superseded: bool = False, *, limit: int | None = None,
                    offset: int = 0) -> list[dict[str, Any]]:
        """Current skills by slug (every version with ``include_superseded``); never retired ones."""
        if (limit is not None and limit < 1) or offset < 0:
            raise ValueError("limit must be at least 1 and offset at least 0")
        with self.db.engine.connect() as conn:
            return store.list_skills(conn, include_superseded, limit=limit, offset=offset,
                                     visible=access.visible_agents())

    def count_skills(self) -> int:
        """Current, non-retired skills."""
        with self.db.engine.connect() as conn:
            return store.count_served(conn, visible=access.visible_agents())

    def retired_slugs(self) -> set[str]:
        with self.db.engine.connect() as conn:
            return store.retired_slugs(conn)

    # -- feedback --------------------------------------------------------------------------------

    def feedback(self, slug: str, helpful: bool, note: str = "", agent_id: str | None = None) -> dict[str, Any]:
        """Record an agent's verdict on a skill and move its lifecycle (probationary → active →
        retired; formulas in ``ultron.db.feedback``). KeyError when the slug has no current
        version or is retired (a retired skill is not served, so it takes no verdicts)."""
        s = self.settings
        with self.db.engine.begin() as conn:
            lifecycle = feedback_store.skill_lifecycle(conn, slug)
            if lifecycle is not None and store.get_skill(conn, slug, visible=access.visible_agents()) is None:
                lifecycle = None  # not the caller's to see: as if unknown
            if lifecycle is None:
                raise KeyError(f"no skill named {slug!r}")
            if lifecycle == "retired":
                raise KeyError(f"skill {slug!r} is retired")
            row = feedback_store.apply_skill_feedback(
                conn, slug, helpful, activate_after=s.skill_activate_after, retire_below=s.skill_retire_below,
                retire_min_votes=s.skill_retire_min_votes)
            if row is None:  # pragma: no cover - the current version vanished in between
                raise KeyError(f"no skill named {slug!r}")
            feedback_store.record_event(conn, "skill", slug, helpful, self.ctx.redactor.redact(note) if note else "",
                                        agent_id)
            utility = outcome_store.utilities(conn, "skill", [slug]).get(slug, {}).get("utility")
        if row["lifecycle"] != lifecycle:
            log.info("skill %s: %s -> %s after feedback", slug, lifecycle, row["lifecycle"])
            sync_export(self.ctx)  # a retired skill leaves ULTRON_SKILLS_EXPORT_DIR at once
        return {"target_kind": "skill", "target_id": slug, "helpful": helpful,
                "helpful_count": row["helpful_count"], "unhelpful_count": row["unhelpful_count"],
                "reliability": round(feedback_store.reliability(row["helpful_count"], row["unhelpful_count"]), 4),
                "lifecycle": row["lifecycle"], "utility": None if utility is None else round(float(utility), 4)}

    def stats(self) -> dict[str, Any]:
        s = self.settings
        with self.db.engine.connect() as conn:
            skills = store.skill_counts(conn)
            clusters = store.cluster_counts(conn, s.crystallization_threshold, s.recrystallization_delta)
        return {"current": skills["current"], "superseded": skills["superseded"], "retired": skills["retired"],
                "active": skills["active"], "probationary": skills["probationary"],
                "clusters_active": clusters["active"], "clusters_with_skill": clusters["with_skill"],
                "clusters_ready": clusters["ready"], "clusters_waiting": clusters["waiting"]}


def _member(r: MemoryRecord) -> dict[str, Any]:
    return {"id": r.id, "memory_type": r.memory_type, "content": r.content, "context": r.context,
            "resolution": r.resolution, "tags": list(r.tags)}
