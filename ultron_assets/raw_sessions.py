"""raw_sessions: one partition per session file, ingested into Postgres."""


import dagster as dg

from resources.database import UltronResource
from ultron.db import sessions as store
from ultron.ingestion import FileReport
from ultron.sessions.discovery import parse_partition_key
from ultron_assets.partitions import session_partitions

PREVIEW_MESSAGES = 20
PREVIEW_CHARS = 160
LOGGED_PROBLEMS = 50

PROBLEM_SCHEMA = dg.TableSchema(
    columns=[dg.TableColumn("line", "int"), dg.TableColumn("error", "string")]
)
PREVIEW_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("line", "int"),
        dg.TableColumn("role", "string"),
        dg.TableColumn("content", "string"),
        dg.TableColumn("tool_calls", "string"),
    ]
)


@dg.asset(
    partitions_def=session_partitions,
    group_name="trajectory_hub",
    kinds={"postgres"},
    description="Agent session .jsonl files, parsed into messages and archived raw (one partition per file).",
    check_specs=[
        dg.AssetCheckSpec(
            "parsed_cleanly",
            asset="raw_sessions",
            description="Every line of the session file was read without a problem.",
        )
    ],
)
def raw_sessions(context: dg.AssetExecutionContext, ultron: UltronResource) -> dg.MaterializeResult:
    client = ultron.client()
    agent_id, path = parse_partition_key(context.partition_key, client.settings.inbox)
    report = client.ingest([path], agent_id)
    # A path normally yields one report; a directory named like a session file yields more.
    file_report = next((f for f in report.files if f.path == str(path)), None) or report.files[0]
    _log_report(context, file_report)
    preview = _preview(client, file_report)
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
    return dg.MaterializeResult(
        metadata=metadata,
        check_results=[
            dg.AssetCheckResult(
                check_name="parsed_cleanly",
                passed=not file_report.problems,
                severity=dg.AssetCheckSeverity.ERROR if file_report.status == "failed" else dg.AssetCheckSeverity.WARN,
                metadata={"status": file_report.status, "problem_count": len(file_report.problems)},
            )
        ],
    )


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
