"""The project's dagster.yaml protects runs (issue 14, "Faults").

Defects covered: no run monitoring (a dead worker left its run STARTED forever), no run
retries, and no concurrency pool on the store-wide steps (a run waited on a Postgres
advisory lock while holding one of the two run slots). Each test builds an instance from
the real dagster.yaml, on its own database of the embedded Postgres server."""

import logging
import subprocess
import sys
from pathlib import Path

import dagster as dg
from dagster._core.events import DagsterEvent, RunFailureReason
from dagster._core.execution.retries import auto_reexecution_should_retry_run
from dagster._core.instance.config import PoolGranularity
from dagster._core.launcher import WorkerStatus
from dagster._core.storage.dagster_run import DagsterRunStatus, RunsFilter
from dagster._daemon.auto_run_reexecution.auto_run_reexecution import should_retry
from dagster._daemon.monitoring.run_monitoring import monitor_started_run

from resources.run_launcher import UltronRunLauncher

ROOT = Path(__file__).resolve().parents[1]
STORE_WIDE = ("tiers", "clusters", "skills")


def test_dagster_yaml_enables_run_monitoring_retries_and_a_store_pool_of_one(project_instance):
    instance = project_instance
    assert instance.run_monitoring_enabled
    assert instance.run_monitoring_start_timeout_seconds == 180
    assert instance.run_monitoring_cancel_timeout_seconds == 180
    assert instance.run_monitoring_poll_interval_seconds == 60
    assert instance.run_monitoring_max_resume_run_attempts == 0  # the default launcher cannot resume
    assert isinstance(instance.run_launcher, UltronRunLauncher)
    assert instance.run_launcher.supports_check_run_worker_health
    assert instance.run_retries_enabled and instance.run_retries_max_retries == 2
    assert instance.run_retries_retry_on_asset_or_op_failure is False
    concurrency = instance.get_concurrency_config()
    assert concurrency.pool_config.default_pool_limit == 1
    assert concurrency.pool_config.pool_granularity == PoolGranularity.RUN
    assert concurrency.run_queue_config.max_concurrent_runs == 2
    assert concurrency.run_queue_config.should_block_op_concurrency_limited_runs


def test_dagster_instance_info_loads_the_project_dagster_yaml(project_instance):
    """What `dagster dev` reads: the CLI validates the file against the installed schema."""
    out = subprocess.run([sys.executable, "-m", "dagster", "instance", "info"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "UltronRunLauncher" in out.stdout and "run_monitoring" in out.stdout


def test_store_wide_assets_and_maintenance_steps_share_the_ultron_store_pool():
    from jobs.maintenance import OPS, STORE_WIDE_STEPS
    from ultron_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    for key in STORE_WIDE:
        assert graph.get(dg.AssetKey(key)).pools == {"ultron_store"}, key
    for key in ("raw_sessions", "task_segments", "quality_metrics", "memories", "sft_dataset"):
        assert not graph.get(dg.AssetKey(key)).pools, key
    assert {name for name, op in OPS.items() if op.pool == "ultron_store"} == set(STORE_WIDE_STEPS) == {
        "redo_fallbacks", "rebalance_tiers", "index_owners", "cluster_memories", "evolve_skills", "consolidate_memories"}


def test_a_second_store_wide_run_stays_queued_instead_of_holding_a_run_slot(project_instance):
    """The queue daemon's view: with one maintenance run in progress, a second run that needs
    the pool is blocked (it stays QUEUED), while a per-session run is not."""
    from dagster._core.op_concurrency_limits_counter import GlobalOpConcurrencyLimitsCounter

    from jobs.ingest import ingest_sessions
    from jobs.maintenance import maintenance_job
    from ultron_assets.definitions import defs

    instance = project_instance
    first = instance.create_run_for_job(maintenance_job, status=DagsterRunStatus.STARTED)
    second = instance.create_run_for_job(maintenance_job, status=DagsterRunStatus.NOT_STARTED)
    assert second.run_op_concurrency and "ultron_store" in second.run_op_concurrency.all_pools
    per_session = instance.create_run_for_job(defs.resolve_job_def(ingest_sessions.name),
                                              status=DagsterRunStatus.NOT_STARTED)

    def daemon_pass() -> GlobalOpConcurrencyLimitsCounter:
        return GlobalOpConcurrencyLimitsCounter(
            instance, [second, per_session], instance.get_run_records(RunsFilter(run_ids=[first.run_id])),
            concurrency_keys=instance.event_log_storage.get_concurrency_keys(),
            pool_limits=instance.event_log_storage.get_pool_limits(),
            pool_granularity=instance.get_concurrency_config().pool_config.pool_granularity,
        )

    daemon_pass()  # the first pass gives the new pool dagster.yaml's default limit
    counter = daemon_pass()
    assert counter.is_blocked(second)
    assert not counter.is_blocked(per_session)
    instance.report_run_failed(first, "finished")  # the pool is free again: the second run may start
    assert not daemon_pass().is_blocked(second)
    assert instance.event_log_storage.get_concurrency_info("ultron_store").slot_count == 1


def _started_run(instance: dg.DagsterInstance, pid: int) -> dg.DagsterRun:
    from jobs.maintenance import maintenance_job

    run = instance.create_run_for_job(maintenance_job, status=DagsterRunStatus.STARTING)
    instance.report_dagster_event(
        DagsterEvent(dg.DagsterEventType.RUN_START.value, job_name=run.job_name, pid=pid), run_id=run.run_id)
    run = instance.get_run_by_id(run.run_id)
    assert run.status == DagsterRunStatus.STARTED
    return run


def test_run_monitoring_fails_a_started_run_whose_worker_died_and_it_is_retried(project_instance):
    instance = project_instance
    worker = subprocess.Popen([sys.executable, "-c", "pass"])
    worker.wait()  # a worker killed mid-run: its pid is gone, its run still says STARTED
    run = _started_run(instance, worker.pid)
    assert instance.run_launcher.check_run_worker_health(run).status == WorkerStatus.FAILED

    [record] = instance.get_run_records(RunsFilter(run_ids=[run.run_id]))
    monitor_started_run(instance, None, record, logging.getLogger("test"))
    failed = instance.get_run_by_id(run.run_id)
    assert failed.status == DagsterRunStatus.FAILURE
    assert should_retry(failed, instance)  # the retry daemon re-executes it


def test_run_monitoring_leaves_a_run_with_a_live_worker_alone(project_instance):
    import os

    instance = project_instance
    run = _started_run(instance, os.getpid())
    assert instance.run_launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
    [record] = instance.get_run_records(RunsFilter(run_ids=[run.run_id]))
    monitor_started_run(instance, None, record, logging.getLogger("test"))
    assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.STARTED


def test_a_run_that_failed_on_a_step_error_is_not_retried_in_a_loop(project_instance):
    instance = project_instance
    run = _started_run(instance, 1)
    instance.report_run_failed(run, "a step raised")
    run = instance.get_run_by_id(run.run_id)
    assert not auto_reexecution_should_retry_run(instance, run, RunFailureReason.STEP_FAILURE)
    assert auto_reexecution_should_retry_run(instance, run, RunFailureReason.RUN_EXCEPTION)
