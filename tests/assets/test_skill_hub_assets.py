"""The whole-store assets a user opens in the UI: clusters → skills, and sft_dataset with
its blocking check; plus the pipeline and SFT export jobs."""

import json
import shutil
from pathlib import Path

import dagster as dg
import pytest

from jobs.ingest import pipeline_job
from jobs.sft_export import sft_export_job
from resources.database import UltronResource
from resources.llm import LLMResource
from tests.conftest import TEST_HOME
from ultron.sessions.discovery import partition_key
from ultron_assets.skills import clusters
from ultron_assets.memory import memories, tiers
from ultron_assets.partitions import session_partitions
from ultron_assets.trajectory import raw_sessions
from ultron_assets.sft import sft_dataset
from ultron_assets.skills import skills
from ultron_assets.trajectory import quality_metrics, task_segments

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PER_PARTITION = [raw_sessions, task_segments, quality_metrics, memories]
RESOURCES = {"ultron": UltronResource(home=str(TEST_HOME)), "llm": LLMResource()}


def metadata(result, asset):
    [m] = result.asset_materializations_for_node(asset)
    return m.metadata


@pytest.fixture
def examples_ingested(client, dagster_instance, tmp_path, monkeypatch):
    """Every example session through the per-partition assets, as the sensor's runs do,
    embedded by the real default model: which memories belong together is what is tested."""
    monkeypatch.setenv("ULTRON_EMBEDDING_PROVIDER", "local")
    for path in sorted(EXAMPLES.glob("*.jsonl")):
        copy = shutil.copy(path, tmp_path / path.name)
        key = partition_key("examples", Path(copy))
        dagster_instance.add_dynamic_partitions(session_partitions.name, [key])
        assert dg.materialize(PER_PARTITION, partition_key=key, instance=dagster_instance,
                              resources=RESOURCES).success
    return client


def test_examples_crystallise_into_a_skill_on_disk(examples_ingested, dagster_instance):
    result = dg.materialize([tiers, clusters, skills], instance=dagster_instance, resources=RESOURCES,
                            selection=[tiers, clusters, skills])
    assert result.success
    c = metadata(result, "clusters")
    assert "| topic | memories |" in c["sizes"].value
    assert c["clusters_table"].value.records, "the Docker dependency fixes form a cluster"
    s = metadata(result, "skills")
    previews = [k for k in s if k.startswith("preview_")]
    assert previews, [r.data for r in c["clusters_table"].value.records]
    md = s[previews[0]].value
    assert md.startswith("---") and "name:" in md and "description:" in md and "metadata:" in md
    [current] = [sk for sk in examples_ingested.skills.list_skills()][:1]
    skill_dir = Path(examples_ingested.get_skill(current["slug"])["path"])
    assert (skill_dir / "SKILL.md").is_file() and skill_dir.name.endswith("-1.0.0")
    meta = json.loads((skill_dir / "_meta.json").read_text())
    assert meta["version"] == "1.0.0" and meta["cluster_id"]
    # A second run with nothing new publishes nothing.
    again = dg.materialize([clusters, skills], instance=dagster_instance, resources=RESOURCES)
    assert not [k for k in metadata(again, "skills") if k.startswith("preview_")]


def test_sft_dataset_passes_its_blocking_check(examples_ingested, dagster_instance):
    result = dg.materialize([sft_dataset], instance=dagster_instance, resources=RESOURCES)
    assert result.success
    [check] = result.get_asset_check_evaluations()
    assert check.check_name == "sft_files_valid" and check.passed
    m = metadata(result, "sft_dataset")
    export_dir = Path(m["export_dir"].value)
    assert export_dir.is_relative_to(TEST_HOME / "sft")
    manifest = json.loads((export_dir / "manifest.json").read_text())
    assert manifest["counts"]["exported"] >= 5 and manifest["sources"]
    lines = [json.loads(line) for f in export_dir.glob("*openai*.jsonl") for line in f.read_text().splitlines()]
    assert any("tool_calls" in msg for ex in lines for msg in ex["messages"])


def test_sft_export_job_takes_filters_as_config(examples_ingested, dagster_instance):
    defs = dg.Definitions(assets=[sft_dataset], jobs=[sft_export_job], resources=RESOURCES)
    result = defs.resolve_job_def("sft_export_job").execute_in_process(
        instance=dagster_instance, run_config={"ops": {"sft_dataset": {"config": {"task_type": "ops", "limit": 3}}}})
    assert result.success
    manifest = json.loads((Path(metadata(result, "sft_dataset")["export_dir"].value) / "manifest.json").read_text())
    assert manifest["filters"]["limit"] == 3 and manifest["filters"]["task_type"] == "ops"
    assert 1 <= manifest["counts"]["exported"] <= 3


def test_pipeline_job_runs_the_whole_graph_for_a_partition(client, dagster_instance, tmp_path):
    copy = shutil.copy(EXAMPLES / "openai-tool-calls-flight.jsonl", tmp_path / "flight.jsonl")
    key = partition_key("pipeline", Path(copy))
    dagster_instance.add_dynamic_partitions(session_partitions.name, [key])
    defs = dg.Definitions(assets=[*PER_PARTITION, tiers, clusters, skills, sft_dataset], jobs=[pipeline_job],
                          resources=RESOURCES)
    result = defs.resolve_job_def("pipeline_job").execute_in_process(instance=dagster_instance, partition_key=key)
    assert result.success
    done = {e.event_specific_data.materialization.asset_key.to_user_string()
            for e in result.get_asset_materialization_events()}
    assert done == {"raw_sessions", "task_segments", "quality_metrics", "memories", "tiers", "clusters", "skills",
                    "sft_dataset"}
