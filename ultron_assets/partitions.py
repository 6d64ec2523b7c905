"""The session partitions, chosen when the definitions load from ULTRON_PARTITIONING.

``session``: ``session_files``, one partition per file (``agent:relative/path.jsonl``).
``daily``: ``session_days``, one per agent and arrival day (``agent:YYYY-MM-DD``); which
files a day holds, and why it is a dynamic key, is in ``ultron.sessions.partitioning``.
The two definitions have different names, so switching modes never mixes their keys.
"""

from collections.abc import Iterable
from typing import Any

import dagster as dg

from ultron.db.arrivals import ArrivalLedger
from ultron.sessions.partitioning import files_in_partition, partitions_of
from ultron.settings import Settings

SESSION_FILES = dg.DynamicPartitionsDefinition(name="session_files")
SESSION_DAYS = dg.DynamicPartitionsDefinition(name="session_days")
_BY_MODE = {"session": SESSION_FILES, "daily": SESSION_DAYS}


def partitions_for(mode: str) -> dg.DynamicPartitionsDefinition:
    return _BY_MODE[mode]


def mode_of(partitions_def: dg.PartitionsDefinition | None) -> str:
    return "daily" if partitions_def is not None and partitions_def.name == SESSION_DAYS.name else "session"


#: the per-session assets' partitions in this code location
PARTITIONING = Settings.from_env().partitioning
session_partitions = partitions_for(PARTITIONING)


def arrivals_of(holder: Any) -> ArrivalLedger:
    """The arrivals ledger in the database of a client or service (anything with ``db`` and
    ``settings``): the same table whichever process or machine the run is on."""
    return ArrivalLedger(holder.db.engine, holder.settings.home)


def files_of(partitions_def: dg.PartitionsDefinition | None, key: str, ledger: ArrivalLedger) -> list[str]:
    """The session-file keys an asset partition covers (the key itself, or its day's files)."""
    return files_in_partition(mode_of(partitions_def), key, ledger)


def partitions_for_files(files: Iterable[tuple[str, int | None]], holder: Any) -> dict[str, str]:
    """The partition holding each ``(file key, mtime_ns)`` under ``holder.settings.partitioning``
    (jobs that are not partitioned read the mode from their run's settings, the same
    environment the definitions loaded from); one query for all the files."""
    mode = holder.settings.partitioning
    return partitions_of(mode, files, arrivals_of(holder) if mode == "daily" else None)
