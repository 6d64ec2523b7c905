"""Consolidation: near-duplicate memories already in the store merged in place, pair by
pair, each only with a memory of the same type and owner (the agent, and whether it is
shared), so a merge never carries one agent's text into another's view. Kept apart from
``ultron.memory.service``, which calls it under its lease."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ultron.db import feedback as feedback_store
from ultron.db import fallback_marks as marks_store
from ultron.db import memories as store
from ultron.db import memory_files as file_store
from ultron.db import outcomes as outcome_store
from ultron.db.memories import MemoryRecord
from ultron.heuristics.merge import names_different_things
from ultron.llm.errors import LLMError

if TYPE_CHECKING:
    from ultron.memory.service import MemoryService


def consolidate_pairs(self: "MemoryService", max_merges: int, batch_size: int) -> dict[str, Any]:
    """Near-duplicate pairs merged, batch by batch (``MemoryService.consolidate`` holds the
    lease): each active memory's nearest of the same type and owner, through the HNSW index."""
    merged = examined = 0
    after = ""
    while merged < max_merges:
        with self.db.engine.connect() as conn:
            batch = store.active_ids_after(conn, after, batch_size)
        if not batch:
            break
        for memory_id in batch:
            after = memory_id
            if merged >= max_merges:
                break
            with self.db.engine.begin() as conn:
                store.set_ef_search(conn, self.settings.hnsw_ef_search)
                [rec] = store.get_records(conn, [memory_id]) or [None]
                if rec is None or rec.status != "active":
                    continue
                examined += 1
                store.lock_type(conn, rec.memory_type)
                emb = store.embedding_of(conn, rec.id)
                near = [(o, sim) for o, sim in store.nearest_of_type(conn, rec.memory_type, emb, k=2,
                                                                     owner=rec.agent_id, shared=rec.shared)
                        if o.id != rec.id and sim >= self.settings.dedup_similarity_threshold]
                sims = self._content_similarities(rec.body(), near)
                for (other, sim), content_sim in zip(near, sims):
                    if (content_sim < self.settings.dedup_similarity_threshold
                            or names_different_things(rec.content, other.content)):
                        continue
                    keep, drop = sorted((rec, other), key=lambda r: (r.created_at, r.id))
                    _absorb(self, conn, keep, drop, sim)
                    merged += 1
                    break
    return {"examined": examined, "merged": merged}

def _absorb(self: "MemoryService", conn, keep: MemoryRecord, drop: MemoryRecord, sim: float) -> None:
    """The older record absorbs the newer: contributions, hits, feedback, outcomes, files, tags."""
    body = drop.body()
    existing = keep.body()
    store.move_contributions(conn, drop.id, keep.id)
    try:
        merged = self.provider.merge_memories(existing, body)
    except LLMError:
        merged = existing
    new_body = merged if merged != existing else None
    summaries = None
    if new_body:
        summaries, fell_back = self._summaries_answer(new_body)
        marks_store.update_fallback_marks(conn, keep.id, **marks_store.marks_for({"summarize": fell_back}))
    store.update_after_merge(
        conn, keep.id, tags=sorted(set(keep.tags) | set(drop.tags)), body=new_body,
        summaries=summaries, embedding=self._embed(new_body) if new_body else None, merge_pending=False)
    store.add_hits(conn, [keep.id], drop.hit_count)
    feedback_store.move_memory_feedback(conn, drop.id, keep.id)
    outcome_store.move_memory_outcomes(conn, drop.id, keep.id)
    file_store.move_files(conn, drop.id, keep.id)
    store.delete_records(conn, [drop.id])
