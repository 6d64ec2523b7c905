"""The code location loads, with the graph, jobs, sensor and schedule a user expects."""

import subprocess
import sys
from pathlib import Path

import dagster as dg

ROOT = Path(__file__).resolve().parents[1]


def test_definitions_load():
    from ultron_assets.definitions import defs

    dg.Definitions.validate_loadable(defs)
    assert {j.name for j in defs.resolve_all_job_defs()} >= {
        "ingest_sessions", "ingest_inbox", "pipeline_job", "maintenance_job", "sft_export_job"}
    assert defs.resolve_sensor_def("ultron_automation_sensor").default_status == dg.DefaultSensorStatus.RUNNING
    keys = defs.resolve_asset_graph().get_all_asset_keys()
    assert {k.to_user_string() for k in keys} >= {
        "raw_sessions", "task_segments", "quality_metrics", "memories", "tiers", "clusters", "skills", "sft_dataset"}
    assert defs.resolve_sensor_def("session_file_sensor").default_status == dg.DefaultSensorStatus.RUNNING
    assert defs.resolve_schedule_def("maintenance_schedule").cron_schedule == "0 */6 * * *"
    assert dg.AssetKey("raw_sessions") in defs.resolve_asset_graph().get_all_asset_keys()


def test_domain_library_never_imports_dagster():
    code = "import sys, ultron.sdk, ultron.cli, ultron.inbox, ultron.ingestion; print('dagster' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr
