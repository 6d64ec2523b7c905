"""A UI backfill over every session partition, through the GraphQL API the UI uses.

Defect covered: a backfill over N session partitions launched N runs, each loading torch
and Presidio. With BackfillPolicy.multi_run it launches ceil(N / BACKFILL_PARTITIONS_PER_RUN).
The partitions are the session files of ../shared/data (claude-code and tau-airline-dev),
laid out as an inbox; the runs are only queued (the project's QueuedRunCoordinator, and no
queue daemon here), so nothing is ingested."""

import logging
import math
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.dagster_run import RunsFilter
from dagster._core.storage.tags import BACKFILL_ID_TAG
from dagster._daemon.backfill import execute_backfill_iteration
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

from tests.conftest import SHARED_DATA
from ultron.inbox import diff_inbox
from ultron_assets.partitions import session_partitions
from ultron_assets.ranges import BACKFILL_PARTITIONS_PER_RUN

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ("claude-code", "tau-airline-dev")
PER_SESSION = ["raw_sessions", "task_segments", "quality_metrics", "memories"]

LAUNCH = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message stack } } }"""

pytestmark = pytest.mark.skipif(not all((SHARED_DATA / a).is_dir() for a in AGENTS),
                                reason="../shared/data (claude-code, tau-airline-dev) is absent")


def shared_session_keys() -> list[str]:
    """Partition keys of the shared data's session files, as the sensor would name them."""
    diff = diff_inbox([SHARED_DATA], "default", None)
    return [f.partition_key for f in diff.new if f.partition_key.split(":", 1)[0] in AGENTS]


def backfill_runs(instance: dg.DagsterInstance, backfill_id: str) -> list[dg.DagsterRun]:
    return list(instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id})))


@pytest.mark.parametrize("assets", [["raw_sessions"], PER_SESSION], ids=["raw_sessions", "per_session_assets"])
def test_a_backfill_over_all_session_partitions_makes_one_run_per_hundred_partitions_not_one_per_file(
        project_instance, assets):
    instance = project_instance
    keys = shared_session_keys()
    assert len(keys) > BACKFILL_PARTITIONS_PER_RUN  # more than one run's worth, or the test proves nothing
    instance.add_dynamic_partitions(session_partitions.name, keys)

    with define_out_of_process_context(str(ROOT / "workspace.yaml"), None, instance) as context:
        result = execute_dagster_graphql(context, LAUNCH, variables={"params": {
            "assetSelection": [{"path": [a]} for a in assets], "allPartitions": True}})
        launched = result.data["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        backfill_id = launched["backfillId"]
        for _ in range(5):  # the backfill daemon's ticks: the first submits the runs
            list(execute_backfill_iteration(context.process_context, logging.getLogger("backfill")))
            if backfill_runs(instance, backfill_id):
                break

    runs = backfill_runs(instance, backfill_id)
    expected = math.ceil(len(keys) / BACKFILL_PARTITIONS_PER_RUN)
    print(f"backfill of {assets}: {len(keys)} partitions -> {len(runs)} runs (expected {expected})")
    assert len(runs) == expected
    ranges = sorted((r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"])
                    for r in runs)
    covered = []
    for start, end in ranges:
        covered += keys[keys.index(start): keys.index(end) + 1]
    assert sorted(covered) == sorted(keys)  # every partition in exactly one run
    for run in runs:
        assert {k.to_user_string() for k in run.asset_selection} == set(assets)
