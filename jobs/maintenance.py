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


@dg.op(ins={"after": dg.In(dg.Nothing)}, description="Extract memories from every memory-eligible segment not yet extracted.")
def extract_memories(context: dg.OpExecutionContext, ultron: UltronResource, llm: LLMResource) -> None:
    service = ultron.trajectory_service(llm)
    results = service.extract_memories_from_segments(batch_size=BATCH)
    by_partition: dict[str, list] = {}
    for r in results:
        if r.status == "extracted" and r.partition_key:
            by_partition.setdefault(r.partition_key, []).append(r)
        elif r.status == "pending":
            context.log.warning(f"segment {r.segment_id[:8]}: extraction pending: {r.reason}")
    for key, rs in by_partition.items():
        context.log_event(dg.AssetMaterialization(
            asset_key="memories", partition=key, description="extracted by a batch job",
            metadata={"inserted": sum(r.inserted for r in rs), "merged": sum(r.merged for r in rs),
                      "dropped_low_confidence": sum(r.dropped_low_confidence for r in rs)}))
    context.log.info(f"extraction: {sum(1 for r in results if r.status == 'extracted')} segments extracted, "
                     f"{sum(r.inserted for r in results)} memories inserted, {sum(r.merged for r in results)} merged")


@dg.op(ins={"after": dg.In(dg.Nothing)}, description="Rebalance HOT/WARM/COLD tiers; archive stale COLD memories.")
def rebalance_tiers(context: dg.OpExecutionContext, ultron: UltronResource) -> None:
    from ultron_assets.memories import tier_chart

    counts = ultron.client().memory.run_tier_rebalance()
    context.log_event(dg.AssetMaterialization(
        asset_key="tiers", description="rebalanced by the maintenance job",
        metadata={**{k.lower(): v for k, v in counts.items()}, "distribution": dg.MetadataValue.md(tier_chart(counts))}))
    context.log.info(f"tiers: {counts}")


@dg.op(ins={"after": dg.In(dg.Nothing)}, description="Re-cluster active memories (HDBSCAN, stable ids, topics).")
def cluster_memories(context: dg.OpExecutionContext, ultron: UltronResource, llm: LLMResource) -> None:
    from ultron_assets.clusters import clusters_metadata

    client = ultron.client(llm)
    report = client.clusters.run_clustering().to_dict()
    context.log_event(dg.AssetMaterialization(
        asset_key="clusters", description="re-clustered by the maintenance job",
        metadata=clusters_metadata(report, client.clusters.list_clusters())))
    context.log.info(f"clustering: { {k: v for k, v in report.items() if not isinstance(v, list)} }")


@dg.op(ins={"after": dg.In(dg.Nothing)},
       description="Crystallise ready clusters into skills; re-crystallise grown ones (new version if better).")
def evolve_skills(context: dg.OpExecutionContext, ultron: UltronResource, llm: LLMResource) -> None:
    from ultron_assets.skills import skills_metadata

    client = ultron.client(llm)
    report = client.skills.run_skill_evolution().to_dict()
    context.log_event(dg.AssetMaterialization(
        asset_key="skills", description="evolved by the maintenance job", metadata=skills_metadata(client, report)))
    for failure in report.get("failed") or []:
        context.log.warning(f"cluster {str(failure.get('cluster_id'))[:8]} not crystallised: {failure.get('reason')}")
    context.log.info(f"skill evolution: { {k: v for k, v in report.items() if not isinstance(v, list)} }")


@dg.op(ins={"after": dg.In(dg.Nothing)},
       description="Merge near-duplicate memories already in the store (only when ULTRON_CONSOLIDATE_ENABLED).")
def consolidate_memories(context: dg.OpExecutionContext, ultron: UltronResource, llm: LLMResource) -> None:
    client = ultron.client()
    if not client.settings.consolidate_enabled:
        context.log.info("consolidation is off (ULTRON_CONSOLIDATE_ENABLED)")
        return
    context.log.info(f"consolidation: {ultron.trajectory_service(llm).memory.consolidate(max_merges=1000)}")


@dg.op(ins={"after": dg.In(dg.Nothing)}, description="Drop raw uploads older than ULTRON_RAW_ARCHIVE_RETENTION_DAYS.")
def purge_raw_archive(context: dg.OpExecutionContext, ultron: UltronResource) -> None:
    from ultron.db import sessions as session_store

    client = ultron.client()
    with client.db.engine.begin() as conn:
        purged = session_store.purge_raw_archive(conn, client.settings.raw_archive_retention_days)
    context.log.info(f"raw archive: {purged} uploads older than {client.settings.raw_archive_retention_days:g} days purged")


def run_pipeline_steps():
    """refresh → segment → label → extract (composed inside each job)."""
    return extract_memories(after=label_segments(after=segment_sessions(after=refresh_sessions())))


@dg.job(description="Periodic maintenance (the seed's decay loop): re-ingest pending sessions, segment pending "
        "sessions, label pending segments, extract memories (work left by LLM outages included), rebalance tiers, "
        "re-cluster, evolve skills, consolidate (if enabled), purge the raw archive past its retention.")
def maintenance_job() -> None:
    extracted = run_pipeline_steps()
    evolved = evolve_skills(after=cluster_memories(after=rebalance_tiers(after=extracted)))
    purge_raw_archive(after=consolidate_memories(after=evolved))
