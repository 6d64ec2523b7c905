"""ClusterService: batch clustering of the memory store, stable cluster ids, topics,
and the between-runs assignment of new memories.

A batch run works on a snapshot (read in one repeatable-read transaction), does the
slow parts (HDBSCAN, topic labels, LLM calls) outside any transaction, then writes
everything in one short transaction. Uploads during the run are not blocked: they are
assigned against the clusters as they were, and the write step keeps or clears those
memberships consistently (see ``ultron.db.clusters``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ultron.claims import lease
from ultron.clusters import density
from ultron.context import ServiceContext, records_llm_usage
from ultron.heuristics import topics
from ultron.clusters.matching import SkillState, match_clusters, materially_changed, merge_skill_state
from ultron.db import clusters as store
from ultron.db.memories import MemoryRecord
from ultron.llm.errors import LLMError, LLMUnavailable

if TYPE_CHECKING:
    import sqlalchemy as sa

log = logging.getLogger("ultron.clusters")
#: The work_leases name of a batch run.
LEASE = "clustering"


@dataclass
class ClusteringReport:
    """What a batch run did, for the asset's metadata and the CLI.

    ``dissolved`` counts every previous cluster that stopped being active, ``merged``
    the part of them that went into a surviving cluster (their skills are superseded
    by the survivor's rather than lost)."""

    clusters: int = 0
    new: int = 0
    kept: int = 0
    merged: int = 0
    dissolved: int = 0
    noise: int = 0
    memories: int = 0
    memories_clustered: int = 0
    topics_llm: int = 0
    topics_rules: int = 0
    llm_failures: int = 0
    pipeline: str = ""
    seconds: float = 0.0
    sizes: list[dict[str, Any]] = field(default_factory=list)
    #: Why this run did nothing: "held by <worker>" (another worker's run holds the clustering
    #: lease) or "upstream work held by <worker>" (it still claims sessions or segments).
    skipped_run: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _NewCluster:
    members: list[int]  # row indices into the snapshot
    id: str = ""
    previous: dict[str, Any] | None = None
    topic: str = ""
    needs_topic: bool = True
    centroid: np.ndarray | None = None
    absorbed: list[str] = field(default_factory=list)  # previous clusters merged into this one
    skill: SkillState | None = None  # set when merges changed the skill state


def _skill_state(row: dict[str, Any]) -> SkillState:
    return SkillState(row.get("skill_slug"), tuple(row.get("superseded_slugs") or ()),
                      tuple(row.get("attempt_member_ids") or ()), row.get("attempt_status"),
                      row.get("attempt_reason"), row.get("attempted_at"))


class ClusterService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.db = ctx.db
        self.settings = ctx.settings

    @property
    def dim(self) -> int:
        return int(self.settings.embedding_dim)

    # -- batch ----------------------------------------------------------------------------

    @records_llm_usage
    def run_clustering(self) -> ClusteringReport:
        """Re-cluster every active memory; keep ids by member overlap; label what changed."""
        start = time.perf_counter()
        # A second worker arriving mid-run skips instead of waiting and redoing it (and its LLM
        # topic calls); an expired lease (a crashed run) is taken over.
        with lease(self.db.engine, LEASE, self.settings.claim_lease_seconds) as (_me, busy):
            if busy is not None:
                log.info("clustering skipped: %s", busy)
                return ClusteringReport(skipped_run=busy)
            with self.db.engine.connect() as holder:
                # forget takes this lock too: it waits for a run and a run waits for it
                store.lock_run(holder)
                holder.commit()
                try:
                    report = self._run()
                finally:
                    store.unlock_run(holder)
                    holder.commit()
        report.seconds = round(time.perf_counter() - start, 3)
        log.info("clustering: %d clusters (%d new, %d kept, %d merged, %d dissolved), %d noise, %.1f s",
                 report.clusters, report.new, report.kept, report.merged, report.dissolved, report.noise,
                 report.seconds)
        return report

    def _run(self) -> ClusteringReport:
        with self.db.engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
            with conn.begin():
                ids, vectors, current = store.active_embeddings(conn, self.dim)
                previous_rows = {r["id"]: r for r in store.active_clusters(conn)}
        report = ClusteringReport(memories=len(ids), pipeline=density.pipeline_for(len(ids)))
        if not ids and not previous_rows:
            return report

        labels = density.cluster_labels(vectors, self.settings.cluster_min_size,
                                        single_topic_cosine=self.settings.cluster_similarity_threshold)
        report.noise = int((labels == density.NOISE).sum())
        groups: dict[int, list[int]] = {}
        for row, label in enumerate(labels):
            if label != density.NOISE:
                groups.setdefault(int(label), []).append(row)
        new = [_NewCluster(members=rows) for _label, rows in sorted(groups.items())]

        previous_members: dict[str, set[str]] = {cid: set() for cid in previous_rows}
        for memory_id, cid in zip(ids, current):
            if cid in previous_members:
                previous_members[cid].add(memory_id)
        member_ids = [[ids[i] for i in c.members] for c in new]
        matching = match_clusters([set(m) for m in member_ids], previous_members)

        for c, members, kept_id in zip(new, member_ids, matching.ids):
            c.centroid = density.centroid(vectors[c.members])
            if kept_id is None:
                c.id = store.new_cluster_id()
                report.new += 1
                continue
            c.id, c.previous = kept_id, previous_rows[kept_id]
            report.kept += 1
            c.absorbed = matching.absorbed_into(kept_id)
            c.topic = c.previous.get("topic") or ""
            c.needs_topic = materially_changed(previous_members[kept_id], members, merged=bool(c.absorbed),
                                               topic=c.topic)
        report.merged = len(matching.absorbed)
        report.dissolved = len(matching.absorbed) + len(matching.dissolved)

        self._label(new, ids, vectors, report)

        with self.db.engine.begin() as conn:
            store.lock_for_batch_write(conn)
            self._merge_skills(conn, [c for c in new if c.absorbed])
            # stored sizes are set once, by refresh_sizes below
            store.insert_clusters(conn, [{"id": c.id, "topic": c.topic, "centroid": c.centroid}
                                         for c in new if c.previous is None])
            store.update_clusters(conn, [{"id": c.id, "topic": c.topic, "centroid": c.centroid, "skill": c.skill}
                                         for c in new if c.previous])
            store.dissolve(conn, sorted(matching.absorbed) + matching.dissolved)
            assignment: list[str | None] = [None] * len(ids)
            for c in new:
                for i in c.members:
                    assignment[i] = c.id
            store.set_memberships(conn, ids, assignment)
            store.refresh_sizes(conn)
            sizes = {c["id"]: c["size"] for c in store.active_clusters(conn)}
        report.clusters = len(sizes)
        report.memories_clustered = sum(len(c.members) for c in new)
        report.sizes = sorted(({"id": c.id, "topic": c.topic, "size": sizes.get(c.id, len(c.members))}
                               for c in new), key=lambda s: (-s["size"], s["topic"], s["id"]))
        return report

    @staticmethod
    def _merge_skills(conn: "sa.Connection", survivors: list[_NewCluster]) -> None:
        """Skill state after merges, from the rows as they are now (locked): the skill hub
        may have published a skill since the snapshot was read."""
        if not survivors:
            return
        rows = store.cluster_rows(conn, [x for c in survivors for x in [c.id, *c.absorbed]], lock=True)
        for c in survivors:
            if c.id not in rows:
                continue
            before = _skill_state(rows[c.id])
            merged = merge_skill_state(before, [_skill_state(rows[a]) for a in c.absorbed if a in rows])
            if merged != before:
                c.skill = merged

    # -- topics ---------------------------------------------------------------------------

    def _label(self, new: list[_NewCluster], ids: list[str], vectors: np.ndarray, report: ClusteringReport) -> None:
        """LLM labels where a model is configured, rules (distinctive terms) otherwise or
        when it fails. After the endpoint is found unavailable, the rest of the run uses
        rules instead of waiting on retries once per cluster."""
        todo = [c for c in new if c.needs_topic]
        if not todo:
            return
        reps = {c.id: self._representatives(c, vectors) for c in todo}
        with self.db.engine.connect() as conn:
            if self.ctx.provider.name == "rules":
                texts = store.member_texts(conn)
            else:
                wanted = {ids[i] for c in todo for i in reps[c.id]}
                texts = store.member_texts(conn, sorted(wanted))
        need_rules: list[_NewCluster] = []
        llm_up = self.ctx.provider.name != "rules"
        for c in todo:
            sample = [topics.short_text(texts[ids[i]]["summary_l0"] or texts[ids[i]]["content"])
                      for i in reps[c.id] if ids[i] in texts]
            if not llm_up or not sample:
                if sample and self.ctx.provider.name != "rules":  # the LLM is down: the rules stand in
                    self.ctx.fallback.count_fallback("label_cluster")
                need_rules.append(c)
                continue
            try:
                # a model may echo text it was shown: its label is redacted like any stored text
                c.topic = topics.clean_label(self.ctx.redactor.redact(self.ctx.provider.label_cluster(sample)))
                report.topics_llm += 1
            except LLMError as exc:
                report.llm_failures += 1
                log.warning("cluster %s: topic by rules (LLM: %s)", c.id[:8], exc)
                self.ctx.fallback.count_fallback("label_cluster")
                need_rules.append(c)
                if isinstance(exc, LLMUnavailable):
                    llm_up = False
        if not need_rules:
            return
        if self.ctx.provider.name != "rules":
            with self.db.engine.connect() as conn:
                texts = store.member_texts(conn)
        doc_terms = {mid: topics.terms(topics.member_text(t["content"], t["context"], t["resolution"],
                                                          t["tags"] or []))
                     for mid, t in texts.items()}
        clusters = {c.id: [ids[i] for i in c.members] for c in need_rules}
        fallback = {c.id: topics.short_text(texts.get(ids[reps[c.id][0]], {}).get("summary_l0") or "", 60)
                    for c in need_rules}
        labels = topics.rules_labels(clusters, doc_terms, fallback)
        for c in need_rules:
            c.topic = labels[c.id]
            report.topics_rules += 1

    @staticmethod
    def _representatives(c: _NewCluster, vectors: np.ndarray) -> list[int]:
        """The members closest to the centroid: the most typical texts to show a model."""
        sims = vectors[c.members] @ c.centroid
        order = sorted(range(len(c.members)), key=lambda j: (-float(sims[j]), c.members[j]))
        return [c.members[j] for j in order[: topics.LLM_TEXTS]]

    # -- between batch runs ---------------------------------------------------------------

    def assign_memory_to_cluster(self, conn: "sa.Connection", memory_id: str, embedding: np.ndarray) -> str | None:
        """Join the nearest active cluster when its centroid is close enough, in the caller's
        transaction. Returns the cluster id, or None: the memory then waits for the next batch
        (also when a batch is writing right now; an upload never waits for a batch)."""
        return store.assign_to_nearest(conn, memory_id, embedding, self.settings.cluster_similarity_threshold,
                                       self.dim)

    # -- reads ----------------------------------------------------------------------------

    def get_cluster_memories(self, cluster_id: str) -> list[MemoryRecord]:
        with self.db.engine.connect() as conn:
            return store.cluster_members(conn, cluster_id)

    def list_clusters(self, include_dissolved: bool = False) -> list[dict[str, Any]]:
        with self.db.engine.connect() as conn:
            return [_public(c) for c in store.list_clusters(conn, include_dissolved)]

    def get_cluster(self, cluster_id: str) -> dict[str, Any] | None:
        with self.db.engine.connect() as conn:
            row = store.get_cluster(conn, cluster_id)
        return _public(row) if row is not None else None

    def stats(self) -> dict[str, Any]:
        with self.db.engine.connect() as conn:
            return store.cluster_stats(conn)


def _public(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "topic", "size", "skill_slug", "superseded_slugs", "status", "attempt_member_ids",
            "attempt_status", "attempt_reason", "attempted_at", "created_at", "updated_at")
    out = {k: row.get(k) for k in keys}
    for k in ("attempted_at", "created_at", "updated_at"):
        if out[k] is not None:
            out[k] = out[k].isoformat()
    return out
