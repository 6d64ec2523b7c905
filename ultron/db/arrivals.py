"""The arrival days of session files (revision 0009), for ULTRON_PARTITIONING=daily.

Which day a file belongs to is decided in ``ultron.sessions.partitioning`` (and why the days
are in the database rather than a file is told there); here a file key is stored with its
agent and day, and the first write wins. Every function takes many keys at once, so a
sensor tick or a batch refresh costs one or two statements however many files it sees.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ultron.sessions.partitioning import (
    day_key,
    day_rows,
    is_day_key,
    ledger_path,
    parse_day_key,
    parse_ledger_file,
)

if TYPE_CHECKING:
    from ultron.settings import Settings

_IMPORTED: set[tuple[str, Path]] = set()
_IMPORT_LOCK = threading.Lock()


def record_arrivals(conn: sa.Connection, arrivals: Iterable[tuple[str, str, str]]) -> int:
    """Store ``(file key, agent id, YYYY-MM-DD)`` rows; a file key already stored keeps its
    day (two writers racing on a new file agree on the first). Returns the rows added."""
    rows = list(arrivals)
    if not rows:
        return 0
    keys, agents, days = (list(col) for col in zip(*rows))
    result = conn.execute(sa.text(
        "INSERT INTO session_arrivals (file_key, agent_id, day) "
        "SELECT * FROM unnest(CAST(:keys AS text[]), CAST(:agents AS text[]), CAST(:days AS date[])) "
        "ON CONFLICT (file_key) DO NOTHING"), {"keys": keys, "agents": agents, "days": days})
    return result.rowcount


def arrival_days(conn: sa.Connection, file_keys: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``file key -> (agent id, YYYY-MM-DD)`` for the keys that are stored."""
    if not file_keys:
        return {}
    rows = conn.execute(sa.text(
        "SELECT file_key, agent_id, day FROM session_arrivals WHERE file_key = ANY(CAST(:keys AS text[]))"),
        {"keys": list(file_keys)})
    return {r.file_key: (r.agent_id, _iso(r.day)) for r in rows}


def files_arrived(conn: sa.Connection, agent_id: str, day: str) -> list[str]:
    """The file keys of one agent's day, in code-point order (Python's, whatever the collation)."""
    return list(conn.execute(sa.text(
        'SELECT file_key FROM session_arrivals WHERE agent_id = :agent AND day = CAST(:day AS date) '
        'ORDER BY file_key COLLATE "C"'), {"agent": agent_id, "day": day}).scalars())


def files_arrived_on(conn: sa.Connection, days: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[str]]:
    """The file keys of many ``(agent id, YYYY-MM-DD)`` days at once, each in code-point order."""
    if not days:
        return {}
    agents, dates = (list(col) for col in zip(*days))
    rows = conn.execute(sa.text(
        "SELECT a.agent_id, a.day, a.file_key FROM session_arrivals a JOIN unnest(CAST(:agents AS text[]), "
        "CAST(:days AS date[])) AS d(agent_id, day) ON a.agent_id = d.agent_id AND a.day = d.day "
        'ORDER BY a.file_key COLLATE "C"'), {"agents": agents, "days": dates})
    found: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        found.setdefault((r.agent_id, _iso(r.day)), []).append(r.file_key)
    return found


def arrival_day_list(conn: sa.Connection) -> list[tuple[str, str]]:
    """Every ``(agent id, YYYY-MM-DD)`` that received a file."""
    rows = conn.execute(sa.text("SELECT DISTINCT agent_id, day FROM session_arrivals"))
    return [(r.agent_id, _iso(r.day)) for r in rows]


def delete_arrivals(conn: sa.Connection, file_keys: Sequence[str]) -> int:
    """Forget the arrival of these files (forgotten everywhere); returns the rows deleted."""
    if not file_keys:
        return 0
    return conn.execute(sa.text("DELETE FROM session_arrivals WHERE file_key = ANY(CAST(:keys AS text[]))"),
                        {"keys": list(file_keys)}).rowcount


def _iso(day: date | str) -> str:
    return day.isoformat() if isinstance(day, date) else str(day)


class ArrivalLedger:
    """The durable file key → day key map of daily partitioning, in ``session_arrivals``.

    Holds no state of its own: every process on the same database (the daemon's sensor, run
    workers, Celery workers on other machines) sees the same days. ``assign`` is one select
    plus, when some files are new, one insert for any number of files (a third statement
    only when another writer raced it); the other methods one statement.
    """

    def __init__(self, engine: sa.Engine, home: Path | None = None) -> None:
        self.engine = engine
        if home is not None:
            import_file_ledger(engine, ledger_path(home))

    @classmethod
    def open(cls, settings: Settings) -> ArrivalLedger:
        """The ledger of ``settings``' database (opened, and migrated, if need be)."""
        from ultron.db.database import Database

        return cls(Database.open(settings).engine, settings.home)

    def day_of(self, file_key: str) -> str | None:
        return self.days_of([file_key]).get(file_key)

    def days_of(self, file_keys: Iterable[str]) -> dict[str, str]:
        """Day keys of the recorded files among ``file_keys``."""
        with self.engine.connect() as conn:
            found = arrival_days(conn, list(dict.fromkeys(file_keys)))
        return {k: day_key(agent, day) for k, (agent, day) in found.items()}

    def files_in(self, key: str) -> list[str]:
        """The file keys of a day partition, in key order: the same list on every re-run."""
        if not is_day_key(key):
            return []
        with self.engine.connect() as conn:
            return files_arrived(conn, *parse_day_key(key))

    def files_by_day(self, keys: Iterable[str]) -> dict[str, list[str]]:
        """``day key -> file keys`` for many day partitions in one query (a day with no file: [])."""
        keys = list(dict.fromkeys(keys))
        days = {k: parse_day_key(k) for k in keys if is_day_key(k)}
        with self.engine.connect() as conn:
            found = files_arrived_on(conn, list(days.values()))
        return {k: found.get(days[k], []) if k in days else [] for k in keys}

    def days(self) -> list[str]:
        with self.engine.connect() as conn:
            return sorted(day_key(agent, day) for agent, day in arrival_day_list(conn))

    def assign(self, files: Iterable[tuple[str, str, int]]) -> dict[str, str]:
        """Day keys for ``(file key, agent id, mtime_ns)``: the recorded day of a known file,
        else the mtime's UTC day, recorded now (when two writers race, the first one's)."""
        fresh = day_rows(files)
        if not fresh:
            return {}
        with self.engine.begin() as conn:
            found = arrival_days(conn, list(fresh))  # a re-sweep of known files stops here
            new = [row for k, row in fresh.items() if k not in found]
            if record_arrivals(conn, new) < len(new):  # a racing writer recorded some first:
                found.update(arrival_days(conn, [k for k, _, _ in new]))  # a new statement sees its days
        return {k: day_key(*found.get(k, (a, d))) for k, a, d in fresh.values()}

    def forget(self, file_keys: Iterable[str]) -> int:
        """Drop the arrivals of files forgotten everywhere; returns how many were recorded."""
        with self.engine.begin() as conn:
            return delete_arrivals(conn, list(dict.fromkeys(file_keys)))


def import_file_ledger(engine: sa.Engine, path: Path) -> int:
    """Copy an earlier version's ledger file into the table, once per process and file;
    returns the arrivals it added.

    The first line of a file won in the file and the first row wins in the table, so the
    import never moves a file to another day, and two processes importing at once add each
    arrival once. The file is then renamed ``arrivals.tsv.imported`` (kept, never read again)."""
    path = Path(path)
    marker = (str(engine.url), path)
    with _IMPORT_LOCK:
        if marker in _IMPORTED:
            return 0
        try:
            rows = parse_ledger_file(path.read_bytes().decode("utf-8", "replace"))
        except FileNotFoundError:
            _IMPORTED.add(marker)
            return 0
        with engine.begin() as conn:
            added = record_arrivals(conn, rows.values())
        try:
            os.replace(path, path.with_name(path.name + ".imported"))
        except FileNotFoundError:  # another process imported and renamed it meanwhile
            pass
        _IMPORTED.add(marker)
        return added
