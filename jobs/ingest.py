import dagster as dg

from ultron_assets.raw_sessions import raw_sessions

#: What the inbox sensor launches: one run per new or changed session file.
ingest_sessions = dg.define_asset_job(
    "ingest_sessions",
    selection=[raw_sessions],
    description="Ingest one session file (a raw_sessions partition).",
)
