"""Memory hub: memories per session partition (from its good segments), tiers over the whole store."""

import collections

import dagster as dg

from resources.database import UltronResource
from resources.llm import LLMResource
from ultron_assets.automation import follow_upstream
from ultron_assets.metadata import llm_metadata, tier_chart
from ultron_assets.partitions import arrivals_of, session_partitions
from ultron_assets.pools import STORE_POOL
from ultron_assets.ranges import BACKFILL_POLICY, PartitionOutcome, combine, per_partition
from ultron_assets.trajectory import build_trajectory_assets

MEMORY_SUMMED = ("segments_extracted", "segments_pending", "inserted", "merged", "dropped_low_confidence",
                 "memories_from_this_session")


def build_memories_asset(partitions_def: dg.DynamicPartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        name="memories",
        partitions_def=partitions_def,
        backfill_policy=BACKFILL_POLICY,
        deps=["quality_metrics"],
        group_name="memory_hub",
        kinds={"postgres", "pgvector"},
        description="Memories extracted from the session's memory-eligible segments: redacted, typed, embedded, "
                    "deduplicated (merged into near duplicates) and summarised.",
        check_specs=[dg.AssetCheckSpec("memories_redacted", asset="memories",
                                       description="Redacting the stored memories again changes nothing.")],
    )
    def memories(context: dg.AssetExecutionContext, ultron: UltronResource, llm: LLMResource
                 ) -> dg.MaterializeResult:
        client = ultron.client(llm)
        outcomes = per_partition(context, arrivals_of(client), lambda key: _extract_partition(context, client, key),
                                 "memories_redacted", MEMORY_SUMMED)
        return combine(outcomes, summed=MEMORY_SUMMED,
                       extra=llm_metadata(client.context.provider.usage, client.context.provider.name))

    return memories


def build_per_session_assets(partitions_def: dg.DynamicPartitionsDefinition) -> list[dg.AssetsDefinition]:
    """raw_sessions, task_segments, quality_metrics and memories over ``partitions_def``: the
    definitions use ULTRON_PARTITIONING's; tests and benchmarks build the other mode's."""
    return [*build_trajectory_assets(partitions_def), build_memories_asset(partitions_def)]


memories = build_memories_asset(session_partitions)


def _extract_partition(context: dg.AssetExecutionContext, client, key: str) -> PartitionOutcome:
    results = client.extract_memories_from_segments(batch_size=10_000, partition_key=key)
    for r in results:
        if r.status == "pending":
            context.log.warning(f"segment {r.segment_id[:8]}: extraction pending: {r.reason}")
    records = client.memory.records_for_partition(key)
    leaks = [m.id for m in records if any(client.context.redactor.redact(v) != v
                                          for v in (m.content, m.context, m.resolution))]
    types = collections.Counter(m.memory_type for m in records)
    row = {
        "segments_extracted": sum(1 for r in results if r.status == "extracted"),
        "segments_pending": sum(1 for r in results if r.status == "pending"),
        "inserted": sum(r.inserted for r in results),
        "merged": sum(r.merged for r in results),
        "dropped_low_confidence": sum(r.dropped_low_confidence for r in results),
        "memories_from_this_session": len(records),
    }
    metadata = {
        **row,
        "memory_types": dg.MetadataValue.json(dict(types)),
        "preview": dg.MetadataValue.md("\n".join(
            f"- **{m.memory_type}** ({m.tier}) {m.summary_l0}" for m in records[:20]) or "(none)"),
    }
    check = dg.AssetCheckResult(check_name="memories_redacted", passed=not leaks,
                                metadata={"unredacted": dg.MetadataValue.json(leaks[:20])})
    return PartitionOutcome(key, metadata, check, row)


@dg.asset(
    deps=["memories"],
    group_name="memory_hub",
    kinds={"postgres"},
    automation_condition=follow_upstream,
    pool=STORE_POOL,
    description="Tier rebalance: top ULTRON_HOT_PERCENTILE by hits are HOT, the next ULTRON_WARM_PERCENTILE WARM, "
                "the rest COLD; COLD rows unused for ULTRON_COLD_TTL_DAYS are archived.",
)
def tiers(context: dg.AssetExecutionContext, ultron: UltronResource) -> dg.MaterializeResult:
    counts = ultron.client().run_tier_rebalance()
    context.log.info(f"tiers: {counts}")
    return dg.MaterializeResult(metadata={
        **{k.lower(): v for k, v in counts.items()},
        "distribution": dg.MetadataValue.md(tier_chart(counts)),
    })
