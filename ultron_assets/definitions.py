"""The code location, in the seed's order:
raw_sessions → task_segments → quality_metrics → memories → tiers → clusters → skills,
and quality_metrics → sft_dataset. Assets live by hub: trajectory, memory, skills, sft."""

import os

import dagster as dg

from jobs.forget import forget_job
from jobs.ingest import ingest_inbox, ingest_sessions, pipeline_job
from jobs.maintenance import maintenance_job
from jobs.sft_export import sft_export_job
from resources.database import UltronResource
from resources.executors import build_executor
from resources.llm import LLMResource
from sensors.automation import build_automation_sensor
from sensors.schedules import build_maintenance_schedule
from sensors.session_files import build_session_file_sensor
from ultron.settings import Settings
from ultron_assets.memory import memories, tiers
from ultron_assets.sft import sft_dataset
from ultron_assets.skills import clusters, skills
from ultron_assets.trajectory import quality_metrics, raw_sessions, task_segments

settings = Settings.from_env()


def _env(name: str) -> dg.EnvVar | None:
    """URLs and keys come from the environment as dg.EnvVar (resolved at run time, never shown
    in run config or the UI); unset ones stay None so the ULTRON_* defaults apply."""
    return dg.EnvVar(name) if os.environ.get(name) else None


defs = dg.Definitions(
    assets=[raw_sessions, task_segments, quality_metrics, memories, tiers, clusters, skills, sft_dataset],
    jobs=[ingest_sessions, ingest_inbox, pipeline_job, maintenance_job, sft_export_job, forget_job],
    sensors=[build_session_file_sensor(settings), build_automation_sensor()],
    schedules=[build_maintenance_schedule(settings)],
    resources={
        "ultron": UltronResource(database_url=_env("ULTRON_DATABASE_URL")),
        "llm": LLMResource(base_url=_env("ULTRON_LLM_BASE_URL"), api_key=_env("ULTRON_LLM_API_KEY")),
    },
    executor=build_executor(settings),
)
