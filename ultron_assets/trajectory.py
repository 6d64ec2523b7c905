"""Trajectory hub: session files → task segments → quality scores, per session partition.

The assets are built for the partitions ULTRON_PARTITIONING chose (``build_trajectory_assets``);
each works file by file, so a partition of one file (``session``) and a day of many
(``daily``) run the same code (``ranges.per_partition``)."""

import collections

import dagster as dg

from resources.database import UltronResource
from resources.llm import LLMResource
from ultron.db import sessions as store
from ultron.ingestion import FileReport
from ultron.sessions.discovery import parse_partition_key
from ultron.trajectory.coverage import coverage_problems, score_problems
from ultron_assets.metadata import llm_metadata, segments_table
from ultron_assets.partitions import arrivals_of, mode_of, session_partitions
from ultron_assets.ranges import BACKFILL_POLICY, PartitionOutcome, combine, per_partition

PREVIEW_MESSAGES = 20
PREVIEW_CHARS = 160
LOGGED_PROBLEMS = 50

PROBLEM_SCHEMA = dg.TableSchema(
    columns=[dg.TableColumn("line", "int"), dg.TableColumn("error", "string")]
)
FILE_PROBLEM_SCHEMA = dg.TableSchema(
    columns=[dg.TableColumn("file", "string"), dg.TableColumn("line", "int"), dg.TableColumn("error", "string")]
)
PREVIEW_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("line", "int"),
        dg.TableColumn("role", "string"),
        dg.TableColumn("content", "string"),
        dg.TableColumn("tool_calls", "string"),
    ]
)


RAW_SUMMED = ("messages", "size_bytes", "problem_count")


def build_trajectory_assets(partitions_def: dg.DynamicPartitionsDefinition
                            ) -> tuple[dg.AssetsDefinition, dg.AssetsDefinition, dg.AssetsDefinition]:
    """raw_sessions, task_segments and quality_metrics over ``partitions_def``."""
    daily = mode_of(partitions_def) == "daily"
    unit = "one partition per agent and arrival day" if daily else "one partition per file"

    @dg.asset(
        name="raw_sessions",
        partitions_def=partitions_def,
        backfill_policy=BACKFILL_POLICY,
        group_name="trajectory_hub",
        kinds={"postgres"},
        description=f"Agent session .jsonl files, parsed into messages and archived raw ({unit}).",
        check_specs=[
            dg.AssetCheckSpec(
                "parsed_cleanly",
                asset="raw_sessions",
                description="Every line of the session file(s) was read without a problem.",
            )
        ],
    )
    def raw_sessions(context: dg.AssetExecutionContext, ultron: UltronResource) -> dg.MaterializeResult:
        client = ultron.client()
        outcomes = per_partition(context, arrivals_of(client),
                                 lambda key: _ingest_partition(context, client, key, preview=not daily),
                                 "parsed_cleanly", RAW_SUMMED, extra=_day_problems)
        return combine(outcomes, summed=RAW_SUMMED)

    @dg.asset(
        name="task_segments",
        partitions_def=partitions_def,
        backfill_policy=BACKFILL_POLICY,
        deps=[raw_sessions],
        group_name="trajectory_hub",
        kinds={"postgres"},
        description="The session split into independent task segments (fingerprinted, incremental).",
        check_specs=[dg.AssetCheckSpec("segments_cover_session", asset="task_segments",
                                       description="Segments cover every message line of the session, "
                                                   "with no overlap.")],
    )
    def task_segments(context: dg.AssetExecutionContext, ultron: UltronResource, llm: LLMResource
                      ) -> dg.MaterializeResult:
        service = ultron.trajectory_service(llm)
        outcomes = per_partition(context, arrivals_of(service), lambda key: _segment_partition(context, service, key),
                                 "segments_cover_session", SEGMENT_SUMMED)
        return combine(outcomes, summed=("segments",), extra=llm_metadata(service.usage, service.provider.name))

    @dg.asset(
        name="quality_metrics",
        partitions_def=partitions_def,
        backfill_policy=BACKFILL_POLICY,
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
        outcomes = per_partition(context, arrivals_of(service), lambda key: _label_partition(context, service, key),
                                 "scores_in_range", QUALITY_SUMMED)
        return combine(outcomes, summed=QUALITY_SUMMED, extra=llm_metadata(service.usage, service.provider.name))

    return raw_sessions, task_segments, quality_metrics


SEGMENT_SUMMED = ("segments",)
QUALITY_SUMMED = ("labeled_now", "still_pending", "segments", "memory_eligible", "sft_eligible")


def _day_problems(files: list[PartitionOutcome]) -> dict:
    """A day's problems, file by file (the first 200), and the files that could not be read."""
    records = [dg.TableRecord({"file": o.key, **r.data}) for o in files if o.row["problem_count"]
               for r in o.metadata["problems"].value.records][:200]
    return {
        "problems": dg.MetadataValue.table(records, schema=FILE_PROBLEM_SCHEMA),
        "statuses": dg.MetadataValue.json(dict(collections.Counter(o.row["status"] for o in files))),
        "failed_files": dg.MetadataValue.json([o.key for o in files if o.row["status"] == "failed"]),
    }


def _ingest_partition(context: dg.AssetExecutionContext, client, key: str, preview: bool = True) -> PartitionOutcome:
    agent_id, path = parse_partition_key(key, client.settings.inbox)
    report = client.ingest([path], agent_id)
    # A path normally yields one report; a directory named like a session file yields more.
    file_report = next((f for f in report.files if f.path == str(path)), None) or report.files[0]
    _log_report(context, file_report)
    preview = _preview(client, file_report) if preview else []
    metadata = {
        "status": file_report.status,
        "path": dg.MetadataValue.path(file_report.path),
        "agent_id": file_report.agent_id,
        "format": file_report.session_format or "unknown",
        "messages": file_report.messages,
        "messages_by_role": dg.MetadataValue.json(file_report.roles),
        "size_bytes": file_report.size_bytes,
        "archived": file_report.archived,
        "problem_count": len(file_report.problems),
        "problems": dg.MetadataValue.table(
            [dg.TableRecord({"line": p.line if p.line is not None else 0, "error": p.error})
             for p in file_report.problems[:200]],
            schema=PROBLEM_SCHEMA,
        ),
        "preview": dg.MetadataValue.table(preview, schema=PREVIEW_SCHEMA),
    }
    if file_report.archive_error:
        metadata["archive_error"] = file_report.archive_error
    check = dg.AssetCheckResult(
        check_name="parsed_cleanly",
        passed=not file_report.problems,
        severity=dg.AssetCheckSeverity.ERROR if file_report.status == "failed" else dg.AssetCheckSeverity.WARN,
        metadata={"status": file_report.status, "problem_count": len(file_report.problems)},
    )
    row = {"status": file_report.status, "format": file_report.session_format or "unknown",
           "messages": file_report.messages, "size_bytes": file_report.size_bytes,
           "problem_count": len(file_report.problems)}
    return PartitionOutcome(key, metadata, check, row)


def _log_report(context: dg.AssetExecutionContext, report: FileReport) -> None:
    summary = f"{report.path}: {report.status}, {report.messages} messages, {len(report.problems)} problems"
    (context.log.error if report.status == "failed" else context.log.info)(summary)
    for p in report.problems[:LOGGED_PROBLEMS]:
        where = f"{report.path}:{p.line}" if p.line is not None else report.path
        context.log.warning(f"{where}: {p.error}")
    if len(report.problems) > LOGGED_PROBLEMS:
        context.log.warning(f"... {len(report.problems) - LOGGED_PROBLEMS} more problems in the asset metadata")
    if report.archive_error:
        context.log.warning(f"{report.path}: raw archive failed, ingestion kept: {report.archive_error}")


def _preview(client, report: FileReport) -> list[dg.TableRecord]:
    if not report.record_id:
        return []
    with client.db.engine.connect() as conn:
        messages = list(store.iter_messages(conn, report.record_id, limit=PREVIEW_MESSAGES))
    return [
        dg.TableRecord(
            {
                "line": m.line,
                "role": m.role + (" (sidechain)" if m.is_sidechain else ""),
                "content": (m.content or m.reasoning_content or "")[:PREVIEW_CHARS],
                "tool_calls": ", ".join(tc["function"]["name"] for tc in m.tool_calls or []),
            }
        )
        for m in messages
    ]


def _segment_partition(context: dg.AssetExecutionContext, service, key: str) -> PartitionOutcome:
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
    }
    if outcome is not None:
        actions = collections.Counter(s.action for s in outcome.segments)
        metadata.update(new=actions["new"], kept=actions["kept"], replaced=outcome.replaced,
                        archived_memories=outcome.archived_memories, windows=outcome.windows)
        if outcome.reason:
            metadata["pending_reason"] = outcome.reason
    context.log.info(f"{key}: {status}, {len(rows)} segments")
    check = dg.AssetCheckResult(
        check_name="segments_cover_session",
        passed=not problems and not pending,
        severity=dg.AssetCheckSeverity.WARN if pending else dg.AssetCheckSeverity.ERROR,
        metadata={"problems": dg.MetadataValue.json(problems or ([outcome.reason] if pending else []))},
    )
    return PartitionOutcome(key, metadata, check, {"status": status, "segments": len(rows)})


def _label_partition(context: dg.AssetExecutionContext, service, key: str) -> PartitionOutcome:
    labels = service.label_pending_segments(batch_size=10_000, partition_key=key)
    for label in labels:
        if label.status != "labeled":
            context.log.warning(f"segment {label.segment_id[:8]} (lines {label.start_line}-{label.end_line}) "
                                f"left unlabeled: {label.reason}")
    rows = service.segments_for_partition(key)
    scores = [(r.id, r.metrics["summary"]["overall_score"]) for r in rows if r.labeled and r.metrics]
    problems = score_problems(scores)
    buckets = collections.Counter(min(int(s * 10), 9) for _, s in scores if isinstance(s, (int, float)) and 0 <= s <= 1)
    histogram = "\n".join(f"| {b / 10:.1f}–{(b + 1) / 10:.1f} | {'█' * buckets[b]} {buckets[b]} |" for b in range(10))
    task_types = collections.Counter(r.metrics["summary"].get("task_type") for r in rows if r.labeled and r.metrics)
    eligible = sum(1 for r in rows if r.labeled and service.is_memory_eligible(r.metrics))
    row = {
        "labeled_now": sum(1 for lb in labels if lb.status == "labeled"),
        "still_pending": sum(1 for lb in labels if lb.status != "labeled"),
        "segments": len(rows),
        "memory_eligible": eligible,
        "sft_eligible": sum(1 for r in rows if r.labeled and service.is_sft_eligible(r.metrics)),
        "mean_score": float(sum(s for _, s in scores) / len(scores)) if scores else float("nan"),
    }
    metadata = {
        **row,
        "task_types": dg.MetadataValue.json(dict(task_types)),
        "score_histogram": dg.MetadataValue.md("| score | segments |\n|---|---|\n" + histogram),
        "segment_table": segments_table(rows),
    }
    attributed = [lb.attribution for lb in labels if lb.attribution]
    if attributed:  # the session's outcome, counted for the memories and skills served to it
        metadata["outcomes_attributed"] = dg.MetadataValue.json(attributed)
    check = dg.AssetCheckResult(
        check_name="scores_in_range", passed=not problems,
        metadata={"problems": dg.MetadataValue.json(problems), "scored": len(scores)},
    )
    return PartitionOutcome(key, metadata, check, row)


raw_sessions, task_segments, quality_metrics = build_trajectory_assets(session_partitions)
