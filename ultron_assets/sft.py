"""sft_dataset: high-scoring segments exported as fine-tuning data (OpenAI chat and ShareGPT)."""

from typing import Optional

import dagster as dg

from resources.database import UltronResource
from ultron_assets.automation import follow_upstream
from ultron_assets.trajectory import quality_metrics

SOURCE_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("segment", "string"), dg.TableColumn("session_file", "string"), dg.TableColumn("lines", "string"),
    dg.TableColumn("score", "float"), dg.TableColumn("split", "string"),
])


class SFTExportConfig(dg.Config):
    """Launch-time filters (the sft_export_job's config)."""

    task_type: Optional[str] = None  # e.g. "code"; None exports every task type
    min_score: Optional[float] = None  # None = ULTRON_TRAJECTORY_SFT_SCORE_THRESHOLD
    limit: int = 5000


@dg.asset(
    deps=[quality_metrics],
    group_name="trajectory_hub",
    kinds={"jsonl"},
    automation_condition=follow_upstream,
    description="Segments scoring at least ULTRON_TRAJECTORY_SFT_SCORE_THRESHOLD, deduplicated by fingerprint, "
                "redacted, with tool calls and results kept, split train/validation deterministically, written "
                "under ULTRON_HOME/sft/ as OpenAI chat fine-tuning JSONL and ShareGPT with a manifest.",
    check_specs=[dg.AssetCheckSpec(
        "sft_files_valid", asset="sft_dataset", blocking=True,
        description="Every line parses, roles are in order, every tool_call id has its tool result, "
                    "no assistant turn is empty.")],
)
def sft_dataset(context: dg.AssetExecutionContext, config: SFTExportConfig, ultron: UltronResource
                ) -> dg.MaterializeResult:
    from ultron.sft.validate import validate_export

    client = ultron.client()
    export = client.export_sft_dataset(
        task_type=config.task_type, min_quality_score=config.min_score, limit=config.limit, reuse_unchanged=True)
    manifest = export.manifest
    results = validate_export(export.directory)
    problems = {name: r.errors[:20] for name, r in results.items() if r.errors}
    lines_checked = sum(r.lines for r in results.values())
    for name, errors in problems.items():
        for e in errors[:5]:
            context.log.error(f"{name}: line {e['line']}: {e['error']}")
    sources = manifest.get("sources") or []
    return dg.MaterializeResult(
        metadata={
            "export_dir": dg.MetadataValue.path(str(export.directory)),
            "export_id": export.export_id,
            **{f"count_{k}": v for k, v in (manifest.get("counts") or {}).items() if isinstance(v, int)},
            "manifest": dg.MetadataValue.json({k: v for k, v in manifest.items() if k != "sources"}),
            "sources": dg.MetadataValue.table(
                [dg.TableRecord({"segment": str(s.get("segment_id", ""))[:8],
                                 "session_file": str(s.get("session_file", ""))[-80:],
                                 "lines": f"{s.get('start_line')}-{s.get('end_line')}",
                                 "score": float(s.get("score") or 0.0), "split": str(s.get("split", ""))})
                 for s in sources[:200]], schema=SOURCE_SCHEMA),
        },
        check_results=[dg.AssetCheckResult(
            check_name="sft_files_valid", passed=not problems,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"lines_checked": lines_checked, "problems": dg.MetadataValue.json(problems)})],
    )
