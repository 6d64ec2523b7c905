"""Ops shared by the maintenance job (every ULTRON_DECAY_INTERVAL_HOURS) and the
sensor's batch job: re-ingest pending files, segment pending sessions, label
pending segments. Work left pending by an LLM outage is picked up here."""

import dagster as dg

from resources.database import UltronResource
from resources.llm import LLMResource
from ultron_assets.partitions import session_partitions

BATCH = 100_000  # everything pending; each item is its own transaction


@dg.op(description="Re-ingest inbox files that changed or were never ingested (the sensor's safety net).")
def refresh_sessions(context: dg.OpExecutionContext, ultron: UltronResource) -> None:
    client = ultron.client()
    report = client.ingestion.refresh()
    touched = [f for f in report.files if f.status in ("new", "changed") and f.partition_key]
    partitions_name = session_partitions.name
    missing = [f.partition_key for f in touched
               if not context.instance.has_dynamic_partition(partitions_name, f.partition_key)]
    if missing:
        context.instance.add_dynamic_partitions(partitions_name, missing)
    for f in touched:
        context.log_event(dg.AssetMaterialization(
            asset_key="raw_sessions", partition=f.partition_key, description="ingested by a batch job",
            metadata={"status": f.status, "messages": f.messages, "problem_count": len(f.problems),
                      "path": dg.MetadataValue.path(f.path)}))
    for f in report.files:
        if f.status == "failed":
            context.log.error(f"{f.path}: failed: " + "; ".join(
                f"line {p.line}: {p.error}" if p.line else p.error for p in f.problems[:5]))
    context.log.info(f"refresh: {report.totals}")


@dg.op(ins={"after": dg.In(dg.Nothing)}, description="Segment every session still pending (segmented=0).")
def segment_sessions(context: dg.OpExecutionContext, ultron: UltronResource, llm: LLMResource) -> None:
    service = ultron.trajectory_service(llm)
    results = service.segment_pending_sessions(batch_size=BATCH)
    for r in results:
        if r.status == "segmented" and r.partition_key:
            context.log_event(dg.AssetMaterialization(
                asset_key="task_segments", partition=r.partition_key, description="segmented by a batch job",
                metadata={"segments": len(r.segments), "replaced": r.replaced, "windows": r.windows}))
        elif r.status != "segmented":
            context.log.warning(f"{r.session_file}: still pending: {r.reason}")
    done = sum(1 for r in results if r.status == "segmented")
    context.log.info(f"segmentation: {done} segmented, {len(results) - done} pending; "
                     f"LLM {service.provider.name}: {service.usage.to_dict()}")


@dg.op(ins={"after": dg.In(dg.Nothing)}, description="Score every segment still unlabeled (labeled=0).")
def label_segments(context: dg.OpExecutionContext, ultron: UltronResource, llm: LLMResource) -> None:
    service = ultron.trajectory_service(llm)
    labels = service.label_pending_segments(batch_size=BATCH)
    by_partition: dict[str, list[float]] = {}
    for lb in labels:
        if lb.status == "labeled" and lb.partition_key:
            by_partition.setdefault(lb.partition_key, []).append(lb.overall_score or 0.0)
        elif lb.status != "labeled":
            context.log.warning(f"segment {lb.segment_id[:8]} of {lb.session_file} still unlabeled: {lb.reason}")
    for key, scores in by_partition.items():
        context.log_event(dg.AssetMaterialization(
            asset_key="quality_metrics", partition=key, description="labelled by a batch job",
            metadata={"labeled_now": len(scores), "mean_score": sum(scores) / len(scores)}))
    context.log.info(f"labelling: {sum(len(v) for v in by_partition.values())} labeled, "
                     f"{sum(1 for lb in labels if lb.status != 'labeled')} pending; "
                     f"LLM {service.provider.name}: {service.usage.to_dict()}")


def run_pipeline_steps() -> None:
    """refresh → segment → label, in order (composed inside each job)."""
    label_segments(after=segment_sessions(after=refresh_sessions()))


@dg.job(description="Periodic maintenance: re-ingest pending sessions, segment pending sessions, label "
        "pending segments (work left by LLM outages included). Later steps hang off this job.")
def maintenance() -> None:
    run_pipeline_steps()
