"""The maintenance job the schedule runs every ULTRON_DECAY_INTERVAL_HOURS.

Today it has one step, re-ingesting pending session files; later steps
(segmentation, labelling, extraction, tier rebalance) hang off the same job.
"""


import dagster as dg

from resources.database import UltronResource
from ultron_assets.partitions import session_partitions


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
        context.log_event(
            dg.AssetMaterialization(
                asset_key="raw_sessions",
                partition=f.partition_key,
                description="re-ingested by the maintenance job",
                metadata={"status": f.status, "messages": f.messages, "problem_count": len(f.problems),
                          "path": dg.MetadataValue.path(f.path)},
            )
        )
    for f in report.files:
        if f.status == "failed":
            context.log.error(f"{f.path}: failed: " + "; ".join(
                f"line {p.line}: {p.error}" if p.line else p.error for p in f.problems[:5]))
    context.log.info(f"maintenance refresh: {report.totals}")


@dg.job(description="Periodic maintenance: re-ingest pending sessions (later: segment, label, extract, rebalance).")
def maintenance() -> None:
    refresh_sessions()
