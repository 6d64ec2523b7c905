"""The one place that reads ``ULTRON_*`` environment variables.

Every other module takes a :class:`Settings` instead of touching ``os.environ``,
so tests and the Dagster resources can build one explicitly and nothing picks up
stray state from the process environment halfway through a run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, Mapping, TypeVar

T = TypeVar("T", int, float)

MB = 1024 * 1024


class SettingsError(ValueError):
    """A ``ULTRON_*`` variable holds a value we cannot use."""


def _number(env: Mapping[str, str], name: str, default: T, cast: Callable[[str], T]) -> T:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return cast(raw)
    except ValueError as exc:
        kind = "an integer" if cast is int else "a number"
        raise SettingsError(f"{name}={raw!r} is not {kind}") from exc


@dataclass(frozen=True)
class Settings:
    """Typed view of the environment. Defaults are the documented ones (README)."""

    #: ULTRON_HOME: state directory (embedded database, Dagster home, inbox).
    home: Path = field(default_factory=lambda: Path(".ultron").resolve())
    #: ULTRON_DATABASE_URL: external Postgres with pgvector; None = embedded server.
    database_url: str | None = None
    #: ULTRON_DAGSTER_DATABASE_URL: Dagster's own storage; default = same server.
    dagster_database_url: str | None = None
    #: ULTRON_INBOX: directories the sensor watches (os.pathsep separated).
    inbox: tuple[Path, ...] = ()
    #: ULTRON_DEFAULT_AGENT_ID: agent for files lying directly in an inbox.
    default_agent_id: str = "default"
    #: ULTRON_DECAY_INTERVAL_HOURS: maintenance schedule period.
    decay_interval_hours: float = 6.0
    #: ULTRON_ARCHIVE_MAX_BYTES: larger files are ingested but not archived.
    archive_max_bytes: int = 10 * MB
    #: ULTRON_MAX_LINE_BYTES: longer .jsonl lines are reported and skipped.
    max_line_bytes: int = 8 * MB
    #: ULTRON_MAX_PROBLEMS_PER_FILE: problems kept per file; the rest are counted.
    max_problems_per_file: int = 1000
    #: ULTRON_SENSOR_INTERVAL_SECONDS: how often the inbox sensor ticks.
    sensor_interval_seconds: int = 15
    #: ULTRON_SENSOR_MAX_RUNS_PER_TICK: above this many new/changed files in one tick,
    #: the sensor launches one batch run instead of one run per file.
    sensor_max_runs_per_tick: int = 25
    #: ULTRON_DAGSTER_HOST / ULTRON_DAGSTER_PORT: where `ultron dev` serves the UI.
    dagster_host: str = "127.0.0.1"
    dagster_port: int = 3000

    def __post_init__(self) -> None:
        if not self.inbox:
            object.__setattr__(self, "inbox", (self.home / "inbox",))
        if self.decay_interval_hours <= 0:
            raise SettingsError("ULTRON_DECAY_INTERVAL_HOURS must be positive")
        if self.max_line_bytes < 1024:
            raise SettingsError("ULTRON_MAX_LINE_BYTES must be at least 1024")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> "Settings":
        env = os.environ if env is None else env
        home = Path(env.get("ULTRON_HOME") or ".ultron").expanduser().resolve()
        inbox_raw = env.get("ULTRON_INBOX", "").strip()
        inbox = tuple(
            Path(p).expanduser().resolve() for p in inbox_raw.split(os.pathsep) if p.strip()
        )
        values: dict[str, object] = dict(
            home=home,
            database_url=env.get("ULTRON_DATABASE_URL") or None,
            dagster_database_url=env.get("ULTRON_DAGSTER_DATABASE_URL") or None,
            inbox=inbox,
            default_agent_id=env.get("ULTRON_DEFAULT_AGENT_ID") or "default",
            decay_interval_hours=_number(env, "ULTRON_DECAY_INTERVAL_HOURS", 6.0, float),
            archive_max_bytes=_number(env, "ULTRON_ARCHIVE_MAX_BYTES", 10 * MB, int),
            max_line_bytes=_number(env, "ULTRON_MAX_LINE_BYTES", 8 * MB, int),
            max_problems_per_file=_number(env, "ULTRON_MAX_PROBLEMS_PER_FILE", 1000, int),
            sensor_interval_seconds=_number(env, "ULTRON_SENSOR_INTERVAL_SECONDS", 15, int),
            sensor_max_runs_per_tick=_number(env, "ULTRON_SENSOR_MAX_RUNS_PER_TICK", 25, int),
            dagster_host=env.get("ULTRON_DAGSTER_HOST") or "127.0.0.1",
            dagster_port=_number(env, "ULTRON_DAGSTER_PORT", 3000, int),
        )
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise SettingsError(f"unknown settings: {sorted(unknown)}")
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    @property
    def uses_embedded_database(self) -> bool:
        return self.database_url is None
