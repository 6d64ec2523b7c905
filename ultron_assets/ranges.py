"""Per-session assets over a partition key range.

A UI backfill over N session partitions used to start N runs, each loading torch and
Presidio; with ``BACKFILL_POLICY`` one run takes up to BACKFILL_PARTITIONS_PER_RUN
partitions. The assets still work one session at a time: each partition yields a
``PartitionOutcome`` exactly as a single-partition run reported it, and ``combine``
turns the outcomes of a range into one result: the same result as before for one
partition; for many, counts summed, a table with one row per partition, and one check
result that fails when any partition failed (naming them).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

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


def combine(outcomes: Sequence[PartitionOutcome], summed: Sequence[str],
            extra: dict[str, Any] | None = None) -> dg.MaterializeResult:
    extra = extra or {}
    if len(outcomes) == 1:
        [only] = outcomes
        return dg.MaterializeResult(metadata={**only.metadata, **extra}, check_results=[only.check])
    failed = [o for o in outcomes if not o.check.passed]
    columns = ["partition", *outcomes[0].row] if outcomes else ["partition"]
    types = {"partition": "string", **{k: _COLUMN_TYPES.get(type(v), "string") for k, v in
                                       (outcomes[0].row.items() if outcomes else ())}}
    table = dg.MetadataValue.table(
        [dg.TableRecord({"partition": o.key, **{k: _scalar(o.row.get(k)) for k in columns[1:]}}) for o in outcomes],
        schema=dg.TableSchema(columns=[dg.TableColumn(c, types[c]) for c in columns]),
    )
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


def _scalar(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str)) else ("" if value is None else str(value))
