"""TrajectoryService: sessions → task segments → quality labels, incrementally.

The SDK exposes it as ``Ultron().trajectory_service``; memory extraction belongs to the
Memory Hub (``ultron.memory.extract``) and SFT export to ``ultron.sft``. It never
crashes on an LLM problem: a session whose segmentation fails stays
``segmented=0`` and a segment whose analysis fails stays ``labeled=0``; both are
retried by the next run, and the reason is returned for the run's log/metadata.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ultron.claims import work_claimed, worker_id
from ultron.context import ServiceContext, records_llm_usage
from ultron.db import claims as claim_store
from ultron.db import segments as store
from ultron.db import sessions as session_store
from ultron.db import openings
from ultron.db import outcomes as outcome_store
from ultron.learned.lessons import teaches
from ultron.learned.units import RepeatIndex, opening_keys, strip_repeated
from ultron.heuristics.quality import score_trajectory
from ultron.heuristics.segmenter import with_closing
from ultron.llm.errors import LLMError
from ultron.llm.usage import LLMUsage
from ultron.providers import LLMProvider
from ultron.sessions.identity import agent_session_id
from ultron.trajectory.segmentation import fingerprint, segment_messages
from ultron.trajectory.outcome import session_outcome

log = logging.getLogger("ultron.trajectory")


@dataclass
class SegmentInfo:
    index: int
    start_line: int
    end_line: int
    topic: str
    fingerprint: str
    action: str  # new | kept | duplicate
    id: str | None = None


@dataclass
class SessionSegmentation:
    partition_key: str | None
    agent_id: str
    session_file: str
    status: str  # segmented | pending
    reason: str | None = None
    segments: list[SegmentInfo] = field(default_factory=list)
    replaced: int = 0
    archived_memories: int = 0
    windows: int = 0
    truncated_messages: int = 0


@dataclass
class SegmentLabel:
    segment_id: str
    agent_id: str
    session_file: str
    start_line: int
    end_line: int
    status: str  # labeled | pending
    partition_key: str | None = None
    overall_score: float | None = None
    task_type: str | None = None
    reason: str | None = None
    #: the session's outcome counted for what was served to it, when this label completed it
    attribution: dict[str, Any] | None = None


class TrajectoryService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.db = ctx.db
        self.settings = ctx.settings

    @property
    def provider(self) -> LLMProvider:
        return self.ctx.provider

    @property
    def usage(self) -> LLMUsage:
        return self.provider.usage

    # -- segmentation -------------------------------------------------------------------

    @records_llm_usage
    def segment_pending_sessions(self, batch_size: int = 50, *, partition_key: str | None = None
                                 ) -> list[SessionSegmentation]:
        """Segment up to ``batch_size`` pending sessions this worker claims; sessions other
        live workers hold are theirs (``ultron.claims``), a failed one is given back."""
        me, lease = worker_id(), self.settings.claim_lease_seconds
        return work_claimed(
            self.db.engine,
            lambda conn, n, tried: claim_store.claim_sessions(conn, me, lease, n, partition_key, tried),
            lambda p: p.record_id, lambda conn, p: claim_store.release_session(conn, p.record_id, me), batch_size,
            self.segment_session, lambda result: result.status == "segmented")

    def segment_session(self, session: store.PendingSession) -> SessionSegmentation:
        result = SessionSegmentation(session.partition_key, session.agent_id, session.session_file, "pending")
        with self.db.engine.connect() as conn:
            messages = list(session_store.iter_messages(conn, session.record_id))
        try:
            run = segment_messages(messages, self.provider, self.settings.segment_budget_tokens)
        except LLMError as exc:
            result.reason = str(exc)
            log.warning("%s: segmentation left pending: %s", session.session_file, exc)
            return result
        result.windows, result.truncated_messages = run.windows, run.truncated_messages
        with self.db.engine.begin() as conn:
            session_store.lock_record_key(conn, session.agent_id, session.session_file)
            if store.current_hash(conn, session.record_id) != session.content_hash:
                result.reason = "the session file changed while it was being segmented; retried next run"
                return result
            existing = {row.fingerprint: row for row in store.segments_for(conn, session.agent_id, session.session_file)}
            wanted: set[str] = set()
            for index, span in enumerate(run.spans):
                msgs = messages[span.start : span.end + 1]
                fp = fingerprint(msgs)
                info = SegmentInfo(index, msgs[0].line, msgs[-1].line, span.topic, fp, "kept")
                if fp in wanted:
                    info.action = "duplicate"  # same content twice in one file: UNIQUE keeps one
                elif fp in existing:
                    info.id = existing[fp].id
                    store.move_segment(conn, info.id, index, info.start_line, info.end_line)
                else:
                    info.id = store.insert_segment(
                        conn, agent_id=session.agent_id, session_file=session.session_file, segment_index=index,
                        start_line=info.start_line, end_line=info.end_line, fingerprint=fp, topic=span.topic)
                    info.action = "new"
                wanted.add(fp)
                result.segments.append(info)
            for fp, old in existing.items():
                if fp not in wanted:
                    # The seed's memory invalidation: archive by tag, delete, the new one replaces it.
                    result.archived_memories += store.archive_memories_by_tag(conn, f"segment:{old.id[:8]}")
                    store.delete_segment(conn, old.id)
                    result.replaced += 1
            store.mark_segmented(conn, session.record_id)
        result.status = "segmented"
        return result

    # -- labelling ----------------------------------------------------------------------

    @records_llm_usage
    def label_pending_segments(self, batch_size: int = 50, *, partition_key: str | None = None) -> list[SegmentLabel]:
        """Label up to ``batch_size`` unlabeled segments this worker claims (see segment_pending_sessions)."""
        agent_id = session_file = None
        if partition_key is not None:
            session = self.session_for_partition(partition_key)
            if session is None:
                return []
            agent_id, session_file = session.agent_id, session.session_file
        me, lease = worker_id(), self.settings.claim_lease_seconds
        return work_claimed(
            self.db.engine,
            lambda conn, n, tried: claim_store.claim_unlabeled(conn, me, lease, n, agent_id, session_file, tried),
            lambda seg: seg.id, lambda conn, seg: claim_store.release_segment(conn, seg.id, me), batch_size,
            self.label_segment, lambda label: label.status == "labeled")

    def label_segment(self, seg: store.SegmentRow) -> SegmentLabel:
        out = SegmentLabel(seg.id, seg.agent_id, seg.session_file, seg.start_line, seg.end_line, "pending",
                           partition_key=seg.partition_key)
        with self.db.engine.connect() as conn:
            # a closing "thanks, that worked" that opens the next task's message confirms this one
            messages = with_closing(store.segment_messages(conn, seg), store.message_after(conn, seg))
        keys = opening_keys(messages)
        with self.db.engine.begin() as conn:   # this session counts towards the harness's sentences
            openings.record(conn, seg.agent_id, seg.session_file, keys)
            repeats = RepeatIndex(openings.session_counts(conn, keys))
        try:
            judge = self.provider.judge(messages)
            metrics = score_trajectory(messages, judge=judge, judge_weight=self.settings.quality_judge_weight)
            metrics["summary"].update(teaches(strip_repeated(messages, repeats), metrics["summary"].get("task_type")))
        except LLMError as exc:
            out.reason = f"quality judge unavailable: {exc}"
            return out
        except Exception as exc:  # noqa: BLE001 - a scorer bug must not stop the batch
            log.exception("quality analysis of segment %s failed", seg.id)
            out.reason = f"quality analysis failed: {type(exc).__name__}: {exc}"
            return out
        metrics["summary"]["scored_by"] = self.provider.name
        with self.db.engine.begin() as conn:
            store.save_label(conn, seg.id, metrics)
        out.status = "labeled"
        out.overall_score = metrics["summary"]["overall_score"]
        out.task_type = metrics["summary"]["task_type"]
        try:
            out.attribution = self.attribute_session(seg.agent_id, seg.session_file)
        except Exception:  # noqa: BLE001 - the label is saved; the serves stay pending (SDK attribute_session)
            log.exception("attributing the outcome of %s failed", seg.session_file)
        return out

    # -- outcomes ------------------------------------------------------------------------

    def attribute_session(self, agent_id: str, session_file: str) -> dict[str, Any] | None:
        """Once every segment of the session is labelled, count its outcome
        (``ultron.trajectory.outcome``) for each memory and skill served to it and not yet
        counted (``ultron.db.outcomes.attribute``: idempotent). None when the session is not
        fully scored or nothing served to it waits; else the outcome and what it counted."""
        with self.db.engine.begin() as conn:
            state = store.session_scoring(conn, agent_id, session_file)
            if state is None or not state.complete:
                return None
            session_id = agent_session_id(state.agent_session_id, session_file)
            if not outcome_store.has_pending(conn, session_id):
                return None
            result = session_outcome([s.quality_metrics for s in store.segments_for(conn, agent_id, session_file)],
                                     self.settings.trajectory_memory_score_threshold)
            counted = outcome_store.attribute(conn, session_id, result.outcome, self.settings.utility_outcome_weight,
                                              served_before=state.updated_at)
        return {"session_id": session_id, **result.to_dict(), **counted}

    # -- eligibility and stats ------------------------------------------------------------

    def is_memory_eligible(self, quality_metrics: dict[str, Any] | str | None) -> bool:
        return _score(quality_metrics) >= self.settings.trajectory_memory_score_threshold

    def is_sft_eligible(self, quality_metrics: dict[str, Any] | str | None, min_score: float | None = None) -> bool:
        """``min_score`` replaces ULTRON_TRAJECTORY_SFT_SCORE_THRESHOLD for one export."""
        floor = self.settings.trajectory_sft_score_threshold if min_score is None else min_score
        return _score(quality_metrics) >= floor

    def get_trajectory_stats(self) -> dict[str, Any]:
        s = self.settings
        with self.db.engine.connect() as conn:
            seg = store.segment_stats(conn, s.trajectory_memory_score_threshold, s.trajectory_sft_score_threshold,
                                      s.trajectory_excellent_score_threshold)
            sessions = store.session_counts(conn)
        return {
            "sessions": sessions,
            "segments": {k: seg[k] for k in ("total", "labeled", "memory_eligible", "sft_eligible", "memory_extracted")},
            "score_buckets": {"excellent": seg["excellent"], "usable": seg["usable"], "weak": seg["weak"]},
            "thresholds": {"excellent": s.trajectory_excellent_score_threshold,
                           "memory": s.trajectory_memory_score_threshold, "sft": s.trajectory_sft_score_threshold},
            "llm_provider": s.resolved_llm_provider,
        }

    def session_for_partition(self, partition_key: str) -> store.PendingSession | None:
        with self.db.engine.connect() as conn:
            return store.session_by_partition(conn, partition_key)

    def segments_for(self, agent_id: str, session_file: str) -> list[store.SegmentRow]:
        with self.db.engine.connect() as conn:
            return store.segments_for(conn, agent_id, session_file)

    def message_lines(self, agent_id: str, session_file: str) -> list[int]:
        with self.db.engine.connect() as conn:
            return store.message_lines(conn, agent_id, session_file)

    def segments_for_partition(self, partition_key: str) -> list[store.SegmentRow]:
        with self.db.engine.connect() as conn:
            session = store.session_by_partition(conn, partition_key)
            return store.segments_for(conn, session.agent_id, session.session_file) if session else []


def _score(quality_metrics: dict[str, Any] | str | None) -> float:
    """overall_score from the stored JSON only; anything unreadable is not eligible."""
    import json

    if isinstance(quality_metrics, str):
        try:
            quality_metrics = json.loads(quality_metrics)
        except ValueError:
            return -1.0
    try:
        return float(quality_metrics["summary"]["overall_score"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        return -1.0
