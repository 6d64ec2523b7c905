"""MemoryService: upload (redact → classify → embed → dedup/merge or insert), hybrid
search, details, tier rebalance, consolidation and forget.

The seed's order is kept exactly in ``upload_memory``. Near duplicates are found
through the HNSW index inside a per-type advisory lock, so two concurrent uploads
of the same memory end as one row and one contribution, never two rows.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from ultron import access
from ultron.claims import lease
from ultron.context import EmbeddingProfileMismatch, ServiceContext, records_llm_usage
from ultron.db import browse as browse_store
from ultron.db import clusters as cluster_store
from ultron.db import fallback_marks as marks_store
from ultron.db import feedback as feedback_store
from ultron.db import forget as forget_store
from ultron.db import memories as store
from ultron.db import outcomes as outcome_store
from ultron.db import memory_files as file_store
from ultron.db import search_arms as arms
from ultron.db.search_arms import GraphGone
from ultron.db import vector_indexes as vector_index_store
from ultron.db.memories import MemoryRecord
from ultron.embeddings.query_cache import QUERIES
from ultron.heuristics.merge import names_different_things
from ultron.llm.errors import LLMError
from ultron.llm.tokens import truncate_to_tokens
from ultron.memory.ranking import arm_settings, rank_candidates
from ultron.memory.repos import LocatedFile, Repo, repo_at
from ultron.memory.staleness import StaleFile, reason, stale_files
from ultron.vocabulary import DETAIL_LEVELS, L0_TOKENS, L1_TOKENS

log = logging.getLogger("ultron.memory")

#: how long a process trusts its list of owners with a vector index (``MemoryService._graphs``)
GRAPHS_SECONDS = 30.0

__all__ = ["EmbeddingProfileMismatch", "ForgetResult", "MemoryService", "Provenance", "SearchResult", "UploadResult",
           "embedding_text", "rank_candidates"]


@dataclass
class Provenance:
    agent_id: str | None = None
    segment_id: str | None = None
    session_file: str | None = None
    start_line: int | None = None
    end_line: int | None = None


@dataclass
class UploadResult:
    record: MemoryRecord
    action: str  # inserted | merged
    similarity: float | None = None
    merge_pending: bool = False


@dataclass
class SearchResult:
    record: MemoryRecord
    similarity_score: float
    score: float
    matched: list[str] = field(default_factory=list)  # "vector", "text"
    #: files that changed or vanished in the repository searched from; None = not checked
    stale: list[StaleFile] | None = None

    @property
    def possibly_stale(self) -> bool:
        return bool(self.stale)

    @property
    def stale_reason(self) -> str | None:
        return reason(self.stale) if self.stale else None

    def to_dict(self, detail_level: str = "l1") -> dict[str, Any]:
        out = {**self.record.to_dict(detail_level), "similarity_score": round(self.similarity_score, 4),
               "score": round(self.score, 6), "matched": self.matched}
        if self.stale is not None:  # only a search given a repository says anything about staleness
            out.update(possibly_stale=self.possibly_stale, stale_reason=self.stale_reason,
                       stale_files=[f.to_dict() for f in self.stale])
        return out


class MemoryService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.db = ctx.db
        self.settings = ctx.settings
        #: scope sets read from the store, by name: (when read, the set) (``_scopes``)
        self._scope_cache: dict[str, tuple[float, frozenset[str]]] = {}

    @property
    def provider(self):
        return self.ctx.provider

    @property
    def embedder(self):
        return self.ctx.embedder

    @property
    def redactor(self):
        return self.ctx.redactor

    def check_embedding_profile(self) -> None:
        self.ctx.check_embedding_profile()

    # -- upload ------------------------------------------------------------------------------

    @records_llm_usage
    def upload_memory(self, content: str, context: str = "", resolution: str = "", tags: Sequence[str] | None = None,
                      *, provenance: Provenance | None = None, kind: str | None = None,
                      tools_used: Sequence[str] | None = None, confidence: float | None = None,
                      shared: bool = False) -> UploadResult:
        """Redact, classify, embed, then merge into a near duplicate of the same type, owner and
        ``shared`` flag, or insert (WARM, active). An agent-bound caller uploads only as its
        agents (``ultron.access.writing_agent``); ``shared``: every agent's token sees it."""
        if not content or not content.strip():
            raise ValueError("content must not be empty")
        prov = provenance or Provenance()
        prov = replace(prov, agent_id=access.writing_agent(prov.agent_id))
        memory_type, body, tags, embedding, fell_back = self.prepare(
            {"content": content, "context": context, "resolution": resolution, "tags": list(tags or [])})
        with self.db.engine.begin() as conn:
            return self.store_prepared(conn, memory_type, body, tags, embedding, prov, kind,
                                       tools_used, confidence, fallback_tasks=fell_back, shared=bool(shared))

    def store_prepared(self, conn, memory_type: str, body: dict[str, str], tags: list[str], embedding: np.ndarray,
               prov: Provenance, kind: str | None, tools_used: Sequence[str] | None,
               confidence: float | None, *, fallback_tasks: Sequence[str] = (), shared: bool = False) -> UploadResult:
        """Merge into a near duplicate of the same type and owner (the agent, and whether it is
        shared: a merge never carries one agent's text to another's view), or insert.
        ``fallback_tasks``: what :meth:`prepare` had the rules do (a new memory keeps them as
        marks for redo_fallbacks)."""
        store.set_ef_search(conn, self.settings.hnsw_ef_search)
        store.lock_type(conn, memory_type)
        owner = {"owner": prov.agent_id, "shared": shared}
        same = store.same_content_of_type(conn, memory_type, body["content"], **owner)
        if same is not None:
            return self._merge(conn, same[0], same[1], body, tags, prov, tools_used)
        near = [(c, sim) for c, sim in store.nearest_of_type(conn, memory_type, embedding, k=3, **owner)
                if sim >= self.settings.dedup_soft_threshold]
        for (candidate, sim), content_sim in zip(near, self._content_similarities(body, near)):
            if names_different_things(candidate.content, body["content"]):
                continue    # however close: another flag, file, number or error is another fact
            if content_sim >= self.settings.dedup_similarity_threshold or (
                    content_sim >= self.settings.dedup_soft_threshold and self._same(candidate, body)):
                return self._merge(conn, candidate, sim, body, tags, prov, tools_used)
        (l0, l1), summary_fell_back = self._summaries_answer(body)
        record = MemoryRecord(
            id="", memory_type=memory_type, tags=tags, summary_l0=l0, overview_l1=l1, kind=kind,
            tools_used=list(tools_used or []), confidence=confidence, agent_id=prov.agent_id,
            segment_id=prov.segment_id, session_file=prov.session_file, start_line=prov.start_line,
            end_line=prov.end_line, shared=shared, **body)
        store.insert_record(conn, record, embedding)
        marks_store.update_fallback_marks(conn, record.id,
                                          add=[*fallback_tasks, *(["summarize"] if summary_fell_back else [])])
        # between batch runs a new memory joins the nearest close-enough cluster (same transaction)
        cluster_store.assign_to_nearest(conn, record.id, embedding, self.settings.cluster_similarity_threshold,
                                        int(self.settings.embedding_dim))
        # The first body is a contribution too: forget() can rebuild a memory from what remains.
        store.add_contribution(conn, record.id, body["content"], body["context"], body["resolution"], None,
                               prov.agent_id, prov.segment_id, prov.session_file, tags=tags,
                               tools_used=record.tools_used, start_line=prov.start_line, end_line=prov.end_line)
        return UploadResult(record, "inserted")

    def prepare(self, candidate: dict[str, Any]) -> tuple[str, dict[str, str], list[str], np.ndarray, list[str]]:
        """Redact, classify and embed, outside any transaction (the slow part of an upload).

        Segment extraction prepares all of a segment's memories first, then stores them
        with :meth:`store_prepared` in one transaction. The last item lists the tasks the
        rules did because the LLM failed (``["classify_memory"]`` or none), for the marks."""
        body = {k: self.redactor.redact(candidate.get(k) or "") for k in ("content", "context", "resolution")}
        tags = sorted({self.redactor.redact(str(t).strip().lower())
                       for t in candidate.get("tags") or [] if t and str(t).strip()})
        # Server-side extraction already read the type off the evidence (an error fixed, a
        # correction, ...); otherwise classify like any upload.
        fell_back: list[str] = []
        memory_type = candidate.get("type_hint")
        if not memory_type:
            answer = self.ctx.fallback.run("classify_memory", body["content"], body["context"], body["resolution"],
                                           tags)
            memory_type, fell_back = answer.value, (["classify_memory"] if answer.fell_back else [])
        self.check_embedding_profile()
        return memory_type, body, tags, self._embed(body), fell_back

    def _merge(self, conn, candidate: MemoryRecord, sim: float, body: dict[str, str], tags: list[str],
               prov: Provenance, tools_used: Sequence[str] | None = None) -> UploadResult:
        store.add_contribution(conn, candidate.id, body["content"], body["context"], body["resolution"], sim,
                               prov.agent_id, prov.segment_id, prov.session_file, tags=tags,
                               tools_used=list(tools_used or []), start_line=prov.start_line,
                               end_line=prov.end_line)
        merged_tags = sorted(set(candidate.tags) | set(tags))
        existing = candidate.body()
        new_body, pending = None, False
        try:
            merged = self.provider.merge_memories(existing, body)
            if merged != existing:
                new_body = merged
        except LLMError as exc:  # keep the text; the next duplicate retries the merge
            log.warning("memory %s: merge postponed: %s", candidate.id[:8], exc)
            pending = True
        summaries = embedding = None
        if new_body is not None:
            summaries, fell_back = self._summaries_answer(new_body)
            embedding = self._embed(new_body)
            marks_store.update_fallback_marks(conn, candidate.id, **marks_store.marks_for({"summarize": fell_back}))
        store.update_after_merge(conn, candidate.id, tags=merged_tags, body=new_body, summaries=summaries,
                                 embedding=embedding, merge_pending=pending)
        [record] = store.get_records(conn, [candidate.id])
        return UploadResult(record, "merged", sim, pending)

    def _summaries_answer(self, body: dict[str, str]) -> tuple[tuple[str, str], bool]:
        """The summaries, and whether the rules wrote them (the LLM failed)."""
        answer = self.ctx.fallback.run("summarize", body["content"], body["context"], body["resolution"])
        l0, l1 = answer.value
        return (truncate_to_tokens(l0, L0_TOKENS), truncate_to_tokens(l1, L1_TOKENS)), answer.fell_back

    def _same(self, candidate: MemoryRecord, body: dict[str, str]) -> bool:
        return self.ctx.fallback.same_memory(candidate.body(), body)

    def _embed(self, body: dict[str, str]) -> np.ndarray:
        return self.embedder.embed_one(embedding_text(body))

    def _content_similarities(self, body: dict[str, str], near: list[tuple[MemoryRecord, float]]) -> list[float]:
        """Cosine of the contents themselves, for candidates already close as whole memories.

        The stored embedding covers content, context and resolution, so two memories that share
        their context (the same session's date and previous turns, the same task description)
        look alike however different what they say. Dedup asks whether the contents agree; when
        neither side has a context or resolution, the whole-memory cosine already is that."""
        candidates = [r for r, _ in near]
        if not candidates:
            return []
        if not any(r.context or r.resolution for r in candidates) and not (body["context"] or body["resolution"]):
            return [sim for _, sim in near]
        vectors = np.asarray(self.embedder.embed([body["content"]] + [r.content for r in candidates]),
                             dtype=np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return [float(v @ vectors[0]) for v in vectors[1:]]

    # -- search --------------------------------------------------------------------------------

    def search_memories(self, query: str, detail_level: str = "l1", limit: int = 10, tier: str | None = None,
                        tags: Sequence[str] | None = None, agent_id: str | None = None,
                        repo_root: str | None = None, explore_seed: str | None = None,
                        count_hits: bool = True) -> list[SearchResult]:
        """Hybrid search: HNSW ANN and BM25 over the GIN index, fused (``ultron.memory.ranking``), then
        the tier boost, time decay and feedback factor. ``repo_root``: a checkout to check the
        results against (:meth:`mark_stale`). ``explore_seed``: draw each memory's outcome
        utility from its posterior, seeded by this (the bundle of a session whose outcome will
        be counted; ``ranking.utility_factor``). ``count_hits=False``: a person browsing, whose
        looking is not an agent using the memory (tiers follow agents' use)."""
        if detail_level not in DETAIL_LEVELS:
            raise ValueError("detail_level must be 'l0' or 'l1' (use get_memory_details for full text)")
        if not query or not query.strip() or limit <= 0:
            return []
        self.check_embedding_profile()
        explore = random.Random(explore_seed) if explore_seed is not None else None
        found = self._search(query, None, limit, {"tier": tier, "tags": tags, "agent_id": agent_id}, explore,
                             count_hits=count_hits)
        return self.mark_stale(found, repo_root) if repo_root is not None else found

    # -- files and staleness ---------------------------------------------------------------------

    def record_files(self, conn, memory_id: str, files: Sequence[LocatedFile]) -> int:
        """Link a memory to the repository files it was learned from (on the caller's transaction)."""
        return file_store.record_files(conn, memory_id, [
            {"remote": f.remote, "path": f.path, "sha256": f.sha256, "edited": f.edited} for f in files])

    def stale_files_of(self, repo_root: str, memory_ids: Sequence[str], repo: Repo | None = None
                       ) -> dict[str, list[StaleFile]] | None:
        """Per memory, its recorded files in the repository at ``repo_root`` that changed or
        vanished there ([] when none did); None when ``repo_root`` is not in a git repository.
        ``repo``: ``repo_at(repo_root)`` when the caller has it already (it costs two git calls)."""
        repo = repo or repo_at(repo_root)
        if repo is None:
            return None
        with self.db.engine.connect() as conn:
            recorded = file_store.files_of(conn, list(memory_ids), repo.remote)
        return {m: stale_files(repo, recorded.get(m, [])) for m in memory_ids}

    def learned_in_repo(self, repo_root: str, limit: int, agent_id: str | None = None) -> list[SearchResult]:
        """Memories learned while working in the repository at ``repo_root`` (its recorded
        files), most recently seen first, marked against the checkout (:meth:`mark_stale`):
        what a session starting there should know even before it says what it will do."""
        repo = repo_at(repo_root)
        if repo is None or limit <= 0:
            return []
        with self.db.engine.connect() as conn:
            ids = file_store.learned_in(conn, repo.remote, limit, agent_id, visible=access.visible_agents())
            records = {r.id: r for r in store.get_records(conn, ids, include_archived=False)}
        results = [SearchResult(records[i], 0.0, 0.0, ["repository"]) for i in ids if i in records]
        return self.mark_stale(results, repo_root, repo)

    def mark_stale(self, results: list[SearchResult], repo_root: str, repo: Repo | None = None
                   ) -> list[SearchResult]:
        """Mark results whose files changed or vanished in ``repo_root``, multiply their score by
        ULTRON_STALE_SCORE_FACTOR and re-order (stable). Not a repository: nothing is marked."""
        found = self.stale_files_of(repo_root, [r.record.id for r in results], repo)
        if found is None:
            return results
        for r in results:
            r.stale = found.get(r.record.id, [])
            if r.stale:
                r.score *= self.settings.stale_score_factor
        return sorted(results, key=lambda r: -r.score)

    def stale_memories(self, repo_root: str) -> dict[str, Any] | None:
        """Every active memory with files in the repository at ``repo_root`` that changed or
        vanished: ``{"repo", "remote", "checked", "stale": [{"memory": L1, "reason", "files"}]}``;
        None when ``repo_root`` is not in a git repository."""
        repo = repo_at(repo_root)
        if repo is None:
            return None
        with self.db.engine.connect() as conn:
            recorded = file_store.files_in_repo(conn, repo.remote)
            stale = {m: files for m, rows in recorded.items() if (files := stale_files(repo, rows))}
            records = {r.id: r for r in store.get_records(conn, sorted(stale))}
        return {"repo": str(repo.root), "remote": repo.remote, "checked": len(recorded),
                "stale": [{"memory": records[m].to_dict("l1"), "reason": reason(files),
                           "files": [f.to_dict() for f in files]}
                          for m, files in sorted(stale.items()) if m in records]}

    def search_memories_batch(self, queries: Sequence[str], detail_level: str = "l1", limit: int = 10,
                              tier: str | None = None, tags: Sequence[str] | None = None,
                              agent_id: str | None = None) -> list[list[SearchResult]]:
        """Several searches at once (an agent planning several sub-tasks): the queries are
        embedded in one batch, then each is searched as ``search_memories`` would."""
        if detail_level not in DETAIL_LEVELS:
            raise ValueError("detail_level must be 'l0' or 'l1' (use get_memory_details for full text)")
        live = [q for q in queries if q and q.strip()]
        if not live or limit <= 0:
            return [[] for _ in queries]
        self.check_embedding_profile()
        vectors = dict(zip(live, QUERIES.embed_many(self.embedder, live)))
        filters = {"tier": tier, "tags": tags, "agent_id": agent_id}
        return [self._search(q, vectors[q], limit, filters) if q in vectors else [] for q in queries]

    def _search(self, query: str, q: np.ndarray | None, limit: int, filters: dict[str, Any],
                explore: random.Random | None = None, *, count_hits: bool = True) -> list[SearchResult]:
        k = max(limit * 4, 40)
        if q is None:
            q = QUERIES.embed(self.embedder, query)
        with self.db.search_engine.connect() as conn:
            visible = access.visible_agents()
            filtered = any(filters.values()) or visible is not None
            graphs = self._graphs(conn) if filtered else frozenset()
            large = self._large(conn) if filtered else frozenset()
            search = functools.partial(arms.candidates, conn, query, q, k=k, plan=arm_settings(self.settings),
                                       visible=visible, large=large, **filters)
            try:
                candidates = search(graphs=graphs)
            except GraphGone:
                self._scope_cache.pop("graphs", None)
                candidates = search(graphs=self._graphs(conn))
            ranked = rank_candidates(candidates, self.settings, limit, explore)
            records = {r.id: r for r in store.get_records(conn, [c["id"] for c in ranked])}
        if count_hits:
            self.db.hits.add(list(records), 1)
            for record in records.values():  # as they are once this search's hit is written
                record.hit_count += 1
        return [SearchResult(records[c["id"]], float(c["similarity"]), c["score"], c["matched"])
                for c in ranked if c["id"] in records]

    def _scopes(self, name: str, read: Callable[[], frozenset[str]]) -> frozenset[str]:
        """``read()``, kept for GRAPHS_SECONDS under ``name``."""
        now = time.monotonic()
        cached = self._scope_cache.get(name)
        if cached is None or now - cached[0] > GRAPHS_SECONDS:
            cached = self._scope_cache[name] = (now, read())
        return cached[1]

    def _graphs(self, conn) -> frozenset[str]:
        """The owners with a vector graph of their own, read at most every GRAPHS_SECONDS (a
        graph built meanwhile only changes how fast, not what, a search finds; one dropped
        meanwhile makes the search read them again: ``GraphGone``)."""
        return self._scopes("graphs", lambda: vector_index_store.valid_scopes(conn))

    def _large(self, conn) -> frozenset[str]:
        """The agents and tags the statistics put well over ``ULTRON_SEARCH_EXACT_MAX``
        memories (``vector_index_store.large_scopes``), read as often as ``_graphs``. Twice
        the cap: the statistics are an estimate and count every memory, not the active ones."""
        at_least = 2 * self.settings.search_exact_max
        return self._scopes("large", lambda: vector_index_store.large_scopes(conn, at_least) if at_least
                            else frozenset())

    def flush_hits(self) -> None:
        """Wait until this process's searches have written their hit counts (``ultron.db.hits``);
        every read of hit counts here does, so a process always sees its own searches."""
        self.db.hits.flush()

    def get_memory_details(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Full records (those the caller may see); an explicit fetch is the strongest adoption
        signal (+2 hits)."""
        self.flush_hits()
        with self.db.engine.begin() as conn:
            records = [r for r in store.get_records(conn, list(ids)) if access.sees(r.agent_id, r.shared)]
            store.add_hits(conn, [r.id for r in records], 2)
            for r in records:
                r.hit_count += 2
            return records

    def get_memory(self, memory_id: str) -> MemoryRecord | None:
        """One record, any status; a plain read (no hit counted, unlike get_memory_details)."""
        self.flush_hits()
        with self.db.engine.connect() as conn:
            found = store.get_records(conn, [memory_id])
        return found[0] if found and access.sees(found[0].agent_id, found[0].shared) else None

    def list_memories(self, limit: int = 50, offset: int = 0, tier: str | None = None,
                      agent_id: str | None = None) -> tuple[list[MemoryRecord], int]:
        """A page of active memories, newest first, and the total that match."""
        if limit < 1 or offset < 0:
            raise ValueError("limit must be at least 1 and offset at least 0")
        self.flush_hits()
        with self.db.engine.connect() as conn:
            return store.list_records(conn, limit=limit, offset=offset, tier=tier, agent_id=agent_id,
                                      visible=access.visible_agents())

    # -- feedback --------------------------------------------------------------------------------

    def feedback(self, memory_id: str, helpful: bool, note: str = "", agent_id: str | None = None
                 ) -> dict[str, Any]:
        """Record an agent's verdict on a memory (``ultron.db.feedback`` has the effects:
        helpful = more hits and fresh recency; not helpful = a lower rank, and COLD after
        ``ULTRON_FEEDBACK_DEMOTE_AFTER`` net negatives). KeyError for an unknown id."""
        self.flush_hits()
        if self.get_memory(memory_id) is None:  # unknown, or not the caller's to see
            raise KeyError(f"no memory with id {memory_id!r}")
        with self.db.engine.begin() as conn:
            row = feedback_store.apply_memory_feedback(conn, memory_id, helpful, self.settings.feedback_demote_after)
            if row is None:
                raise KeyError(f"no memory with id {memory_id!r}")
            feedback_store.record_event(conn, "memory", memory_id, helpful,
                                        self.redactor.redact(note) if note else "", agent_id)
            utility = outcome_store.utilities(conn, "memory", [memory_id])[memory_id]["utility"]
        return {"target_kind": "memory", "target_id": memory_id, "helpful": helpful,
                "helpful_count": row["helpful_count"], "unhelpful_count": row["unhelpful_count"],
                "hit_count": row["hit_count"], "tier": row["tier"], "status": row["status"],
                "utility": round(float(utility), 4)}

    # -- maintenance ---------------------------------------------------------------------------

    def run_tier_rebalance(self) -> dict[str, int]:
        self.flush_hits()
        s = self.settings
        with self.db.engine.begin() as conn:
            return store.rebalance_tiers(conn, s.hot_percentile, s.warm_percentile, s.cold_ttl_days,
                                         demote_after=s.feedback_demote_after)

    @records_llm_usage
    def consolidate(self, max_merges: int = 100, batch_size: int = 500) -> dict[str, Any]:
        """Merge near-duplicate pairs already in the store (same type, cosine of the memories and
        of their contents >= the dedup threshold), batch-wise, each pair found through the HNSW index. The older record
        absorbs the newer one: contributions, hits and tags move over, bodies are merged. A
        second worker arriving while another consolidates skips (``skipped``) instead of
        examining the same pairs again."""
        self.flush_hits()
        with lease(self.db.engine, "consolidate_memories", self.settings.claim_lease_seconds) as (_me, busy):
            if busy is not None:
                log.info("consolidation skipped: %s", busy)
                return {"examined": 0, "merged": 0, "skipped": busy}
            from ultron.memory.consolidation import consolidate_pairs

            return consolidate_pairs(self, max_merges, batch_size)

    # -- forget ----------------------------------------------------------------------------------

    def forget(self, memory_ids: Sequence[str] | None = None, segment_id: str | None = None,
               session_file: str | None = None, agent_id: str | None = None) -> dict[str, int]:
        """The memory stage's part of forgetting, in one transaction (see :meth:`forget_in`).

        Clusters, skills and SFT files built from the forgotten data are not touched here:
        ``Ultron.forget`` (``ultron.forget``) does all of it."""
        with self.db.engine.begin() as conn:
            return self.forget_in(conn, memory_ids, segment_id, session_file, agent_id).counts

    def forget_in(self, conn, memory_ids: Sequence[str] | None = None, segment_id: str | None = None,
                  session_file: str | None = None, agent_id: str | None = None) -> "ForgetResult":
        """Delete everything derived from the given memories / segment / session file / agent,
        on the caller's connection (its transaction).

        Memories that only came from the forgotten source are deleted; a memory that also
        holds other sources' contributions is rebuilt from those (merged again,
        re-embedded, re-summarised) and keeps only their provenance, tags and tools, so
        none of the forgotten text or identifiers survives in it. For a session file or an
        agent, the session rows, parsed messages, segments and raw uploads go too.
        """
        if not any((memory_ids, segment_id, session_file, agent_id)):
            raise ValueError("say what to forget: memory_ids, segment_id, session_file or agent_id")
        out = ForgetResult()
        counts = out.counts
        segment_ids = store.segment_ids_for(conn, segment_id=segment_id, session_file=session_file,
                                            agent_id=agent_id)
        out.segment_ids = list(segment_ids)
        doomed, touched = store.memories_from(conn, memory_ids=memory_ids, segment_ids=segment_ids,
                                              session_file=session_file, agent_id=agent_id)
        before = {r.id: r for r in store.get_records(conn, sorted(doomed | touched))}
        out.clusters = forget_store.memory_clusters(conn, sorted(before))
        taken = store.take_contributions(conn, segment_ids=segment_ids, session_file=session_file,
                                         agent_id=agent_id)
        counts["contributions"] = len(taken)
        gone: dict[str, list[dict[str, Any]]] = {}
        for c in taken:
            gone.setdefault(c["memory_id"], []).append(c)
            out.forgotten_text += [c["content"], c["context"], c["resolution"], " ".join(c["tags"] or [])]
        rebuilt: list[str] = []
        for memory_id in sorted(touched - doomed):
            remaining = store.contribution_rows(conn, memory_id)
            if not remaining or memory_id not in before:
                doomed.add(memory_id)
                continue
            body, merge_fell_back = _body(remaining[0]), False
            for extra in remaining[1:]:
                answer = self.ctx.fallback.run("merge_memories", body, _body(extra))
                body, merge_fell_back = answer.value, merge_fell_back or answer.fell_back
            summaries, summary_fell_back = self._summaries_answer(body)
            store.replace_body(conn, memory_id, body, summaries, self._embed(body))
            marks_store.update_fallback_marks(conn, memory_id, **marks_store.marks_for({"merge_memories": merge_fell_back,
                                                                         "summarize": summary_fell_back}))
            store.set_provenance(conn, memory_id, **_remaining_provenance(before[memory_id], remaining,
                                                                           gone.get(memory_id, [])))
            rebuilt.append(memory_id)
        for memory_id in sorted(doomed | set(rebuilt)):
            rec = before.get(memory_id)
            if rec is not None:  # what these memories said before: labels may have been built from it
                out.forgotten_text += [rec.content, rec.context, rec.resolution, " ".join(rec.tags)]
        for revision in browse_store.revisions_of(conn, sorted(doomed | set(rebuilt))):
            out.forgotten_text += [revision["content"], revision["context"], revision["resolution"],
                                   " ".join(revision["tags"])]
        # a rebuilt memory's earlier texts may quote the forgotten source (a deleted one's go with it)
        revisions_deleted = browse_store.drop_revisions(conn, sorted(doomed | set(rebuilt)))
        cascaded = store.count_contributions(conn, sorted(doomed))
        # a rebuilt memory's file references may name the forgotten session's files: they go too
        files_deleted = file_store.delete_files(conn, sorted(doomed | set(rebuilt)))
        counts["memories_deleted"] = store.delete_records(conn, sorted(doomed))
        counts["memories_rebuilt"] = len(rebuilt)
        out.deleted_memories = sorted(i for i in doomed if i in before)
        out.rebuilt_memories = rebuilt
        out.sessions = forget_store.sessions_matching(conn, session_file=session_file, agent_id=agent_id)
        out.archived_paths = forget_store.archived_paths(conn, session_file=session_file, agent_id=agent_id)
        out.forgotten_text += forget_store.segment_topics(
            conn, segment_ids=[segment_id] if segment_id and not (session_file or agent_id) else [],
            session_file=session_file, agent_id=agent_id)
        counts.update(store.delete_sessions(conn, segment_ids=segment_ids, segment_id=segment_id,
                                            session_file=session_file, agent_id=agent_id))
        out.tables.update({
            "trajectory_records": {"deleted": counts["sessions"], "updated": 0},
            "session_messages": {"deleted": sum(x["messages"] for x in out.sessions), "updated": 0},
            "parse_problems": {"deleted": sum(x["problems"] for x in out.sessions), "updated": 0},
            "raw_user_uploads": {"deleted": counts["raw_uploads"], "updated": 0},
            "task_segments": {"deleted": counts["segments"], "updated": 0},
            "memory_records": {"deleted": counts["memories_deleted"], "updated": len(rebuilt)},
            "memory_contributions": {"deleted": len(taken) + cascaded, "updated": 0},
            "memory_files": {"deleted": files_deleted, "updated": 0},
            "memory_revisions": {"deleted": revisions_deleted, "updated": 0},
        })
        return out

    def records_for_partition(self, partition_key: str) -> list[MemoryRecord]:
        with self.db.engine.connect() as conn:
            return store.records_for_partition(conn, partition_key)

    def stats(self) -> dict[str, Any]:
        self.flush_hits()
        with self.db.engine.connect() as conn:
            return store.memory_counts(conn)


@dataclass
class ForgetResult:
    """What the memory stage forgot, for the steps after it (clusters, skills, files)."""

    #: today's counts: contributions, memories_deleted, memories_rebuilt, segments, sessions, raw_uploads
    counts: dict[str, int] = field(default_factory=dict)
    #: rows per table: {"deleted": n, "updated": n}
    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    segment_ids: list[str] = field(default_factory=list)
    deleted_memories: list[str] = field(default_factory=list)
    rebuilt_memories: list[str] = field(default_factory=list)
    #: clusters that held a deleted or rebuilt memory
    clusters: set[str] = field(default_factory=set)
    #: the texts that are gone (bodies, tags, segment topics): labels built from them go too
    forgotten_text: list[str] = field(default_factory=list)
    #: deleted session rows: agent_id, session_file, partition_key, messages, problems
    sessions: list[dict[str, Any]] = field(default_factory=list)
    #: source paths of the deleted raw archive rows
    archived_paths: list[str] = field(default_factory=list)


def _body(row: dict[str, Any]) -> dict[str, str]:
    return {"content": row["content"], "context": row["context"], "resolution": row["resolution"]}


def _remaining_provenance(record: MemoryRecord, remaining: list[dict[str, Any]], gone: list[dict[str, Any]]
                          ) -> dict[str, Any]:
    """Provenance, tags and tools of a rebuilt memory: those of the contributions that remain.

    The oldest remaining contribution gives the provenance. Tags and tools are the union of
    the remaining contributions'; when one of them predates revision 0004 (its own tags are
    unknown), the memory's tags are kept minus the ``agent:`` / ``segment:`` tags of the
    forgotten sources that no remaining contribution shares."""
    first = remaining[0]
    lines = (first["start_line"], first["end_line"])
    same_source = ((first["agent_id"], first["segment_id"], first["session_file"])
                   == (record.agent_id, record.segment_id, record.session_file))
    if lines == (None, None) and same_source:
        lines = (record.start_line, record.end_line)
    known_tags = {t for c in remaining for t in (c["tags"] or [])}
    if all(c["tags"] is not None for c in remaining):
        tags = known_tags
    else:
        agents = {c["agent_id"] for c in remaining}
        segments = {c["segment_id"][:8] for c in remaining if c["segment_id"]}
        drop = {f"agent:{c['agent_id']}" for c in gone if c["agent_id"] and c["agent_id"] not in agents}
        drop |= {f"segment:{c['segment_id'][:8]}" for c in gone
                 if c["segment_id"] and c["segment_id"][:8] not in segments}
        tags = (set(record.tags) - drop) | known_tags
    if all(c["tools_used"] is not None for c in remaining):
        tools = list(dict.fromkeys(t for c in remaining for t in c["tools_used"]))
    else:
        tools = list(record.tools_used)
    return {"agent_id": first["agent_id"], "segment_id": first["segment_id"], "session_file": first["session_file"],
            "start_line": lines[0], "end_line": lines[1], "tags": sorted(tags), "tools_used": tools}


def embedding_text(body: dict[str, str]) -> str:
    return "\n".join(v for v in (body.get("content"), body.get("context"), body.get("resolution")) if v)
