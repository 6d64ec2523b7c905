"""Backfills of the per-session assets run a range of partitions per run (BackfillPolicy.multi_run).

Defect covered: a backfill over N session partitions launched N runs, each loading torch
and Presidio; the assets only understood a single context.partition_key."""

import dagster as dg

from resources.database import UltronResource
from resources.llm import LLMResource
from tests.assets.test_trajectory_assets import SEED_EXAMPLE
from tests.conftest import TEST_HOME, write_jsonl
from ultron.sessions.discovery import partition_key
from ultron_assets.memory import memories
from ultron_assets.partitions import session_partitions
from ultron_assets.ranges import BACKFILL_PARTITIONS_PER_RUN
from ultron_assets.trajectory import quality_metrics, raw_sessions, task_segments

PER_SESSION = (raw_sessions, task_segments, quality_metrics, memories)


def materialize_range(instance, keys, assets=PER_SESSION):
    instance.add_dynamic_partitions(session_partitions.name, keys)
    return dg.materialize(
        list(assets), instance=instance,
        tags={"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]},
        resources={"ultron": UltronResource(home=str(TEST_HOME)), "llm": LLMResource()})


def test_per_session_assets_declare_a_multi_run_backfill_policy():
    for asset in PER_SESSION:
        policy = asset.backfill_policy
        assert policy is not None and policy.max_partitions_per_run == BACKFILL_PARTITIONS_PER_RUN, asset.key


def test_one_run_processes_a_range_of_session_partitions_each_like_a_single_partition(
        client, dagster_instance, tmp_path):
    files = [write_jsonl(tmp_path / f"range-{i}.jsonl", SEED_EXAMPLE) for i in range(3)]
    keys = [partition_key("range-agent", f) for f in files]
    result = materialize_range(dagster_instance, keys)
    assert result.success
    for asset in ("raw_sessions", "task_segments", "quality_metrics", "memories"):
        mats = result.asset_materializations_for_node(asset)
        assert sorted(m.partition for m in mats) == sorted(keys), asset
    md = result.asset_materializations_for_node("task_segments")[0].metadata
    assert md["partitions"].value == 3 and md["segments"].value == 6  # 2 segments per session, summed
    table = md["partition_table"].value.records
    assert [r.data["partition"] for r in table] == keys and all(r.data["segments"] == 2 for r in table)
    raw = result.asset_materializations_for_node("raw_sessions")[0].metadata
    assert raw["messages"].value == 3 * len(SEED_EXAMPLE)
    assert result.asset_materializations_for_node("quality_metrics")[0].metadata["labeled_now"].value == 6
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == {"parsed_cleanly", "segments_cover_session", "scores_in_range", "memories_redacted"}
    assert all(e.passed for e in evaluations.values())
    stats = client.trajectory_service.get_trajectory_stats()
    assert stats["segments"]["labeled"] == 6


def test_a_bad_session_in_a_range_fails_the_check_and_names_its_partition(client, dagster_instance, tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", SEED_EXAMPLE)
    bad = write_jsonl(tmp_path / "bad.jsonl", [SEED_EXAMPLE[0], b"{not json\n", SEED_EXAMPLE[1]])
    keys = [partition_key("mixed-agent", good), partition_key("mixed-agent", bad)]
    result = materialize_range(dagster_instance, keys, assets=(raw_sessions,))
    assert result.success  # bad input never fails a run
    [check] = result.get_asset_check_evaluations()
    assert check.check_name == "parsed_cleanly" and not check.passed
    assert check.metadata["failed_partitions"].value == [keys[1]]
    md = result.asset_materializations_for_node("raw_sessions")[0].metadata
    assert md["problem_count"].value == 1
    assert [r.data["problem_count"] for r in md["partition_table"].value.records] == [0, 1]
