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
  durably** in an append-only ledger (``$ULTRON_HOME/partitions/arrivals.tsv``, one
  ``file key<TAB>day key`` line per file, the first line for a file wins). The mtime rather
  than the sensor's clock, so a first sweep over a full inbox spreads its files over the
  days they were written instead of piling everything into today; recorded, because a
  session that is still being appended to gets a new mtime every time and must not hop to
  a new day. Re-running or backfilling a past day therefore always finds exactly the files
  the ledger holds for it, and a changed file re-runs the day it arrived on.

The database keeps file keys in ``trajectory_records.partition_key`` in both modes (no
migration; forget and the per-file services work unchanged): a day partition is processed
file by file and reported as one partition.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

MODES = ("session", "daily")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_LEDGERS: dict[Path, "ArrivalLedger"] = {}
_LEDGERS_LOCK = threading.Lock()


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


def ledger_path(home: Path) -> Path:
    return Path(home) / "partitions" / "arrivals.tsv"


class ArrivalLedger:
    """The durable file key → day key map of daily partitioning.

    Append-only, so readers never see a half-rewritten file and a reader can follow it
    incrementally (it remembers how far it read); writers append under an exclusive
    ``flock``, so the sensor and a batch run may both record arrivals. A file recorded
    twice (two writers racing on a new file) keeps its first line.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._offset = 0
        self._day_of: dict[str, str] = {}
        self._files_of: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    @classmethod
    def at(cls, home: Path) -> "ArrivalLedger":
        """The ledger of a state directory, shared within the process (its index is kept)."""
        path = ledger_path(home)
        with _LEDGERS_LOCK:
            return _LEDGERS.setdefault(path, cls(path))

    def refresh(self) -> None:
        with self._lock:
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size < self._offset:  # replaced or truncated: read it again from the start
                self._offset, self._day_of, self._files_of = 0, {}, {}
            if size == self._offset:
                return
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read(size - self._offset)
            end = data.rfind(b"\n") + 1  # a line still being written is read next time
            for line in data[:end].decode("utf-8", "replace").splitlines():
                self._index(line)
            self._offset += end

    def _index(self, line: str) -> None:
        file_key, sep, day = line.partition("\t")
        if not sep or not file_key or file_key in self._day_of or not is_day_key(day):
            return
        self._day_of[file_key] = day
        self._files_of.setdefault(day, []).append(file_key)

    def day_of(self, file_key: str) -> str | None:
        self.refresh()
        return self._day_of.get(file_key)

    def files_in(self, key: str) -> list[str]:
        """The file keys of a day partition, in key order: the same list on every re-run."""
        self.refresh()
        return sorted(self._files_of.get(key, ()))

    def days(self) -> list[str]:
        self.refresh()
        return sorted(self._files_of)

    def assign(self, files: Iterable[tuple[str, str, int]]) -> dict[str, str]:
        """Day keys for ``(file key, agent id, mtime_ns)``: the recorded day of a known file,
        else the mtime's UTC day, recorded now."""
        files = list(files)
        self.refresh()
        result = {k: self._day_of[k] for k, _, _ in files if k in self._day_of}
        fresh = {k: day_key(agent, arrival_day(mtime)) for k, agent, mtime in files if k not in result}
        if not fresh:
            return result
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                self.refresh()  # another writer may have recorded some of them meanwhile
                todo = {k: d for k, d in fresh.items() if k not in self._day_of}
                if todo:
                    fh.write("".join(f"{k}\t{d}\n" for k, d in todo.items()).encode())
                    fh.flush()
                    os.fsync(fh.fileno())
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
        self.refresh()
        result.update({k: self._day_of.get(k, fresh[k]) for k in fresh})
        return result


def files_in_partition(mode: str, key: str, home: Path) -> list[str]:
    """The file keys a partition holds: itself under ``session``, the ledger's day under ``daily``."""
    if mode == "session":
        return [key]
    return ArrivalLedger.at(home).files_in(key)


def partition_of(mode: str, file_key: str, home: Path, agent_id: str | None = None,
                 mtime_ns: int | None = None) -> str | None:
    """The partition holding a file: its own key, or its recorded day (recorded now from
    ``mtime_ns`` when the file is new to the ledger; None when that is unknown)."""
    if mode == "session":
        return file_key
    ledger = ArrivalLedger.at(home)
    known = ledger.day_of(file_key)
    if known is not None or mtime_ns is None:
        return known
    agent_id = agent_id or file_key.partition(":")[0]
    return ledger.assign([(file_key, agent_id, mtime_ns)])[file_key]
