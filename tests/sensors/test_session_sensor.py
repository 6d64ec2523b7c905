"""The inbox sensor, the maintenance job and its schedule."""

import json
import os

import dagster as dg

from resources.database import UltronResource
from resources.llm import LLMResource
from sensors.schedules import build_maintenance_schedule
from sensors.session_files import build_session_file_sensor
from tests.conftest import TEST_HOME, write_jsonl
from ultron.inbox import diff_inbox
from ultron.settings import Settings
from jobs.maintenance import maintenance_job as maintenance

ROW = {"role": "user", "content": "hello"}


def tick(sensor, instance, cursor=None):
    ctx = dg.build_sensor_context(instance=instance, cursor=cursor)
    return sensor(ctx)


def test_new_and_changed_files_become_partitions_and_runs_once(dagster_instance, tmp_path):
    inbox = tmp_path / "inbox"
    settings = Settings.from_env(home=tmp_path / "home", inbox=(inbox,))
    a = write_jsonl(inbox / "alice" / "proj" / "a.jsonl", [ROW])
    write_jsonl(inbox / "loose.jsonl", [ROW])
    write_jsonl(inbox / ".hidden" / "h.jsonl", [ROW])
    (inbox / "notes.txt").write_text("ignored")
    sensor = build_session_file_sensor(settings)

    first = tick(sensor, dagster_instance)
    keys = sorted(r.partition_key for r in first.run_requests)
    assert keys == ["alice:alice/proj/a.jsonl", "default:loose.jsonl"]
    assert {r.tags["ultron/agent_id"] for r in first.run_requests} == {"alice", "default"}
    [add] = first.dynamic_partitions_requests
    assert sorted(add.partition_keys) == keys and add.partitions_def_name == "session_files"

    second = tick(sensor, dagster_instance, first.cursor)
    assert second.run_requests == [] and second.dynamic_partitions_requests == []

    with open(a, "a") as fh:
        fh.write(json.dumps(ROW) + "\n")
    third = tick(sensor, dagster_instance, second.cursor)
    [req] = third.run_requests
    assert req.partition_key == "alice:alice/proj/a.jsonl"
    assert req.run_key not in {r.run_key for r in first.run_requests}
    assert third.dynamic_partitions_requests == []  # known partition, nothing to add

    a.unlink()
    fourth = diff_inbox([inbox], "default", third.cursor)
    assert fourth.new == fourth.changed == [] and fourth.removed == [str(a)]
    assert str(a) not in fourth.files() and str(inbox / "loose.jsonl") in fourth.files()


def test_a_large_sweep_becomes_one_batch_run(dagster_instance, tmp_path):
    inbox = tmp_path / "inbox"
    for i in range(4):
        write_jsonl(inbox / "bulk" / f"s{i}.jsonl", [ROW])
    sensor = build_session_file_sensor(
        Settings.from_env(home=tmp_path / "home", inbox=(inbox,), sensor_max_runs_per_tick=3))
    result = tick(sensor, dagster_instance)
    [req] = result.run_requests
    assert req.job_name == "ingest_inbox" and req.partition_key is None
    assert req.run_key.startswith("batch|") and req.tags["ultron/files"] == "4"
    assert len(result.dynamic_partitions_requests[0].partition_keys) == 4
    assert tick(sensor, dagster_instance, result.cursor).run_requests == []


def test_a_garbled_cursor_starts_over_instead_of_failing(tmp_path):
    inbox = tmp_path / "inbox"
    write_jsonl(inbox / "s.jsonl", [ROW])
    assert len(diff_inbox([inbox], "default", "{not json").new) == 1
    assert len(diff_inbox([inbox], "default", "z2:not-base64!").new) == 1
    assert len(diff_inbox([inbox], "default", json.dumps({"v": 99})).new) == 1


def test_the_cursor_stays_small_for_many_files(tmp_path):
    inbox = tmp_path / "inbox"
    for i in range(2000):
        write_jsonl(inbox / f"agent{i % 20:02d}" / "project" / f"session-{i:06d}.jsonl", [ROW])
    diff = diff_inbox([inbox], "default", None)
    assert len(diff.new) == 2000
    # Dagster keeps the cursor with every tick: well under 40 bytes a file.
    assert len(diff.cursor()) < 2000 * 40
    assert diff_inbox([inbox], "default", diff.cursor()).unchanged == 2000


def test_unsupported_file_names_are_reported_not_requested(tmp_path):
    inbox = tmp_path / "inbox"
    write_jsonl(inbox / "odd...name.jsonl", [ROW])
    diff = diff_inbox([inbox], "default", None)
    assert diff.new == [] and "odd...name.jsonl" in diff.unsupported[0][0]


def test_maintenance_schedule_follows_decay_interval(tmp_path):
    schedule = build_maintenance_schedule(Settings.from_env(home=tmp_path, decay_interval_hours=3))
    assert schedule.cron_schedule == "0 */3 * * *"
    assert schedule.job_name == "maintenance_job"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_maintenance_job_reingests_what_the_sensor_missed(client, settings, dagster_instance):
    inbox = settings.inbox[0]
    f = write_jsonl(inbox / "maint-agent" / "m.jsonl", [ROW])
    try:
        result = maintenance.execute_in_process(
            instance=dagster_instance, resources={"ultron": UltronResource(home=str(TEST_HOME)), "llm": LLMResource()})
        assert result.success
        mats = [e.event_specific_data.materialization for e in result.all_events
                if e.event_type_value == "ASSET_MATERIALIZATION"]
        key = "maint-agent:maint-agent/m.jsonl"
        events = [(m.asset_key.path[-1], m.partition) for m in mats]
        assert events[:3] == [("raw_sessions", key), ("task_segments", key), ("quality_metrics", key)]
        assert ("tiers", None) in events  # the rebalance step ran too
        assert mats[0].metadata["status"].value == "new"
        assert dagster_instance.has_dynamic_partition("session_files", "maint-agent:maint-agent/m.jsonl")
        # Nothing pending any more: a second run does nothing.
        again = maintenance.execute_in_process(
            instance=dagster_instance, resources={"ultron": UltronResource(home=str(TEST_HOME)), "llm": LLMResource()})
        assert [e.event_specific_data.materialization.asset_key.path[-1] for e in again.all_events
                if e.event_type_value == "ASSET_MATERIALIZATION"] == ["tiers", "clusters", "skills"]
    finally:
        os.unlink(f)


def test_partitions_of_sessions_forgotten_outside_dagster_are_pruned(client, settings, dagster_instance, tmp_path):
    """`ultron forget` and the HTTP API cannot reach Dagster: the maintenance job removes a
    partition whose session is gone from the store and whose file is gone from disk, and
    keeps one whose file is only waiting to be ingested."""
    from jobs.forget import prune_stale_partitions

    waiting = write_jsonl(tmp_path / "waiting.jsonl", [ROW])
    gone_key, waiting_key = f"old-agent:{tmp_path / 'forgotten.jsonl'}", f"new-agent:{waiting}"
    dagster_instance.add_dynamic_partitions("session_files", [gone_key, waiting_key])
    assert gone_key in prune_stale_partitions(dagster_instance, client)
    left = dagster_instance.get_dynamic_partitions("session_files")
    assert waiting_key in left and gone_key not in left


def test_watched_agent_directories_are_read_in_place_under_their_agent(dagster_instance, tmp_path):
    """ULTRON_WATCH: the agents' own session directories, no copy; every file there is the
    agent's, keyed by its absolute path (the key `ingest` of that path gives), and a file
    that grows is a changed partition like an inbox file."""
    projects = tmp_path / "home" / ".claude" / "projects"
    rollouts = tmp_path / "home" / ".codex" / "sessions"
    a = write_jsonl(projects / "-work-shop" / "0ccf1a04.jsonl", [ROW])
    b = write_jsonl(rollouts / "2026" / "11" / "28" / "rollout-2026-11-28T10-00-00-abc.jsonl", [ROW])
    settings = Settings.from_env({"ULTRON_WATCH": f"claude-code:{projects},codex:{rollouts}"},
                                 home=tmp_path / "ultron")
    assert projects in settings.ingest_roots and rollouts in settings.ingest_roots
    sensor = build_session_file_sensor(settings)

    first = tick(sensor, dagster_instance)
    assert sorted((r.partition_key, r.tags["ultron/agent_id"]) for r in first.run_requests) == [
        (f"claude-code:{a}", "claude-code"), (f"codex:{b}", "codex")]
    assert tick(sensor, dagster_instance, first.cursor).run_requests == []
    with open(a, "a") as fh:
        fh.write(json.dumps(ROW) + "\n")
    [grown] = tick(sensor, dagster_instance, first.cursor).run_requests
    assert grown.partition_key == f"claude-code:{a}"
    assert not (tmp_path / "ultron" / "inbox").exists()  # nothing was copied
