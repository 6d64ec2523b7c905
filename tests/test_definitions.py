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


def test_maintenance_job_runs_the_one_sequence_the_sdk_runs():
    """The schedule's job, the sensor's batch job and `Ultron().run_maintenance()` share one
    definition of the steps and their order (ultron.maintenance.STEPS)."""
    from jobs.maintenance import ingest_inbox, maintenance_job
    from ultron.maintenance import PIPELINE_STEPS, STEPS

    def order(job) -> list[str]:
        deps = {n.name: {d.node.name for deps in job.graph.dependency_structure.input_to_upstream_outputs_for_node(
            n.name).values() for d in deps} for n in job.graph.nodes}
        out: list[str] = []
        while len(out) < len(deps):
            out += sorted(n for n, ups in deps.items() if n not in out and ups <= set(out))
        return out

    assert order(maintenance_job) == [s.name for s in STEPS]
    assert order(ingest_inbox) == [s.name for s in PIPELINE_STEPS]
    assert [s.key for s in STEPS] == ["refreshed", "segmented", "labeled", "extracted", "fallbacks_redone", "tiers",
                                      "owner_indexes", "clusters", "skills", "consolidation", "raw_archive_purged"]
