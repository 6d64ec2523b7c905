import dagster as dg

from ultron_assets.sft import sft_dataset

#: Launched from the UI (Launchpad) with optional filters, e.g.
#: ops: {sft_dataset: {config: {task_type: code, min_score: 0.85, limit: 1000}}}
sft_export_job = dg.define_asset_job(
    "sft_export_job",
    selection=[sft_dataset],
    description="Export high-scoring segments as an SFT dataset (OpenAI chat + ShareGPT) under ULTRON_HOME/sft/; "
                "its blocking check validates every file.",
)
