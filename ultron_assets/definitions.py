"""The Dagster code location: raw_sessions → (later) task_segments → quality_metrics → …"""

import dagster as dg

from jobs.ingest import ingest_inbox, ingest_sessions
from jobs.maintenance import maintenance
from resources.database import UltronResource
from resources.llm import LLMResource
from sensors.schedules import build_maintenance_schedule
from sensors.session_files import build_session_file_sensor
from ultron.settings import Settings
from ultron_assets.memories import memories, tiers
from ultron_assets.raw_sessions import raw_sessions
from ultron_assets.trajectory import quality_metrics, task_segments

settings = Settings.from_env()

defs = dg.Definitions(
    assets=[raw_sessions, task_segments, quality_metrics, memories, tiers],
    jobs=[ingest_sessions, ingest_inbox, maintenance],
    sensors=[build_session_file_sensor(settings)],
    schedules=[build_maintenance_schedule(settings)],
    resources={"ultron": UltronResource(), "llm": LLMResource()},
    executor=dg.in_process_executor,
)
