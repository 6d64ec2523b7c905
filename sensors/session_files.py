"""Watches ULTRON_INBOX for new or changed .jsonl files and asks for their ingestion."""


import dagster as dg

import hashlib

from jobs.ingest import ingest_inbox, ingest_sessions
from ultron.inbox import diff_inbox
from ultron.settings import Settings
from ultron_assets.partitions import session_partitions


def build_session_file_sensor(settings: Settings | None = None) -> dg.SensorDefinition:
    settings = settings or Settings.from_env()

    @dg.sensor(
        name="session_file_sensor",
        jobs=[ingest_sessions, ingest_inbox],
        minimum_interval_seconds=settings.sensor_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="New or changed .jsonl files under ULTRON_INBOX become raw_sessions partitions and runs. "
        "The agent id is the first directory level under the inbox. Above "
        "ULTRON_SENSOR_MAX_RUNS_PER_TICK files in one tick, one ingest_inbox run takes them all.",
    )
    def session_file_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        diff = diff_inbox(settings.inbox, settings.default_agent_id, context.cursor)
        for path, reason in diff.unsupported:
            context.log.warning(f"{path}: not ingested: {reason}")
        new_keys = [f.partition_key for f in diff.new]
        pending = diff.new + diff.changed
        if len(pending) > settings.sensor_max_runs_per_tick:
            batch = hashlib.sha256("\n".join(sorted(f.run_key for f in pending)).encode()).hexdigest()[:16]
            run_requests = [dg.RunRequest(job_name=ingest_inbox.name, run_key=f"batch|{batch}",
                                          tags={"ultron/files": str(len(pending))})]
        else:
            run_requests = [
                dg.RunRequest(job_name=ingest_sessions.name, run_key=f.run_key, partition_key=f.partition_key,
                              tags={"ultron/agent_id": f.agent_id})
                for f in pending
            ]
        if run_requests:
            context.log.info(f"{len(diff.new)} new, {len(diff.changed)} changed, {diff.unchanged} unchanged session files")
        return dg.SensorResult(
            run_requests=run_requests,
            dynamic_partitions_requests=[session_partitions.build_add_request(new_keys)] if new_keys else [],
            cursor=diff.cursor(),
        )

    return session_file_sensor
