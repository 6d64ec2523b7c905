import dagster as dg

from jobs.maintenance import refresh_sessions
from ultron_assets.raw_sessions import raw_sessions

#: What the inbox sensor launches for a few files: one run per new or changed file.
ingest_sessions = dg.define_asset_job(
    "ingest_sessions",
    selection=[raw_sessions],
    description="Ingest one session file (a raw_sessions partition).",
)


@dg.job(description="Ingest every new or changed inbox file in one run (the sensor's batch mode: "
        "a first sweep of thousands of files would otherwise start thousands of runs).")
def ingest_inbox() -> None:
    refresh_sessions()
