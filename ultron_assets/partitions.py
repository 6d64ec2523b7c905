"""The session partitions, chosen when the definitions load from ULTRON_PARTITIONING.

``session``: ``session_files``, one partition per file (``agent:relative/path.jsonl``).
``daily``: ``session_days``, one per agent and arrival day (``agent:YYYY-MM-DD``); which
files a day holds, and why it is a dynamic key, is in ``ultron.sessions.partitioning``.
The two definitions have different names, so switching modes never mixes their keys.
"""

from pathlib import Path

import dagster as dg

from ultron.sessions.partitioning import files_in_partition, partition_of
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


def files_of(partitions_def: dg.PartitionsDefinition | None, key: str, home: Path) -> list[str]:
    """The session-file keys an asset partition covers (the key itself, or its day's files)."""
    return files_in_partition(mode_of(partitions_def), key, home)


def partition_for_file(file_key: str, settings: Settings, mtime_ns: int | None = None) -> str | None:
    """The partition holding a session file under ``settings.partitioning`` (jobs that are not
    partitioned read the mode from their run's settings, the same environment the
    definitions loaded from)."""
    return partition_of(settings.partitioning, file_key, settings.home, mtime_ns=mtime_ns)
