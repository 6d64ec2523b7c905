"""The Dagster side of forget: the partitions of forgotten sessions go too.

``Ultron.forget`` (the domain library never imports Dagster) returns the partition keys of
the sessions it deleted in its report's ``partitions``. ``forget_job`` (launched from the
UI with what to forget) removes them at once; a forget run from the CLI or the HTTP API is
caught up by :func:`prune_stale_partitions`, which the maintenance job's refresh step runs:
a partition whose session the store no longer holds and whose file is gone is stale. Under
ULTRON_PARTITIONING=daily a day partition is stale once every file of that day is."""

from typing import Any, Mapping, Optional

import dagster as dg

from resources.database import UltronResource
from resources.llm import LLMResource
from ultron.sdk import Ultron
from ultron.sessions.discovery import parse_partition_key
from ultron_assets.partitions import arrivals_of, partitions_for


def remove_forgotten_partitions(instance: dg.DagsterInstance, report: Mapping[str, Any],
                                client: Ultron | None = None) -> list[str]:
    """Delete the session partitions named in a forget report; returns those deleted (a key
    Dagster never knew is skipped). Under daily partitioning (``client`` given) the days of
    the forgotten files go once none of their files is left."""
    if client is not None and client.settings.partitioning == "daily":
        days = set(arrivals_of(client).days_of(report.get("partitions") or []).values())
        return _delete_stale_days(instance, client, sorted(days))
    removed = []
    name = partitions_for("session").name
    for key in report.get("partitions") or []:
        if instance.has_dynamic_partition(name, key):
            instance.delete_dynamic_partition(name, key)
            removed.append(key)
    return removed


def prune_stale_partitions(instance: dg.DagsterInstance, client: Ultron) -> list[str]:
    """Delete partitions with no session row and no file: forgotten outside Dagster. A
    partition whose file still exists is only waiting for its ingestion run and stays."""
    name = partitions_for(client.settings.partitioning).name
    if client.settings.partitioning == "daily":
        return _delete_stale_days(instance, client, instance.get_dynamic_partitions(name))
    stored = client.stored_partition_keys()
    removed = []
    for key in instance.get_dynamic_partitions(name):
        if key in stored:
            continue
        try:
            _agent, path = parse_partition_key(key, client.settings.inbox)
        except ValueError:
            continue
        if not path.exists():
            instance.delete_dynamic_partition(name, key)
            removed.append(key)
    return removed


def _delete_stale_days(instance: dg.DagsterInstance, client: Ultron, days: list[str]) -> list[str]:
    """Delete the day partitions none of whose files is stored or still on disk, and the
    recorded arrivals of those gone files (a file forgotten and deleted is forgotten in
    ``session_arrivals`` too; one that comes back later arrives anew)."""
    stored = client.stored_partition_keys()
    ledger = arrivals_of(client)
    name = partitions_for("daily").name
    removed, gone = [], []
    for day, files in ledger.files_by_day(days).items():
        kept = [f for f in files if f in stored or _exists(f, client)]
        gone += [f for f in files if f not in kept]
        if kept or not instance.has_dynamic_partition(name, day):
            continue
        instance.delete_dynamic_partition(name, day)
        removed.append(day)
    ledger.forget(gone)
    return removed


def _exists(file_key: str, client: Ultron) -> bool:
    try:
        return parse_partition_key(file_key, client.settings.inbox)[1].exists()
    except ValueError:
        return False


class ForgetConfig(dg.Config):
    """What to forget (at least one); the same choices as ``ultron forget``."""

    session_file: Optional[str] = None
    agent_id: Optional[str] = None
    segment_id: Optional[str] = None
    memory_ids: list[str] = []
    vacuum: bool = False
    #: as ``ultron forget``: also rewrite the server's files (tables, statistics, WAL) without it
    purge: bool = True


@dg.op(description="Forget a session file, an agent, a segment or memories everywhere (rows, clusters, "
                   "skills and their files, SFT exports), then remove the forgotten sessions' partitions.")
def forget_everywhere(context: dg.OpExecutionContext, config: ForgetConfig, ultron: UltronResource,
                      llm: LLMResource) -> None:
    client = ultron.client(llm)
    report = client.forget(config.memory_ids or None, config.segment_id, config.session_file, config.agent_id,
                           vacuum=config.vacuum, purge=config.purge)
    removed = remove_forgotten_partitions(context.instance, report, client)
    context.log.info(f"forget: {report.get('tables')}; files {report.get('files')}; "
                     f"{len(removed)} partitions removed")
    if report.get("kept_on_disk"):
        context.log.warning(f"files outside ULTRON_HOME were left in place: {report['kept_on_disk']}")


@dg.job(description="Forget everywhere, from the UI: launch with config "
                    "ops: {forget_everywhere: {config: {session_file: /abs/path.jsonl}}} (or agent_id, ...).")
def forget_job() -> None:
    forget_everywhere()
