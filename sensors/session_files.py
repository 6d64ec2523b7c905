"""Watches ULTRON_INBOX for new or changed .jsonl files and asks for their ingestion.

Under ULTRON_PARTITIONING=session every new or changed file is a partition and a run; under
``daily`` each file is given its agent's arrival day (``ultron.inbox.plan_days``) and every
day with a new or changed file is one run of that day's partition."""

import hashlib

import dagster as dg

from jobs.ingest import ingest_inbox, ingest_sessions
from ultron.db.arrivals import ArrivalLedger
from ultron.inbox import InboxDiff, diff_inbox, plan_days
from ultron.settings import Settings
from ultron_assets.partitions import partitions_for


def build_session_file_sensor(settings: Settings | None = None) -> dg.SensorDefinition:
    settings = settings or Settings.from_env()
    partitions_def = partitions_for(settings.partitioning)
    ledger: list[ArrivalLedger] = []  # opened on the first tick that needs it, then kept

    @dg.sensor(
        name="session_file_sensor",
        jobs=[ingest_sessions, ingest_inbox],
        minimum_interval_seconds=settings.sensor_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="New or changed .jsonl files under ULTRON_INBOX become raw_sessions partitions and runs "
        "(under ULTRON_PARTITIONING=daily: runs of their agent's arrival day). The agent id is the first "
        "directory level under the inbox; files under an ULTRON_WATCH directory belong to its agent and "
        "are read in place. Above ULTRON_SENSOR_MAX_RUNS_PER_TICK runs in one tick, one "
        "ingest_inbox run takes them all.",
    )
    def session_file_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        diff = diff_inbox(settings.inbox, settings.default_agent_id, context.cursor, settings.watch)
        for path, reason in diff.unsupported:
            context.log.warning(f"{path}: not ingested: {reason}")
        pending = diff.new + diff.changed
        if settings.partitioning == "daily" and pending:
            days, new_keys = plan_days(diff, ledger[0] if ledger else _open(ledger, settings))
            runs = [dg.RunRequest(job_name=ingest_sessions.name, run_key=d.run_key, partition_key=d.partition_key,
                                  tags={"ultron/agent_id": d.agent_id, "ultron/files": str(len(d.files))})
                    for d in days]
        else:
            new_keys = [f.partition_key for f in diff.new]
            runs = [dg.RunRequest(job_name=ingest_sessions.name, run_key=f.run_key, partition_key=f.partition_key,
                                  tags={"ultron/agent_id": f.agent_id})
                    for f in pending]
        if len(runs) > settings.sensor_max_runs_per_tick:
            runs = [_batch_run(diff)]
        if runs:
            context.log.info(f"{len(diff.new)} new, {len(diff.changed)} changed, {diff.unchanged} unchanged "
                             f"session files: {len(runs)} runs")
        return dg.SensorResult(
            run_requests=runs,
            dynamic_partitions_requests=[partitions_def.build_add_request(new_keys)] if new_keys else [],
            cursor=diff.cursor(),
        )

    return session_file_sensor


def _open(ledger: list[ArrivalLedger], settings: Settings) -> ArrivalLedger:
    """The arrivals ledger in Ultron's database (the sensor's only database use: one insert
    and one select per tick with new or changed files, none on a quiet tick)."""
    ledger.append(ArrivalLedger.open(settings))
    return ledger[0]


def _batch_run(diff: InboxDiff) -> dg.RunRequest:
    """One ingest_inbox run for a large sweep, keyed by the versions of every file in it."""
    pending = diff.new + diff.changed
    batch = hashlib.sha256("\n".join(sorted(f.run_key for f in pending)).encode()).hexdigest()[:16]
    return dg.RunRequest(job_name=ingest_inbox.name, run_key=f"batch|{batch}", tags={"ultron/files": str(len(pending))})
