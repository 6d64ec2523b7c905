"""ingest_text: plain text straight to memories, archived once, no trajectory rows."""

from __future__ import annotations

import hashlib
from typing import Any

from ultron.db import sessions as session_store
from ultron.memory.service import MemoryService, Provenance


def ingest_text(memory: MemoryService, text: str, agent_id: str | None = None) -> dict[str, Any]:
    db, settings = memory.db, memory.settings
    if not text or not text.strip():
        raise ValueError("text must not be empty")
    if settings.raw_archive:
        with db.engine.begin() as conn:
            session_store.archive_text(conn, agent_id=agent_id, content_hash=hashlib.sha256(text.encode()).hexdigest(),
                                       content=text.encode())
    with memory.ctx.llm_batch():
        candidates = memory.provider.extract_from_text(text)
        keep = [c for c in candidates if c["confidence"] >= settings.memory_min_confidence]
        results = [memory.upload_memory(c["content"], c["context"], c["resolution"], list(c["tags"]) + ["text"],
                                        provenance=Provenance(agent_id=agent_id), kind=c["kind"],
                                        tools_used=c["tools_used"], confidence=c["confidence"]) for c in keep]
    return {
        "memories": [{**r.record.to_dict("full"), "action": r.action} for r in results],
        "total_memories": len(results),
        "dropped_low_confidence": len(candidates) - len(keep),
    }
