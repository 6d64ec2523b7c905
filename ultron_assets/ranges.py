"""Per-session assets over a partition key range.

A UI backfill over N session partitions used to start N runs, each loading torch and
Presidio; with ``BACKFILL_POLICY`` one run takes up to BACKFILL_PARTITIONS_PER_RUN
partitions. The assets still work one session at a time: each partition yields a
``PartitionOutcome`` exactly as a single-partition run reported it, and ``combine``
turns the outcomes of a range into one result: the same result as before for one
partition; for many, counts summed, a table with one row per partition, and one check
result that fails when any partition failed (naming them).

Under ``ULTRON_PARTITIONING=daily`` a partition is an agent's arrival day and holds many
files: ``per_partition`` works file by file and ``fold`` turns a day's file outcomes into
the day's outcome the same way (counts summed, a ``file_table`` with one row per file, a
check naming the files that failed), so ``combine`` over a range of days is unchanged.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from ultron.db.arrivals import ArrivalLedger
from ultron_assets.partitions import files_of, mode_of

#: a backfill of 10,000 session partitions makes 100 runs, not 10,000
BACKFILL_PARTITIONS_PER_RUN = 100
BACKFILL_POLICY = dg.BackfillPolicy.multi_run(max_partitions_per_run=BACKFILL_PARTITIONS_PER_RUN)

_COLUMN_TYPES = {bool: "bool", int: "int", float: "float", str: "string"}


@dataclass(frozen=True)
class PartitionOutcome:
    key: str
    metadata: dict[str, Any]        # what a run of this partition alone shows
    check: dg.AssetCheckResult      # the asset check's result for this partition
    row: dict[str, Any]             # this partition's line in a range's table (scalars)


def partition_keys(context: dg.AssetExecutionContext) -> Sequence[str]:
    """The keys of the run's partition or partition range, in partition order."""
    return context.partition_keys


def per_partition(context: dg.AssetExecutionContext, ledger: ArrivalLedger, per_file: Callable[[str], PartitionOutcome],
                  check_name: str, summed: Sequence[str],
                  extra: Callable[[Sequence[PartitionOutcome]], dict[str, Any]] | None = None
                  ) -> list[PartitionOutcome]:
    """One outcome per partition of the run: a session partition is its one file; a day
    partition is the fold of its files' outcomes (``extra`` adds day-level metadata)."""
    partitions_def = context.assets_def.partitions_def
    if mode_of(partitions_def) == "session":
        return [per_file(key) for key in partition_keys(context)]
    outcomes = []
    for key in partition_keys(context):
        files = [per_file(f) for f in files_of(partitions_def, key, ledger)]
        outcomes.append(fold(key, files, check_name, summed, extra(files) if extra and files else None))
        context.log.info(f"{key}: {len(files)} session files")
    return outcomes


def fold(key: str, files: Sequence[PartitionOutcome], check_name: str, summed: Iterable[str],
         extra: dict[str, Any] | None = None) -> PartitionOutcome:
    """A day partition's outcome from its files' outcomes. A day with no recorded file
    fails its check (a warning): its arrivals were lost, so there is nothing to run."""
    summed = list(summed)
    failed = [o for o in files if not o.check.passed]
    row = {"files": len(files), **{k: sum(o.row.get(k) or 0 for o in files) for k in summed}}
    metadata: dict[str, Any] = {**row, "file_table": _table(files, "file"), **(extra or {})}
    severity = (dg.AssetCheckSeverity.ERROR if any(o.check.severity == dg.AssetCheckSeverity.ERROR for o in failed)
                else dg.AssetCheckSeverity.WARN)
    check = dg.AssetCheckResult(
        check_name=check_name, passed=bool(files) and not failed, severity=severity,
        metadata={"files": len(files), "failed_files": dg.MetadataValue.json([o.key for o in failed]),
                  **({} if files else {"problem": "no session file is recorded for this day"})},
    )
    return PartitionOutcome(key, metadata, check, row)


def combine(outcomes: Sequence[PartitionOutcome], summed: Sequence[str],
            extra: dict[str, Any] | None = None) -> dg.MaterializeResult:
    extra = extra or {}
    if len(outcomes) == 1:
        [only] = outcomes
        return dg.MaterializeResult(metadata={**only.metadata, **extra}, check_results=[only.check])
    failed = [o for o in outcomes if not o.check.passed]
    table = _table(outcomes, "partition")
    metadata = {
        "partitions": len(outcomes),
        **{k: sum(o.row.get(k) or 0 for o in outcomes) for k in summed},
        "partition_table": table,
        **extra,
    }
    severity = (dg.AssetCheckSeverity.ERROR if any(o.check.severity == dg.AssetCheckSeverity.ERROR for o in failed)
                else dg.AssetCheckSeverity.WARN)
    check_name = outcomes[0].check.check_name if outcomes else None
    check = dg.AssetCheckResult(
        check_name=check_name, passed=not failed, severity=severity,
        metadata={"partitions": len(outcomes), "failed_partitions": dg.MetadataValue.json([o.key for o in failed])},
    )
    return dg.MaterializeResult(metadata=metadata, check_results=[check])


def _table(outcomes: Sequence[PartitionOutcome], first: str) -> dg.MetadataValue:
    """One row per outcome: its key under ``first``, then its row's scalars."""
    sample = outcomes[0].row if outcomes else {}
    columns = [first, *sample]
    types = {first: "string", **{k: _COLUMN_TYPES.get(type(v), "string") for k, v in sample.items()}}
    return dg.MetadataValue.table(
        [dg.TableRecord({first: o.key, **{k: _scalar(o.row.get(k)) for k in columns[1:]}}) for o in outcomes],
        schema=dg.TableSchema(columns=[dg.TableColumn(c, types[c]) for c in columns]),
    )


def _scalar(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str)) else ("" if value is None else str(value))
