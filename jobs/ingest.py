import dagster as dg

from jobs.maintenance import ingest_inbox

__all__ = ["ingest_inbox", "ingest_sessions", "pipeline_job"]

#: What the inbox sensor launches for a few files: one run per new or changed file.
ingest_sessions = dg.define_asset_job(
    "ingest_sessions",
    selection=["raw_sessions", "task_segments", "quality_metrics", "memories"],
    description="Ingest, segment, score and extract memories from one session partition of each asset: a "
                "session file, or under ULTRON_PARTITIONING=daily the files an agent's day received.",
)

#: Every asset, for one session partition plus the whole-store assets after it: what the UI's
#: "Materialize all" and a backfill over all session partitions run.
pipeline_job = dg.define_asset_job(
    "pipeline_job",
    selection=dg.AssetSelection.all(),
    description="The whole asset graph: raw_sessions → task_segments → quality_metrics → memories (per session "
                "partition) → tiers → clusters → skills, and sft_dataset.",
)
