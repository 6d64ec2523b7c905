"""Ultron on a server it did not start: the password-and-TCP-only test server itself, and a
server that lacks pgvector, which must fail with the message that names the fix (docs/scale.md,
"Database") rather than a traceback from inside a migration.

Each test starts its own server (about a second), so they run the same in both test modes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from ultron.db import embedded_clients
from ultron.db.database import Database, DatabaseError
from ultron.settings import Settings
from ultron.testing import postgres_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def base_dir():
    """A directory outside pytest's tmp_path: as root the server runs as the embedded_postgres
    user, and a second pytest session resets /tmp/pytest-of-root to 0700 under it."""
    base = Path(tempfile.mkdtemp(prefix="ultron-extpg-"))
    yield base / "server"
    postgres_server.stop(base / "server")
    shutil.rmtree(base, ignore_errors=True)


def without_pgvector(root: Path) -> Path:
    """A share directory holding every extension the wheel ships except pgvector: what a
    PostgreSQL installed without the pgvector package looks like to the server."""
    source = postgres_server._commands().POSTGRES_BIN_PATH.parent / "share" / "extension"
    target = root / "share" / "extension"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("vector.control", "vector--*"))
    for path in (root, root / "share", target):
        path.chmod(0o755)
    assert (source / "vector.control").exists() and not (target / "vector.control").exists()
    return root / "share"


def ultron_cli(url: str, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ULTRON_HOME": str(home), "ULTRON_DATABASE_URL": url}
    env.pop("ULTRON_DAGSTER_DATABASE_URL", None)
    return subprocess.run([sys.executable, "-m", "ultron.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=False)


def test_the_test_server_takes_a_password_over_tcp_and_nothing_else(base_dir):
    info = postgres_server.start(base_dir)
    url = info.url()
    assert url.startswith(f"postgresql+psycopg://{info.user}:") and f"@127.0.0.1:{info.port}/ultron" in url
    with psycopg.connect(info.libpq) as conn:
        assert conn.execute("SHOW unix_socket_directories").fetchone() == ("",)
        assert conn.execute("SHOW password_encryption").fetchone() == ("scram-sha-256",)
        names = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        assert {"ultron", "dagster"} <= names
        rules = conn.execute("SELECT type, auth_method FROM pg_hba_file_rules WHERE error IS NULL").fetchall()
    assert rules == [("host", "scram-sha-256")]
    assert not list((base_dir / "pgdata").glob(".s.PGSQL.*")) and not list(Path("/tmp").glob(f".s.PGSQL.{info.port}"))
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(info.libpq.replace(f":{info.password}@", ":wrong@"))
    # The URL it prints is all a user needs: Ultron migrates the empty database and works.
    assert postgres_server.load(base_dir) == info
    db = Database.open(Settings.from_env(database_url=url, dagster_database_url=None))
    try:
        assert db.revision and db.urls.dagster.endswith(f"@127.0.0.1:{info.port}/ultron")
        with db.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT extname FROM pg_extension WHERE extname = 'vector'")).scalar()
    finally:
        db.dispose()
    pid = postgres_server.postmaster_pid(base_dir)
    assert pid is not None
    assert postgres_server.stop(base_dir) is True
    assert not embedded_clients.is_alive(pid) and not base_dir.exists()  # (a zombie until its parent reaps it)
    assert postgres_server.stop(base_dir) is False  # stopping twice is harmless


def test_a_server_without_pgvector_fails_with_the_message_that_names_the_fix(base_dir, tmp_path):
    info = postgres_server.start(base_dir, extension_control_path=without_pgvector(base_dir.parent / "ext"))
    with psycopg.connect(info.libpq) as conn:  # the server really lacks it
        assert conn.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_trgm'").fetchone() == (1,)

    with pytest.raises(DatabaseError) as err:
        Database.open(Settings.from_env(database_url=info.url(), dagster_database_url=None))
    message = str(err.value)
    assert f"127.0.0.1:{info.port}/ultron" in message and "'vector' extension" in message
    assert "Install pgvector" in message and "unset ULTRON_DATABASE_URL" in message
    assert info.password not in message

    out = ultron_cli(info.url(), tmp_path / "home", "status")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("ultron: error: The PostgreSQL server at") and "Install pgvector" in out.stderr
    assert "Traceback" not in out.stderr and "alembic" not in out.stderr.lower() and info.password not in out.stderr
    with psycopg.connect(info.url("ultron", driver="")) as conn:  # nothing was half-migrated
        assert conn.execute("SELECT to_regclass('ultron_alembic_version')").fetchone() == (None,)


def test_a_role_that_may_not_create_pgvector_is_told_who_must(base_dir):
    """A managed server's usual shape: pgvector installed, an application role that owns its
    database but is no superuser, and pgvector (not a trusted extension) not yet created."""
    info = postgres_server.start(base_dir)
    with psycopg.connect(info.libpq, autocommit=True) as conn:
        conn.execute("CREATE ROLE app LOGIN PASSWORD 'app-secret'")
        conn.execute("CREATE DATABASE appdb OWNER app")
    app_url = f"postgresql+psycopg://app:app-secret@127.0.0.1:{info.port}/appdb"

    with pytest.raises(DatabaseError) as err:
        Database.open(Settings.from_env(database_url=app_url, dagster_database_url=None))
    message = str(err.value)
    assert "role 'app' may not create it" in message and "CREATE EXTENSION vector; in database 'appdb'" in message
    assert "app-secret" not in message

    with psycopg.connect(info.url("appdb", driver=""), autocommit=True) as conn:  # what the message asks for
        conn.execute("CREATE EXTENSION vector")
    db = Database.open(Settings.from_env(database_url=app_url, dagster_database_url=None))
    try:
        with db.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT tableowner FROM pg_tables WHERE tablename = 'memory_records'")).scalar() == "app"
    finally:
        db.dispose()
