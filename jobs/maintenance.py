"""The maintenance job (every ULTRON_DECAY_INTERVAL_HOURS) and the sensor's batch job,
built from the one maintenance sequence in ``ultron.maintenance``: one op per step, in
that order. Each op runs its step through the SDK and shows the result in the UI with the
same metadata the assets give (``ultron_assets.metadata``); the per-session steps also
evaluate the assets' checks for every partition they touched, so a batch run is checked
like a partition run."""

import os
from typing import Any, Callable

import dagster as dg

from resources.database import UltronResource
from resources.llm import LLMResource
from ultron.maintenance import BATCH, PIPELINE_STEPS, STEPS, Step
from ultron.sdk import Ultron
from ultron.trajectory.coverage import coverage_problems, score_problems
from ultron_assets.metadata import clusters_metadata, llm_metadata, skills_metadata, tier_chart
from ultron_assets.partitions import partitions_for, partitions_for_files
from ultron_assets.pools import STORE_POOL

Context = dg.OpExecutionContext


def _check(context: Context, asset: str, check: str, partition: str | None, passed: bool,
           severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR, **metadata: Any) -> None:
    context.log_event(dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey(asset), check_name=check, passed=passed, severity=severity,
        metadata={k: dg.MetadataValue.json(v) if isinstance(v, (list, dict)) else v for k, v in metadata.items()},
        partition=partition))


def _mtime_ns(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _by_partition(client: Ultron, items, file_key: Callable[[Any], str | None],
                  path: Callable[[Any], str] | None = None) -> dict[str, list]:
    """Items grouped by the partition holding their session file: the file's own under
    ULTRON_PARTITIONING=session, its arrival day under daily (recorded now for a file the
    sensor never saw, from its mtime)."""
    keyed = [(key, item) for item in items if (key := file_key(item))]
    partitions = partitions_for_files(
        {key: _mtime_ns(path(item)) if path else None for key, item in keyed}.items(), client)
    groups: dict[str, list] = {}
    for key, item in keyed:
        if partitions.get(key):
            groups.setdefault(partitions[key], []).append(item)
    return groups


def _report_refresh(context: Context, client: Ultron, report) -> None:
    touched = [f for f in report.files if f.status in ("new", "changed") and f.partition_key]
    groups = _by_partition(client, touched, lambda f: f.partition_key, lambda f: f.path)
    partitions_name = partitions_for(client.settings.partitioning).name
    missing = [k for k in groups if not context.instance.has_dynamic_partition(partitions_name, k)]
    if missing:
        context.instance.add_dynamic_partitions(partitions_name, missing)
    daily = client.settings.partitioning == "daily"
    for key, files in groups.items():
        problems = sum(len(f.problems) for f in files)
        shown = ({"status": files[0].status, "path": dg.MetadataValue.path(files[0].path)} if not daily else
                 {"files": len(files), "statuses": dg.MetadataValue.json(
                     {s: sum(f.status == s for f in files) for s in {f.status for f in files}})})
        context.log_event(dg.AssetMaterialization(
            asset_key="raw_sessions", partition=key, description="ingested by a batch job",
            metadata={**shown, "messages": sum(f.messages for f in files), "problem_count": problems}))
        _check(context, "raw_sessions", "parsed_cleanly", key, not problems, dg.AssetCheckSeverity.WARN,
               **({"status": files[0].status} if not daily else
                  {"failed_files": [f.partition_key for f in files if f.problems]}), problem_count=problems)
    from jobs.forget import prune_stale_partitions

    pruned = prune_stale_partitions(context.instance, client)
    if pruned:
        context.log.info(f"{len(pruned)} partitions of forgotten sessions removed")
    for f in report.files:
        if f.status == "failed":
            context.log.error(f"{f.path}: failed: " + "; ".join(
                f"line {p.line}: {p.error}" if p.line else p.error for p in f.problems[:5]))
    context.log.info(f"refresh: {report.totals}")


def _report_segments(context: Context, client: Ultron, results) -> None:
    service = client.trajectory_service
    done_now = [r for r in results if r.status == "segmented"]
    for key, rs in _by_partition(client, done_now, lambda r: r.partition_key).items():
        context.log_event(dg.AssetMaterialization(
            asset_key="task_segments", partition=key, description="segmented by a batch job",
            metadata={"segments": sum(len(r.segments) for r in rs), "replaced": sum(r.replaced for r in rs),
                      "windows": sum(r.windows for r in rs),
                      **({"files": len(rs)} if client.settings.partitioning == "daily" else {})}))
        problems = [p for r in rs for p in coverage_problems(service.message_lines(r.agent_id, r.session_file),
                                                            service.segments_for(r.agent_id, r.session_file))]
        _check(context, "task_segments", "segments_cover_session", key, not problems, problems=problems)
    for r in results:
        if r.status != "segmented":
            context.log.warning(f"{r.session_file}: still pending: {r.reason}")
    done = sum(1 for r in results if r.status == "segmented")
    context.log.info(f"segmentation: {done} segmented, {len(results) - done} pending; "
                     f"LLM {service.provider.name}: {service.usage.to_dict()}")


def _report_labels(context: Context, client: Ultron, labels) -> None:
    service = client.trajectory_service
    by_partition: dict[str, list[float]] = {}
    for lb in labels:
        if lb.status == "labeled" and lb.partition_key:
            by_partition.setdefault(lb.partition_key, []).append(lb.overall_score or 0.0)
        elif lb.status != "labeled":
            context.log.warning(f"segment {lb.segment_id[:8]} of {lb.session_file} still unlabeled: {lb.reason}")
    for key, file_keys in _by_partition(client, by_partition, lambda k: k).items():
        scores = [s for k in file_keys for s in by_partition[k]]
        context.log_event(dg.AssetMaterialization(
            asset_key="quality_metrics", partition=key, description="labelled by a batch job",
            metadata={"labeled_now": len(scores), "mean_score": sum(scores) / len(scores)}))
        rows = [row for k in file_keys for row in service.segments_for_partition(k)]
        scored = [(r.id, r.metrics["summary"]["overall_score"]) for r in rows if r.labeled and r.metrics]
        problems = score_problems(scored)
        _check(context, "quality_metrics", "scores_in_range", key, not problems, problems=problems,
               scored=len(scored))
    context.log.info(f"labelling: {sum(len(v) for v in by_partition.values())} labeled, "
                     f"{sum(1 for lb in labels if lb.status != 'labeled')} pending; "
                     f"LLM {service.provider.name}: {service.usage.to_dict()}")


def _report_extraction(context: Context, client: Ultron, results) -> None:
    by_partition: dict[str, list] = {}
    for r in results:
        if r.status == "extracted" and r.partition_key:
            by_partition.setdefault(r.partition_key, []).append(r)
        elif r.status == "pending":
            context.log.warning(f"segment {r.segment_id[:8]}: extraction pending: {r.reason}")
    redact = client.context.redactor.redact if by_partition else None
    for key, file_keys in _by_partition(client, by_partition, lambda k: k).items():
        rs = [r for k in file_keys for r in by_partition[k]]
        context.log_event(dg.AssetMaterialization(
            asset_key="memories", partition=key, description="extracted by a batch job",
            metadata={"inserted": sum(r.inserted for r in rs), "merged": sum(r.merged for r in rs),
                      "dropped_low_confidence": sum(r.dropped_low_confidence for r in rs)}))
        records = [m for k in file_keys for m in client.memory.records_for_partition(k)]
        leaks = [m.id for m in records if any(redact(v) != v for v in (m.content, m.context, m.resolution))]
        _check(context, "memories", "memories_redacted", key, not leaks, unredacted=leaks[:20])
    context.log.info(f"extraction: {sum(1 for r in results if r.status == 'extracted')} segments extracted, "
                     f"{sum(r.inserted for r in results)} memories inserted, {sum(r.merged for r in results)} merged")


def _report_tiers(context: Context, client: Ultron, counts) -> None:
    context.log_event(dg.AssetMaterialization(
        asset_key="tiers", description="rebalanced by the maintenance job",
        metadata={**{k.lower(): v for k, v in counts.items()}, "distribution": dg.MetadataValue.md(tier_chart(counts))}))
    context.log.info(f"tiers: {counts}")


def _report_clusters(context: Context, client: Ultron, report) -> None:
    report = report.to_dict()
    context.log_event(dg.AssetMaterialization(
        asset_key="clusters", description="re-clustered by the maintenance job",
        metadata={**clusters_metadata(report, client.clusters.list_clusters()),
                  **llm_metadata(client.context.provider.usage, client.context.provider.name)}))
    context.log.info(f"clustering: { {k: v for k, v in report.items() if not isinstance(v, list)} }")


def _report_skills(context: Context, client: Ultron, report) -> None:
    report = report.to_dict()
    context.log_event(dg.AssetMaterialization(
        asset_key="skills", description="evolved by the maintenance job", metadata=skills_metadata(client, report)))
    for failure in report.get("failed") or []:
        context.log.warning(f"cluster {str(failure.get('cluster_id'))[:8]} not crystallised: {failure.get('reason')}")
    context.log.info(f"skill evolution: { {k: v for k, v in report.items() if not isinstance(v, list)} }")


def _report_redo(context: Context, client: Ultron, results) -> None:
    for r in results:
        if r.still_marked:
            context.log.warning(f"memory {r.memory_id[:8]}: rules answers kept for {r.still_marked}: {r.reason}")
    context.log.info(f"fallback redo: {sum(r.status == 'redone' for r in results)} memories redone by the LLM, "
                     f"{sum(r.retyped for r in results)} retyped")


def _report_consolidation(context: Context, client: Ultron, counts) -> None:
    context.log.info("consolidation is off (ULTRON_CONSOLIDATE_ENABLED)" if counts is None
                     else f"consolidation: {counts}")


def _report_owner_indexes(context: Context, client: Ultron, report) -> None:
    if report.get("skipped"):
        context.log.info(f"owner indexes: skipped ({report['skipped']})")
        return
    context.log.info(f"owner vector indexes: built {len(report['created'])}, dropped {len(report['dropped'])}, "
                     f"kept {len(report['kept'])}")


def _report_purge(context: Context, client: Ultron, purged) -> None:
    days = client.settings.raw_archive_retention_days
    context.log.info(f"raw archive: {purged} uploads older than {days:g} days purged")


#: how each step shows in the UI; a step with no entry here fails the definitions' load
REPORTERS: dict[str, Callable[[Context, Ultron, Any], None]] = {
    "refresh_sessions": _report_refresh, "segment_sessions": _report_segments, "label_segments": _report_labels,
    "extract_memories": _report_extraction, "redo_fallbacks": _report_redo, "rebalance_tiers": _report_tiers,
    "index_owners": _report_owner_indexes, "cluster_memories": _report_clusters, "evolve_skills": _report_skills,
    "consolidate_memories": _report_consolidation,
    "purge_raw_archive": _report_purge,
}


#: steps over the whole memory store: they share the assets' pool, so a maintenance run and an
#: automation run of tiers/clusters/skills never both run (one waits queued, not in a run slot)
STORE_WIDE_STEPS = frozenset({"redo_fallbacks", "rebalance_tiers", "index_owners", "cluster_memories", "evolve_skills",
                              "consolidate_memories"})


def _step_op(step: Step) -> dg.OpDefinition:
    report = REPORTERS[step.name]

    @dg.op(name=step.name, description=step.description, ins={"after": dg.In(dg.Nothing)},
           pool=STORE_POOL if step.name in STORE_WIDE_STEPS else None)
    def run_step(context: dg.OpExecutionContext, ultron: UltronResource, llm: LLMResource) -> None:
        client = ultron.client(llm)
        report(context, client, step.run(client, BATCH))

    return run_step


OPS: dict[str, dg.OpDefinition] = {step.name: _step_op(step) for step in STEPS}


def chain(steps: tuple[Step, ...]) -> None:
    """Call the steps' ops in order inside a job body, each starting after the previous."""
    previous = None
    for step in steps:
        op = OPS[step.name]
        previous = op() if previous is None else op(after=previous)


@dg.job(description="Periodic maintenance (the seed's decay loop): " + "; ".join(
    s.description.rstrip(".").lower() for s in STEPS) + ".")
def maintenance_job() -> None:
    chain(STEPS)


@dg.job(description="Ingest every new or changed inbox file in one run (the sensor's batch mode: "
        "a first sweep of thousands of files would otherwise start thousands of runs).")
def ingest_inbox() -> None:
    chain(PIPELINE_STEPS)
