"""Memories from good task segments: the Memory Hub's side of the pipeline.

A segment is extracted all-or-nothing and exactly once: the slow work (the provider's
extraction, redaction, classification, embedding) happens before the transaction; the
claim, the inserts/merges and the ``memory_extracted`` mark commit together. An LLM
failure leaves the segment pending for the next run.

Each memory is linked to the repository files its segment read or edited
(:mod:`ultron.memory.files` has the rule), so a search from a checkout can tell when
they changed. Finding them is best effort: a session from another machine, or any
failure, records no files and extracts the memories all the same.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from ultron.claims import work_claimed, worker_id
from ultron.db import claims as claim_store
from ultron.db import memory_files as file_store
from ultron.db import openings
from ultron.db import segments as segment_store
from ultron.heuristics.segmenter import with_closing
from ultron.learned.units import RepeatIndex, opening_keys, strip_repeated
from ultron.llm.errors import LLMError
from ultron.memory import selection
from ultron.memory.files import file_refs
from ultron.memory.repos import LocatedFile, file_lines, locate, session_cwd
from ultron.memory.service import MemoryService, Provenance

log = logging.getLogger("ultron.memory")


@dataclass
class SegmentExtraction:
    segment_id: str
    partition_key: str | None
    status: str  # extracted | pending | skipped
    inserted: int = 0
    merged: int = 0
    dropped_low_confidence: int = 0
    reason: str | None = None


def extract_from_segments(memory: MemoryService, batch_size: int = 50, *, partition_key: str | None = None
                          ) -> list[SegmentExtraction]:
    """Memories from memory-eligible segments not yet extracted.

    The query keeps segments whose overall_score is at or above
    ULTRON_TRAJECTORY_MEMORY_SCORE_THRESHOLD, or that teach a lesson in the user's words
    (:mod:`ultron.memory.selection`, which also picks the candidates kept)."""
    me, lease = worker_id(), memory.settings.claim_lease_seconds
    floor = memory.settings.trajectory_memory_score_threshold
    def extract(seg: segment_store.SegmentRow) -> SegmentExtraction:
        result = SegmentExtraction(seg.id, seg.partition_key, "skipped")
        _extract_segment(memory, seg, result)
        return result

    with memory.ctx.llm_batch():
        return work_claimed(
            memory.db.engine,
            lambda conn, n, tried: claim_store.claim_extractable(conn, me, lease, n, floor, partition_key, tried),
            lambda seg: seg.id, lambda conn, seg: claim_store.release_segment(conn, seg.id, me), batch_size,
            extract, lambda result: result.status == "extracted")


def _extract_segment(memory: MemoryService, seg: segment_store.SegmentRow, result: SegmentExtraction) -> None:
    task_type = (seg.metrics or {}).get("summary", {}).get("task_type")
    with memory.db.engine.connect() as conn:
        stored = with_closing(segment_store.segment_messages(conn, seg), segment_store.message_after(conn, seg))
        # a harness's standing instructions are context, never a lesson: out before anything reads them
        keys = opening_keys(stored)
        messages = strip_repeated(stored, RepeatIndex(openings.session_counts(conn, keys)))
        system = segment_store.system_prompt(conn, seg)
    try:
        candidates = memory.provider.extract_memories(messages, task_type)
        # the worth check reads the segment as stored: a restated standing instruction must be seen
        keep = selection.select(candidates, (seg.metrics or {}).get("summary"), memory.settings, stored, system)
        result.dropped_low_confidence = len(candidates) - len(keep)
        standard = ["trajectory", f"type:{task_type or 'other'}", f"segment:{seg.id[:8]}", f"agent:{seg.agent_id}"]
        prepared = []
        for c in keep:  # slow work (LLM, embedding, redaction) before the transaction
            memory_type, body, tags, emb, fell_back = memory.prepare({**c, "tags": list(c["tags"]) + standard})
            prepared.append((memory_type, body, tags, emb, c, fell_back))
    except LLMError as exc:
        result.status, result.reason = "pending", f"extraction unavailable: {exc}"
        return
    files = _segment_files(memory, seg, stored) if prepared else []
    prov = Provenance(seg.agent_id, seg.id, seg.session_file, seg.start_line, seg.end_line)
    prepared.sort(key=lambda p: p[0])  # per-type locks always taken in the same order
    with memory.db.engine.begin() as conn:
        if not segment_store.claim_for_extraction(conn, seg.id):
            result.reason = "extracted by another run"
            return
        for memory_type, body, tags, emb, c, fell_back in prepared:
            up = memory.store_prepared(conn, memory_type, body, tags, emb, prov, c["kind"], c["tools_used"],
                                       c["confidence"], fallback_tasks=fell_back)
            memory.record_files(conn, up.record.id, files)
            if up.action == "inserted":
                result.inserted += 1
            else:
                result.merged += 1
        segment_store.mark_extracted(conn, seg.id)
    result.status = "extracted"


def _segment_files(memory: MemoryService, seg: segment_store.SegmentRow, messages) -> list[LocatedFile]:
    """The repository files the segment read or edited, placed and hashed on this machine.

    Relative paths need the session's working directory, read from the session's own lines
    (the archived copy, else the file on disk). Never raises: no files is a valid answer."""
    try:
        refs = file_refs(messages)
        if not refs:
            return []
        cwd = None
        if any(not os.path.isabs(os.path.expanduser(r.path)) for r in refs):
            with memory.db.engine.connect() as conn:
                archived = file_store.archived_session(conn, seg.agent_id, seg.session_file)
            cwd = session_cwd(file_lines(seg.session_file, archived), seg.end_line)
            if cwd:
                refs = file_refs(messages, cwd=cwd)
        return locate(refs, cwd)
    except Exception as exc:  # noqa: BLE001 - file references are a bonus, never a reason to fail
        log.warning("segment %s: file references skipped: %s", seg.id[:8], exc)
        return []
