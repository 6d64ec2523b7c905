"""A person's correction of a memory (the memory browser's edit).

Kept apart from :class:`~ultron.memory.service.MemoryService` because it is the one write
that follows a person's wording rather than the pipeline's: no classification and no merge
with near duplicates, but the same redaction, summaries and embedding as an upload, and the
replaced text kept in ``memory_revisions``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ultron.db import browse as browse_store
from ultron.db import fallback_marks as marks_store
from ultron.db import memories as store
from ultron.db.memories import MemoryRecord

if TYPE_CHECKING:
    from ultron.memory.service import MemoryService


def edit_memory(memory: "MemoryService", memory_id: str, *, content: str, context: str = "",
                resolution: str = "", tags: Sequence[str] | None = None, edited_by: str = "") -> MemoryRecord | None:
    """Replace an active memory's content, context, resolution and tags. The type stays.
    None: no active memory with that id. Unchanged text writes nothing (no empty revision)."""
    if not content or not content.strip():
        raise ValueError("content must not be empty")
    redactor = memory.redactor
    body = {k: redactor.redact(v or "") for k, v in (("content", content), ("context", context),
                                                    ("resolution", resolution))}
    clean_tags = sorted({redactor.redact(str(t).strip().lower()) for t in tags or [] if t and str(t).strip()})
    with memory.ctx.llm_batch():  # the summaries may be an LLM call: its usage is recorded
        with memory.db.engine.connect() as conn:
            found = store.get_records(conn, [memory_id], include_archived=False)
        if not found:
            return None
        if found[0].body() == body and sorted(found[0].tags) == clean_tags:
            return found[0]
        memory.check_embedding_profile()
        (l0, l1), summary_fell_back = memory._summaries_answer(body)  # same package: the upload's own steps
        embedding = memory._embed(body)
    with memory.db.engine.begin() as conn:
        found = store.get_records(conn, [memory_id], include_archived=False)
        if not found:  # forgotten or archived while the summaries were written
            return None
        browse_store.save_revision(conn, found[0], edited_by)
        browse_store.apply_edit(conn, memory_id, body, (l0, l1), embedding, clean_tags)
        marks_store.update_fallback_marks(conn, memory_id, **({"add": ["summarize"]} if summary_fell_back
                                                              else {"clear": ["summarize"]}))
        return store.get_records(conn, [memory_id])[0]
