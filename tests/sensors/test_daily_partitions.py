"""ULTRON_PARTITIONING=daily: one partition per agent and arrival day, driven for real.

Defect covered: one dynamic partition per session file passes Dagster's advised ~100k
partitions per asset on a busy inbox. Under ``daily`` the sensor, the per-session assets,
their checks and a UI backfill work on ``agent:YYYY-MM-DD`` partitions instead."""

import json
import logging
import math
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from resources.database import UltronResource
from resources.llm import LLMResource
from sensors.session_files import build_session_file_sensor
from tests.assets.test_trajectory_assets import SEED_EXAMPLE
from tests.conftest import TEST_HOME, write_jsonl
from ultron.db.arrivals import ArrivalLedger
from ultron.settings import Settings
from ultron_assets.memory import build_per_session_assets
from ultron_assets.partitions import SESSION_DAYS
from ultron_assets.ranges import BACKFILL_PARTITIONS_PER_RUN

ROOT = Path(__file__).resolve().parents[2]
DAY1, DAY2 = "2026-03-01", "2026-03-02"


def at(day: str, hour: int = 12) -> float:
    return datetime.fromisoformat(f"{day}T{hour:02d}:00:00").replace(tzinfo=timezone.utc).timestamp()


def put(path: Path, rows, day: str, hour: int = 12) -> Path:
    write_jsonl(path, rows)
    os.utime(path, (at(day, hour), at(day, hour)))
    return path


@pytest.fixture
def inbox(tmp_path, monkeypatch):
    """Two agents over two days (3 files each), the inbox the assets' resource reads too."""
    inbox = tmp_path / "inbox"
    monkeypatch.setenv("ULTRON_INBOX", str(inbox))
    tag = uuid.uuid4().hex[:6]  # the arrivals live in the suite's database: keys unique per test
    a, b = f"ana-{tag}", f"bob-{tag}"
    put(inbox / a / "p" / "a1.jsonl", SEED_EXAMPLE, DAY1, 1)
    put(inbox / a / "p" / "a2.jsonl", SEED_EXAMPLE, DAY1, 23)
    put(inbox / a / "p" / "a3.jsonl", SEED_EXAMPLE, DAY2, 0)
    put(inbox / b / "b1.jsonl", [SEED_EXAMPLE[0], b"{not json\n", *SEED_EXAMPLE[1:]], DAY1)
    put(inbox / b / "b2.jsonl", SEED_EXAMPLE, DAY2)
    put(inbox / b / "b3.jsonl", SEED_EXAMPLE, DAY2, 22)
    return inbox, a, b


def daily_sensor(**overrides):
    return build_session_file_sensor(Settings.from_env(partitioning="daily", **overrides))


def tick(sensor, instance, cursor=None):
    return sensor(dg.build_sensor_context(instance=instance, cursor=cursor))


def materialize(instance, key):
    instance.add_dynamic_partitions(SESSION_DAYS.name, [key])
    return dg.materialize(build_per_session_assets(SESSION_DAYS), partition_key=key, instance=instance,
                          resources={"ultron": UltronResource(home=str(TEST_HOME)), "llm": LLMResource()})


def test_files_of_two_agents_over_two_days_become_four_partitions_and_a_change_reruns_its_day(
        dagster_instance, inbox):
    inbox, a, b = inbox
    sensor = daily_sensor()
    first = tick(sensor, dagster_instance)
    keys = sorted(r.partition_key for r in first.run_requests)
    assert keys == sorted([f"{a}:{DAY1}", f"{a}:{DAY2}", f"{b}:{DAY1}", f"{b}:{DAY2}"])
    assert {r.partition_key: r.tags["ultron/files"] for r in first.run_requests}[f"{a}:{DAY1}"] == "2"
    assert all(r.job_name == "ingest_sessions" for r in first.run_requests)
    [add] = first.dynamic_partitions_requests
    assert add.partitions_def_name == "session_days" and sorted(add.partition_keys) == keys

    assert tick(sensor, dagster_instance, first.cursor).run_requests == []

    a1 = inbox / a / "p" / "a1.jsonl"
    with open(a1, "a") as fh:  # appended today: the file keeps the day it arrived on
        fh.write(json.dumps({"role": "user", "content": "thanks"}) + "\n")
    third = tick(sensor, dagster_instance, first.cursor)
    [rerun] = third.run_requests
    assert rerun.partition_key == f"{a}:{DAY1}" and rerun.tags["ultron/files"] == "1"
    assert rerun.run_key not in {r.run_key for r in first.run_requests}
    assert third.dynamic_partitions_requests == []

    # A lost cursor sees every file as new again, but the ledger keeps their days.
    again = tick(sensor, dagster_instance)
    assert sorted(r.partition_key for r in again.run_requests) == keys


def test_a_large_sweep_of_days_becomes_one_batch_run(dagster_instance, inbox):
    inbox, a, b = inbox
    result = tick(daily_sensor(sensor_max_runs_per_tick=3), dagster_instance)
    [req] = result.run_requests
    assert req.job_name == "ingest_inbox" and req.partition_key is None and req.tags["ultron/files"] == "6"
    assert len(result.dynamic_partitions_requests[0].partition_keys) == 4


def test_materialising_a_day_ingests_exactly_its_files_with_checks_and_metadata(client, dagster_instance, inbox):
    inbox, a, b = inbox
    tick(daily_sensor(), dagster_instance)  # records the arrivals
    day = f"{a}:{DAY1}"
    assert ArrivalLedger(client.db.engine).files_in(day) == [f"{a}:{a}/p/a1.jsonl", f"{a}:{a}/p/a2.jsonl"]

    result = materialize(dagster_instance, day)
    assert result.success
    with client.db.engine.connect() as conn:
        stored = sorted(conn.execute(sa.text("SELECT session_file FROM trajectory_records")).scalars())
    assert stored == [str(inbox / a / "p" / "a1.jsonl"), str(inbox / a / "p" / "a2.jsonl")]
    raw = result.asset_materializations_for_node("raw_sessions")[0]
    assert raw.partition == day
    md = raw.metadata
    assert md["files"].value == 2 and md["messages"].value == 2 * len(SEED_EXAMPLE)
    assert md["statuses"].value == {"new": 2}
    assert [r.data["file"] for r in md["file_table"].value.records] == [f"{a}:{a}/p/a1.jsonl", f"{a}:{a}/p/a2.jsonl"]
    seg = result.asset_materializations_for_node("task_segments")[0].metadata
    assert seg["files"].value == 2 and seg["segments"].value == 4  # two segments per session
    assert result.asset_materializations_for_node("quality_metrics")[0].metadata["labeled_now"].value == 4
    assert result.asset_materializations_for_node("memories")[0].metadata["files"].value == 2
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert set(checks) == {"parsed_cleanly", "segments_cover_session", "scores_in_range", "memories_redacted"}
    assert all(c.passed for c in checks.values())

    # The other agent's first day holds a file with a bad line: the check names that file.
    bad_day = materialize(dagster_instance, f"{b}:{DAY1}")
    [parsed] = [c for c in bad_day.get_asset_check_evaluations() if c.check_name == "parsed_cleanly"]
    assert not parsed.passed and parsed.severity == dg.AssetCheckSeverity.WARN
    assert parsed.metadata["failed_files"].value == [f"{b}:{b}/b1.jsonl"]
    problems = bad_day.asset_materializations_for_node("raw_sessions")[0].metadata["problems"].value.records
    assert [(p.data["file"], p.data["line"]) for p in problems] == [(f"{b}:{b}/b1.jsonl", 2)]

    # A file of the day changes: its re-run re-ingests that file only; the day's files stay the same.
    with open(inbox / a / "p" / "a2.jsonl", "a") as fh:
        fh.write(json.dumps({"role": "user", "content": "one more thing"}) + "\n")
    rerun = materialize(dagster_instance, day)
    assert rerun.asset_materializations_for_node("raw_sessions")[0].metadata["statuses"].value == {
        "unchanged": 1, "changed": 1}


def test_a_backfill_of_all_daily_partitions_runs_one_run_per_hundred_days(project_instance, monkeypatch):
    """Through the GraphQL API the UI uses, against the project's code location loaded with
    ULTRON_PARTITIONING=daily (the runs are only queued: nothing is ingested)."""
    from dagster._core.storage.dagster_run import RunsFilter
    from dagster._core.storage.tags import BACKFILL_ID_TAG
    from dagster._daemon.backfill import execute_backfill_iteration
    from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

    from tests.e2e.test_backfill_runs import LAUNCH, PER_SESSION

    monkeypatch.setenv("ULTRON_PARTITIONING", "daily")
    keys = [f"agent{i}:2026-01-{d:02d}" for i in range(4) for d in range(1, 31)]  # 120 days
    project_instance.add_dynamic_partitions("session_days", keys)
    with define_out_of_process_context(str(ROOT / "workspace.yaml"), None, project_instance) as context:
        result = execute_dagster_graphql(context, LAUNCH, variables={"params": {
            "assetSelection": [{"path": [a]} for a in PER_SESSION], "allPartitions": True}})
        launched = result.data["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        runs = []
        for _ in range(5):
            list(execute_backfill_iteration(context.process_context, logging.getLogger("backfill")))
            runs = list(project_instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: launched["backfillId"]})))
            if runs:
                break
    assert len(runs) == math.ceil(len(keys) / BACKFILL_PARTITIONS_PER_RUN) == 2
    covered = []
    for run in runs:
        start, end = run.tags["dagster/asset_partition_range_start"], run.tags["dagster/asset_partition_range_end"]
        covered += keys[keys.index(start): keys.index(end) + 1]
        assert {k.to_user_string() for k in run.asset_selection} == set(PER_SESSION)
    assert sorted(covered) == sorted(keys)


def test_the_batch_run_reports_and_checks_day_partitions_and_prunes_forgotten_days(
        client, db, dagster_instance, inbox, monkeypatch):
    """ingest_inbox (the sensor's batch job) runs unpartitioned: it reads the mode from its
    run's settings and reports each day it touched as one partition, never file keys."""
    from jobs.forget import prune_stale_partitions
    from jobs.maintenance import ingest_inbox
    from ultron.sdk import Ultron

    inbox, a, b = inbox
    monkeypatch.setenv("ULTRON_PARTITIONING", "daily")
    [req] = tick(daily_sensor(sensor_max_runs_per_tick=1), dagster_instance).run_requests
    assert req.job_name == "ingest_inbox"
    result = ingest_inbox.execute_in_process(
        instance=dagster_instance, resources={"ultron": UltronResource(home=str(TEST_HOME)), "llm": LLMResource()})
    assert result.success
    mats = [e.event_specific_data.materialization for e in result.all_events
            if e.event_type_value == "ASSET_MATERIALIZATION"]
    days = sorted([f"{a}:{DAY1}", f"{a}:{DAY2}", f"{b}:{DAY1}", f"{b}:{DAY2}"])
    for asset in ("raw_sessions", "task_segments", "quality_metrics"):
        assert sorted(m.partition for m in mats if m.asset_key.path[-1] == asset) == days, asset
    raw = {m.partition: m.metadata for m in mats if m.asset_key.path[-1] == "raw_sessions"}
    assert raw[f"{b}:{DAY2}"]["files"].value == 2 and raw[f"{b}:{DAY2}"]["messages"].value == 2 * len(SEED_EXAMPLE)
    assert all(dagster_instance.has_dynamic_partition("session_days", d) for d in days)
    assert not dagster_instance.has_dynamic_partition("session_files", f"{a}:{a}/p/a1.jsonl")
    parsed = {e.partition: e for e in (ev.event_specific_data for ev in result.all_events
                                       if ev.event_type_value == "ASSET_CHECK_EVALUATION")
              if e.check_name == "parsed_cleanly"}
    assert sorted(d for d, e in parsed.items() if not e.passed) == [f"{b}:{DAY1}"]
    assert parsed[f"{b}:{DAY1}"].metadata["failed_files"].value == [f"{b}:{b}/b1.jsonl"]

    # The day's only file is forgotten and deleted: the maintenance refresh prunes that day only.
    daily = Ultron(Settings.from_env(), db=db)
    daily.forget(session_file=str(inbox / b / "b1.jsonl"))
    (inbox / b / "b1.jsonl").unlink(missing_ok=True)
    assert prune_stale_partitions(dagster_instance, daily) == [f"{b}:{DAY1}"]
    assert prune_stale_partitions(dagster_instance, daily) == []
    ledger = ArrivalLedger(db.engine)  # the forgotten file's arrival went with it; the others stay
    assert ledger.day_of(f"{b}:{b}/b1.jsonl") is None and ledger.files_in(f"{b}:{DAY1}") == []
    assert ledger.files_in(f"{b}:{DAY2}") == [f"{b}:{b}/b2.jsonl", f"{b}:{b}/b3.jsonl"]
