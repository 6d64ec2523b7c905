"""task_segments and quality_metrics: per session file, downstream of raw_sessions."""

import collections

import dagster as dg

from resources.database import UltronResource
from resources.llm import LLMResource
from ultron.llm.usage import LLMUsage
from ultron.trajectory.coverage import coverage_problems, score_problems
from ultron_assets.partitions import session_partitions
from ultron_assets.raw_sessions import raw_sessions

SEGMENT_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("index", "int"), dg.TableColumn("lines", "string"), dg.TableColumn("topic", "string"),
    dg.TableColumn("fingerprint", "string"), dg.TableColumn("labeled", "bool"), dg.TableColumn("score", "float"),
])


def llm_metadata(usage: LLMUsage, provider: str) -> dict:
    return {
        "llm_provider": provider,
        "llm_calls": usage.calls,
        "llm_prompt_tokens": usage.prompt_tokens,
        "llm_completion_tokens": usage.completion_tokens,
        "llm_retries": usage.retries,
        "llm_failures": usage.failures,
        **({"llm_errors": dg.MetadataValue.json(usage.errors)} if usage.errors else {}),
    }


def segments_table(rows) -> dg.MetadataValue:
    records = []
    for r in rows:
        m = r.metrics
        records.append(dg.TableRecord({
            "index": r.segment_index, "lines": f"{r.start_line}-{r.end_line}", "topic": (r.topic or "")[:120],
            "fingerprint": r.fingerprint, "labeled": bool(r.labeled),
            "score": float(m["summary"]["overall_score"]) if m else float("nan"),
        }))
    return dg.MetadataValue.table(records, schema=SEGMENT_SCHEMA)


@dg.asset(
    partitions_def=session_partitions,
    deps=[raw_sessions],
    group_name="trajectory_hub",
    kinds={"postgres"},
    description="The session split into independent task segments (fingerprinted, incremental).",
    check_specs=[dg.AssetCheckSpec("segments_cover_session", asset="task_segments",
                                   description="Segments cover every message line of the session, with no overlap.")],
)
def task_segments(context: dg.AssetExecutionContext, ultron: UltronResource, llm: LLMResource
                  ) -> dg.MaterializeResult:
    service = ultron.trajectory_service(llm)
    key = context.partition_key
    results = service.segment_pending_sessions(batch_size=1, partition_key=key)
    outcome = results[0] if results else None
    status = outcome.status if outcome else "unchanged"
    if outcome and outcome.reason:
        context.log.warning(f"{outcome.session_file}: segmentation pending: {outcome.reason}")
    session = service.session_for_partition(key)
    rows = service.segments_for(session.agent_id, session.session_file) if session is not None else []
    pending = outcome is not None and outcome.status == "pending"
    problems = []
    if session is not None and not pending:
        problems = coverage_problems(service.message_lines(session.agent_id, session.session_file), rows)
    for p in problems:
        context.log.error(f"segment coverage: {p}")
    metadata = {
        "status": status,
        "segments": len(rows),
        "segment_table": segments_table(rows),
        **llm_metadata(service.usage, service.provider.name),
    }
    if outcome is not None:
        actions = collections.Counter(s.action for s in outcome.segments)
        metadata.update(new=actions["new"], kept=actions["kept"], replaced=outcome.replaced,
                        archived_memories=outcome.archived_memories, windows=outcome.windows)
        if outcome.reason:
            metadata["pending_reason"] = outcome.reason
    context.log.info(f"{key}: {status}, {len(rows)} segments")
    return dg.MaterializeResult(
        metadata=metadata,
        check_results=[dg.AssetCheckResult(
            check_name="segments_cover_session",
            passed=not problems and not pending,
            severity=dg.AssetCheckSeverity.WARN if pending else dg.AssetCheckSeverity.ERROR,
            metadata={"problems": dg.MetadataValue.json(problems or ([outcome.reason] if pending else []))},
        )],
    )


@dg.asset(
    partitions_def=session_partitions,
    deps=[task_segments],
    group_name="trajectory_hub",
    kinds={"postgres"},
    description="Trajectory quality of each task segment: deterministic signals, plus an LLM judge when configured.",
    check_specs=[dg.AssetCheckSpec("scores_in_range", asset="quality_metrics",
                                   description="Every labeled segment has summary.overall_score in [0, 1].")],
)
def quality_metrics(context: dg.AssetExecutionContext, ultron: UltronResource, llm: LLMResource
                    ) -> dg.MaterializeResult:
    service = ultron.trajectory_service(llm)
    labels = service.label_pending_segments(batch_size=10_000, partition_key=context.partition_key)
    for label in labels:
        if label.status != "labeled":
            context.log.warning(f"segment {label.segment_id[:8]} (lines {label.start_line}-{label.end_line}) "
                                f"left unlabeled: {label.reason}")
    rows = service.segments_for_partition(context.partition_key)
    scores = [(r.id, r.metrics["summary"]["overall_score"]) for r in rows if r.labeled and r.metrics]
    problems = score_problems(scores)
    buckets = collections.Counter(min(int(s * 10), 9) for _, s in scores if isinstance(s, (int, float)) and 0 <= s <= 1)
    histogram = "\n".join(f"| {b / 10:.1f}–{(b + 1) / 10:.1f} | {'█' * buckets[b]} {buckets[b]} |" for b in range(10))
    task_types = collections.Counter(r.metrics["summary"].get("task_type") for r in rows if r.labeled and r.metrics)
    eligible = sum(1 for r in rows if r.labeled and service.is_memory_eligible(r.metrics))
    return dg.MaterializeResult(
        metadata={
            "labeled_now": sum(1 for lb in labels if lb.status == "labeled"),
            "still_pending": sum(1 for lb in labels if lb.status != "labeled"),
            "segments": len(rows),
            "memory_eligible": eligible,
            "sft_eligible": sum(1 for r in rows if r.labeled and service.is_sft_eligible(r.metrics)),
            "mean_score": float(sum(s for _, s in scores) / len(scores)) if scores else float("nan"),
            "task_types": dg.MetadataValue.json(dict(task_types)),
            "score_histogram": dg.MetadataValue.md("| score | segments |\n|---|---|\n" + histogram),
            "segment_table": segments_table(rows),
            **llm_metadata(service.usage, service.provider.name),
        },
        check_results=[dg.AssetCheckResult(
            check_name="scores_in_range", passed=not problems,
            metadata={"problems": dg.MetadataValue.json(problems), "scored": len(scores)},
        )],
    )
