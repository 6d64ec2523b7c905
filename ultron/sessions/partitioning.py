"""Which session files a partition holds, in either partitioning mode.

``ULTRON_PARTITIONING=session`` (default): one partition per file, keyed
``agent:relative/path.jsonl`` (:func:`ultron.sessions.discovery.partition_key`, the *file
key*). Dagster advises staying under ~100k partitions per asset, which a busy inbox passes.

``ULTRON_PARTITIONING=daily``: one partition per agent and *arrival day*, keyed
``agent:YYYY-MM-DD`` (the *day key*). Design choices:

- **A dynamic partition key ``agent:YYYY-MM-DD``, not a MultiPartitionsDefinition(dynamic
  agent × DailyPartitionsDefinition).** A daily dimension has every calendar day since its
  start date for every agent, so the UI and "backfill all" would show and run
  agents × days partitions, most of them empty; a file older than the start date or with a
  clock-skewed future mtime would have no valid key at all. A dynamic key exists only for a
  day that received files (agents × active days stays small: 10 agents over ten years is
  36,500), keeps the ``agent:`` prefix every key already has, and can never collide with a
  file key (those end in ``.jsonl``).
- **Arrival day = the UTC day of the file's mtime when Ultron first saw it, recorded
  durably** in the ``session_arrivals`` table (``ultron.db.arrivals``: one row per file key,
  the first arrival recorded for a file wins). The mtime rather than the sensor's clock, so
  a first sweep over a full inbox spreads its files over the days they were written instead
  of piling everything into today; recorded, because a session that is still being
  appended to gets a new mtime every time and must not hop to a new day. Re-running or
  backfilling a past day therefore always finds exactly the files recorded for it, and a
  changed file re-runs the day it arrived on.
- **In the database, not in a file under ULTRON_HOME.** The sensor (in the daemon) and the
  runs (Dagster run workers, Celery workers, maybe on other machines) must all agree on
  a file's day; a table needs no shared filesystem with a working ``flock``, lets two
  writers racing on a new file agree through ``ON CONFLICT DO NOTHING``, and is in every
  database backup. A ledger file ``$ULTRON_HOME/partitions/arrivals.tsv`` written by an
  earlier version is imported once (idempotent) and renamed ``arrivals.tsv.imported``.
  The arrivals of a file forgotten and gone from disk are deleted with its day partition's
  pruning (``jobs.forget``): a file forgotten and deleted leaves no path in the table.

The database keeps file keys in ``trajectory_records.partition_key`` in both modes (forget
and the per-file services work unchanged): a day partition is processed file by file and
reported as one partition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

MODES = ("session", "daily")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def arrival_day(mtime_ns: int) -> str:
    """The UTC calendar day of a modification time, as YYYY-MM-DD."""
    return datetime.fromtimestamp(mtime_ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d")


def day_key(agent_id: str, day: str) -> str:
    return f"{agent_id}:{day}"


def is_day_key(key: str) -> bool:
    agent_id, sep, day = key.partition(":")
    return bool(sep and agent_id and _DAY.match(day))


def parse_day_key(key: str) -> tuple[str, str]:
    """(agent_id, YYYY-MM-DD) of a day key."""
    if not is_day_key(key):
        raise ValueError(f"not an Ultron day partition key (agent:YYYY-MM-DD): {key!r}")
    agent_id, _, day = key.partition(":")
    return agent_id, day


class Arrivals(Protocol):
    """The durable file key → day key map of daily partitioning: ``ultron.db.arrivals.ArrivalLedger``
    keeps it in Postgres (this stage sits below the database layer, so only the shape is here)."""

    def days_of(self, file_keys: Iterable[str]) -> dict[str, str]:
        """Day keys of the recorded files among ``file_keys``."""

    def files_in(self, key: str) -> list[str]:
        """The file keys of a day partition, in key order."""

    def assign(self, files: Iterable[tuple[str, str, int]]) -> dict[str, str]:
        """Day keys for ``(file key, agent id, mtime_ns)``, recording those of new files."""


def day_rows(files: Iterable[tuple[str, str, int]]) -> dict[str, tuple[str, str, str]]:
    """``file key -> (file key, agent id, YYYY-MM-DD)`` of the mtime's day, the first of a repeated key."""
    rows: dict[str, tuple[str, str, str]] = {}
    for key, agent, mtime in files:
        rows.setdefault(key, (key, agent, arrival_day(mtime)))
    return rows


def parse_ledger_file(text: str) -> dict[str, tuple[str, str, str]]:
    """The arrivals in an earlier version's ledger file (``file key<TAB>day key`` lines, the
    first line of a file won; a last line without its newline was still being written)."""
    rows: dict[str, tuple[str, str, str]] = {}
    for line in text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]:
        file_key, sep, day = line.partition("\t")
        if sep and file_key and file_key not in rows and is_day_key(day):
            rows[file_key] = (file_key, *parse_day_key(day))
    return rows


def ledger_path(home: Path) -> Path:
    """Where an earlier version kept the arrivals (imported once: ``ultron.db.arrivals``)."""
    return Path(home) / "partitions" / "arrivals.tsv"


def files_in_partition(mode: str, key: str, ledger: Arrivals | None) -> list[str]:
    """The file keys a partition holds: itself under ``session``, the ledger's day under ``daily``."""
    if mode == "session":
        return [key]
    assert ledger is not None, "daily partitioning needs the arrivals ledger"
    return ledger.files_in(key)


def partitions_of(mode: str, files: Iterable[tuple[str, int | None]],
                  ledger: Arrivals | None) -> dict[str, str]:
    """The partition holding each ``(file key, mtime_ns)``: its own key, or its recorded day
    (recorded now from the mtime when the file is new to the ledger; left out when that is
    unknown). Two statements for any number of files."""
    files = list(files)
    if mode == "session":
        return {k: k for k, _ in files}
    assert ledger is not None, "daily partitioning needs the arrivals ledger"
    known = ledger.days_of(k for k, _ in files)
    new = [(k, k.partition(":")[0], m) for k, m in files if k not in known and m is not None]
    return {**known, **ledger.assign(new)}

