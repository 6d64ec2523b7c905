"""Shared fixtures. Every test that needs a database uses a real PostgreSQL 18 + pgvector
server: by default the embedded one, started once per session in a temporary ULTRON_HOME;
in external mode the server named by ULTRON_TEST_DATABASE_URL (and, for Dagster's storage,
ULTRON_TEST_DAGSTER_DATABASE_URL), which must let its user create databases. External mode
never starts the embedded server, and the tests about the embedded server itself skip.

    python -m ultron.testing.postgres_server start /tmp/pg      # or any server of your own
    ULTRON_TEST_DATABASE_URL=$(python -m ultron.testing.postgres_server url /tmp/pg ultron) \
    ULTRON_TEST_DAGSTER_DATABASE_URL=$(python -m ultron.testing.postgres_server url /tmp/pg dagster) \
        python -m pytest tests/storage tests/e2e
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable

import pytest

EXTERNAL_URL = os.environ.get("ULTRON_TEST_DATABASE_URL") or None
EXTERNAL_DAGSTER_URL = os.environ.get("ULTRON_TEST_DAGSTER_DATABASE_URL") or None
if EXTERNAL_DAGSTER_URL and not EXTERNAL_URL:
    raise pytest.UsageError("ULTRON_TEST_DAGSTER_DATABASE_URL needs ULTRON_TEST_DATABASE_URL")
#: True when the suite runs against the external server given by ULTRON_TEST_DATABASE_URL.
EXTERNAL = EXTERNAL_URL is not None
# The tests own their environment: no developer's ULTRON_* settings leak in.
#: Not settings, but where a test run writes things for people (the browser test's screenshots).
KEEP_ENV = ("ULTRON_SCREENSHOTS",)
for _key in list(os.environ):
    if (_key.startswith("ULTRON_") and _key not in KEEP_ENV) or _key in ("DAGSTER_HOME", "DASHSCOPE_API_KEY"):
        del os.environ[_key]
TEST_HOME = Path(tempfile.mkdtemp(prefix="ultron-test-"))
os.environ["ULTRON_HOME"] = str(TEST_HOME)
if EXTERNAL_URL:
    os.environ["ULTRON_DATABASE_URL"] = EXTERNAL_URL
if EXTERNAL_DAGSTER_URL:
    os.environ["ULTRON_DAGSTER_DATABASE_URL"] = EXTERNAL_DAGSTER_URL
# Fast, deterministic vectors for the suite; tests of the real model build it explicitly.
os.environ["ULTRON_EMBEDDING_PROVIDER"] = "hash"

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

#: For tests about the embedded server itself (its lifecycle, `ultron db start/stop/status`).
embedded_only = pytest.mark.skipif(
    EXTERNAL, reason="about the embedded server itself; this run uses the external server in ULTRON_TEST_DATABASE_URL")


def database_env() -> dict[str, str]:
    """This run's database variables, for subprocesses started with an environment of their
    own: empty on the embedded server (a home finds its server), the URLs in external mode."""
    return {k: os.environ[k] for k in ("ULTRON_DATABASE_URL", "ULTRON_DAGSTER_DATABASE_URL") if k in os.environ}


def write_jsonl(path: Path, rows: Iterable[Any]) -> Path:
    """Write rows as JSON lines; bytes rows are written raw (for bad-input cases)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for row in rows:
            fh.write(row if isinstance(row, bytes) else json.dumps(row).encode() + b"\n")
    return path


@pytest.fixture(scope="session")
def settings():
    from ultron.settings import Settings

    return Settings.from_env()


@pytest.fixture(scope="session")
def db(settings):
    from ultron.db import embedded
    from ultron.db.database import Database

    database = Database.open(settings)
    yield database
    database.dispose()
    if not EXTERNAL:
        embedded.stop_server(settings.pgdata)
    shutil.rmtree(TEST_HOME, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _external_mode_starts_no_embedded_server(tmp_path_factory):
    """In external mode, fail the run if anything initialised an embedded server after all
    (a test or subprocess that lost the URL would silently test the default setup instead)."""
    yield
    if not EXTERNAL:
        return
    roots = [TEST_HOME, tmp_path_factory.getbasetemp()]
    found = [str(p.parent) for root in roots if root.exists() for p in root.rglob("PG_VERSION")
             if p.parent.name == "pgdata"]
    assert not found, f"external mode, yet an embedded server was initialised in {found}"


@pytest.fixture
def fresh_store_env(db):
    """Variables that give a subprocess with a new ULTRON_HOME an empty store, as a user's
    first start gets: on the embedded server a new home does that by itself; in external
    mode two new databases (Ultron's and Dagster's) are created for the test and dropped after."""
    if not EXTERNAL:
        yield {}
        return
    import uuid

    import sqlalchemy as sa

    suffix = uuid.uuid4().hex[:8]
    names = {"ULTRON_DATABASE_URL": f"ultron_fresh_{suffix}", "ULTRON_DAGSTER_DATABASE_URL": f"dagster_fresh_{suffix}"}
    admin = sa.create_engine(sa.make_url(db.urls.ultron), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        for name in names.values():
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    yield {key: sa.make_url(EXTERNAL_URL).set(database=name).render_as_string(hide_password=False)
           for key, name in names.items()}
    with admin.connect() as conn:
        for name in names.values():
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def client(db, settings):
    """An Ultron SDK client on an emptied database."""
    import sqlalchemy as sa

    from ultron.sdk import Ultron

    with db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE trajectory_records, raw_user_uploads, task_segments, memory_records, "
                             "memory_contributions, embedding_profile, knowledge_clusters, skills, feedback_events, "
                             "memory_lexemes, memory_corpus, bundle_serves CASCADE"))
    return Ultron(settings, db=db)


@pytest.fixture(scope="session")
def dagster_instance(db, tmp_path_factory):
    """A Dagster instance whose storage is dagster-postgres on the same server."""
    import dagster as dg

    home = tmp_path_factory.mktemp("dagster_home")
    (home / "dagster.yaml").write_text(
        f"storage:\n  postgres:\n    postgres_url: \"{db.urls.dagster}\"\ntelemetry:\n  enabled: false\n"
    )
    with dg.DagsterInstance.from_config(str(home)) as instance:
        yield instance


@pytest.fixture
def project_instance(db, tmp_path, monkeypatch):
    """An instance from the project's own dagster.yaml (queued runs, monitoring, retries, the
    ultron_store pool), its storage on a fresh database of the same server."""
    import uuid

    import dagster as dg
    import sqlalchemy as sa

    name = f"dagster_project_{uuid.uuid4().hex[:8]}"
    admin = sa.make_url(db.urls.dagster)
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    monkeypatch.setenv("ULTRON_DAGSTER_PG_URL", admin.set(database=name).render_as_string(hide_password=False))
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(Path(__file__).resolve().parents[1] / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        yield instance
    with engine.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    engine.dispose()
