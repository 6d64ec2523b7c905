"""Redo what the rules did for a memory while the LLM was down.

During an outage a memory's type, summaries or merged body may come from the rules
(``ultron.providers.fallback``); those tasks are marked in ``memory_records.fallback_tasks``.
This maintenance step asks the configured LLM again for each marked memory — reclassify,
resummarise, re-merge from its contributions (and re-embed when the text changed) — and
clears a mark only when the LLM answered: a failure leaves it for the next run. With the
rules configured there is nothing better to redo with, so nothing is done (nothing is
marked then either).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ultron.claims import lease
from ultron.db import fallback_marks as marks_store
from ultron.db import memories as store
from ultron.llm.errors import LLMError
from ultron.llm.tokens import truncate_to_tokens
from ultron.memory.service import MemoryService, _body, embedding_text
from ultron.vocabulary import L0_TOKENS, L1_TOKENS

log = logging.getLogger("ultron.memory")


@dataclass
class Redo:
    memory_id: str
    status: str                      # redone | pending | changed
    redone: list[str] = field(default_factory=list)
    still_marked: list[str] = field(default_factory=list)
    retyped: bool = False
    reason: str | None = None


def redo_fallbacks(memory: MemoryService, batch_size: int = 100) -> list[Redo]:
    """Every marked memory (up to ``batch_size``) redone by the LLM; [] with the rules provider."""
    if memory.provider.name == "rules":
        return []
    # one worker redoes the marks; a second arriving meanwhile skips rather than asking the
    # LLM the same questions again (the lease expires if the first one dies)
    with lease(memory.db.engine, "redo_fallbacks", memory.settings.claim_lease_seconds) as (_me, busy):
        if busy is not None:
            log.info("fallback redo skipped: %s", busy)
            return []
        with memory.db.engine.connect() as conn:
            marked = marks_store.marked_for_redo(conn, batch_size)
        with memory.ctx.llm_batch():
            return [_redo(memory, memory_id, tasks) for memory_id, tasks in marked]


def _redo(memory: MemoryService, memory_id: str, tasks: list[str]) -> Redo:
    with memory.db.engine.connect() as conn:
        found = store.get_records(conn, [memory_id])
        contributions = store.contribution_rows(conn, memory_id) if "merge_memories" in tasks else []
    out = Redo(memory_id, "pending")
    if not found:
        out.status, out.reason = "changed", "deleted"
        return out
    rec, provider = found[0], memory.provider
    seen = rec.body()
    body = new_body = None
    left = set(tasks)
    try:
        if "merge_memories" in tasks:
            if contributions:  # the body is rebuilt from its sources, as forget built it
                body = _body(contributions[0])
                for extra in contributions[1:]:
                    body = provider.merge_memories(body, _body(extra))
                new_body = body if body != seen else None
            left.discard("merge_memories")
        text = new_body or seen
        memory_type = None
        if "classify_memory" in tasks:
            kind = provider.classify_memory(text["content"], text["context"], text["resolution"], rec.tags)
            memory_type = kind if kind != rec.memory_type else None
            left.discard("classify_memory")
        summaries = None
        if "summarize" in tasks or new_body is not None:
            l0, l1 = provider.summarize(text["content"], text["context"], text["resolution"])
            summaries = truncate_to_tokens(l0, L0_TOKENS), truncate_to_tokens(l1, L1_TOKENS)
            left.discard("summarize")
    except LLMError as exc:  # the marks stay; nothing half-done is written
        out.reason = str(exc)[:300]
        log.warning("memory %s: fallback redo postponed: %s", memory_id[:8], exc)
        out.still_marked = sorted(tasks)
        return out
    embedding = None
    if new_body is not None:
        memory.check_embedding_profile()
        embedding = memory.embedder.embed_one(embedding_text(new_body))
    with memory.db.engine.begin() as conn:
        applied = marks_store.apply_redo(conn, memory_id, seen=seen, memory_type=memory_type, body=new_body,
                                   summaries=summaries, embedding=embedding, marks=sorted(left))
    if not applied:
        out.status, out.reason, out.still_marked = "changed", "changed while being redone", sorted(tasks)
        return out
    out.status, out.redone, out.still_marked = "redone", sorted(set(tasks) - left), sorted(left)
    out.retyped = memory_type is not None
    return out
