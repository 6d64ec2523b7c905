"""Shared fixtures. Every test that needs a database uses the real embedded
PostgreSQL 18 + pgvector server, started once per session in a temporary ULTRON_HOME."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable

import pytest

# The tests own their environment: no developer's ULTRON_* settings leak in.
for _key in list(os.environ):
    if _key.startswith("ULTRON_") or _key in ("DAGSTER_HOME", "DASHSCOPE_API_KEY"):
        del os.environ[_key]
TEST_HOME = Path(tempfile.mkdtemp(prefix="ultron-test-"))
os.environ["ULTRON_HOME"] = str(TEST_HOME)
# Fast, deterministic vectors for the suite; tests of the real model build it explicitly.
os.environ["ULTRON_EMBEDDING_PROVIDER"] = "hash"

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


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
    embedded.stop_server(settings.pgdata)
    shutil.rmtree(TEST_HOME, ignore_errors=True)


@pytest.fixture
def client(db, settings):
    """An Ultron SDK client on an emptied database."""
    import sqlalchemy as sa

    from ultron.sdk import Ultron

    with db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE trajectory_records, raw_user_uploads, task_segments, memory_records, "
                             "memory_contributions, embedding_profile, knowledge_clusters, skills, feedback_events, "
                             "memory_lexemes, memory_corpus CASCADE"))
    return Ultron(settings, db=db)


@pytest.fixture(scope="session")
def dagster_instance(db, tmp_path_factory):
    """A Dagster instance whose storage is dagster-postgres on the same embedded server."""
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
    ultron_store pool), its storage on a fresh database of the embedded server."""
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
