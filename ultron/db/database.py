"""Connecting to Ultron's Postgres: embedded by default, external on request.

``Database.open(settings)`` is the only way in. It starts the embedded server if
needed, checks pgvector is available, and applies pending Alembic migrations
under an advisory lock, so any process (CLI, Dagster run worker, test) can be
the first one to touch a fresh state directory.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from pgvector.psycopg import register_vector
from sqlalchemy.engine import Engine

from ultron.db import embedded
from ultron.db.hits import HitWriter
from ultron.db.urls import redact, with_database, with_driver
from ultron.settings import Settings

VERSION_TABLE = "ultron_alembic_version"
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_MIGRATION_LOCK_KEY = 0x756C74726F6E  # "ultron"


class DatabaseError(RuntimeError):
    """The database cannot be used as configured; the message names the fix."""


@dataclass(frozen=True)
class Urls:
    """Where Ultron's and Dagster's storage live on the chosen server."""

    ultron: str  # SQLAlchemy URL, psycopg 3
    dagster: str  # SQLAlchemy URL, psycopg2 (dagster-postgres needs it for NOTIFY)


def resolve_urls(settings: Settings, *, keep_running: bool = False) -> Urls:
    """Work out both URLs, starting the embedded server when no external one is set."""
    if settings.database_url:
        ultron_url = with_driver(settings.database_url, "psycopg")
        dagster_src = settings.dagster_database_url or settings.database_url
        return Urls(ultron=ultron_url, dagster=with_driver(dagster_src, "psycopg2"))
    admin = embedded.ensure_server(settings.pgdata, keep_running=keep_running)
    return Urls(
        ultron=with_driver(with_database(admin, "ultron"), "psycopg"),
        dagster=with_driver(
            settings.dagster_database_url or with_database(admin, "dagster"), "psycopg2"
        ),
    )


def check_pgvector(conn: sa.Connection, url: str, extension: str = "vector") -> None:
    """Fail with a message that names the fix when the server lacks pgvector."""
    available = conn.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = :name"), {"name": extension}
    ).first()
    if available is None:
        raise DatabaseError(
            f"The PostgreSQL server at {redact(url)} does not have the '{extension}' extension "
            "(pgvector) installed. Install pgvector on that server (for example the "
            "postgresql-<version>-pgvector package, or the pgvector/pgvector image), or unset "
            "ULTRON_DATABASE_URL to use the embedded server, which ships pgvector."
        )
    # Installed on the server but not in this database, and this role may not create it
    # (pgvector is not a trusted extension): the migration would die on CREATE EXTENSION.
    row = conn.execute(sa.text(
        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = :name), current_database(), current_user, "
        "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR ("
        " has_database_privilege(current_database(), 'CREATE') AND EXISTS (SELECT 1 FROM"
        " pg_available_extension_versions WHERE name = :name AND trusted))"
    ), {"name": extension}).one()
    created, database, role, may_create = row
    if not created and not may_create:
        raise DatabaseError(
            f"The PostgreSQL server at {redact(url)} has pgvector, but the '{extension}' extension is not "
            f"created in database '{database}' and role '{role}' may not create it (only a superuser can). "
            f"Have a superuser run CREATE EXTENSION {extension}; in database '{database}' once, then start again."
        )


def check_btree_gin(conn: sa.Connection, url: str) -> None:
    """Fail with a message that names the fix when the server lacks ``btree_gin`` (contrib),
    which the word indexes by owner use (revision 0020). It is a trusted extension: the
    store's owner creates it, no superuser needed."""
    if conn.execute(sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'btree_gin'")).first() is None:
        raise DatabaseError(
            f"The PostgreSQL server at {redact(url)} does not have the 'btree_gin' extension, one of "
            "PostgreSQL's contrib modules (the postgresql-contrib package on most systems; the pgvector/pgvector "
            "image has it). Install it, or unset ULTRON_DATABASE_URL to use the embedded server.")


def migrate(engine: Engine) -> str:
    """Apply pending migrations; returns the head revision. Safe to call concurrently."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        check_pgvector(conn, str(engine.url))
        check_btree_gin(conn, str(engine.url))
        # Two processes starting on a fresh database take turns here.
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
        return conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar_one()


class Database:
    """An engine on a migrated Ultron database."""

    _cache: dict[str, "Database"] = {}
    _cache_lock = threading.Lock()

    def __init__(self, engine: Engine, urls: Urls, revision: str) -> None:
        self.engine = engine
        self.urls = urls
        self.revision = revision
        self._search_engine: Engine | None = None
        self._hits: HitWriter | None = None
        self._search_lock = threading.Lock()

    @property
    def search_engine(self) -> Engine:
        """Connections for searches and the hit writer, a pool of their own: autocommit, HNSW's
        iterative scan on, query vectors sent as binary, and commits that do not wait for
        fsync (the only writes here are hit counts, soft state that a crash may lose the last
        few of). Set once per connection, so a search is one statement for its candidates and
        one to read the memories it returns, with no BEGIN, SET or COMMIT round trips; no
        other write path ever gets these settings."""
        with self._search_lock:
            if self._search_engine is None:
                engine = sa.create_engine(self.urls.ultron, pool_pre_ping=True, pool_size=5, max_overflow=5,
                                          isolation_level="AUTOCOMMIT")

                @sa.event.listens_for(engine, "connect")
                def _session(dbapi_conn, _record) -> None:
                    with dbapi_conn.cursor() as cur:
                        # No plan_cache_mode here: the candidates statement, whose generic plan
                        # took 100 ms, not 5, runs unprepared (ultron.db.search_arms), so it is
                        # planned with its values each time; the rest may keep a generic plan.
                        # enable_seqscan off: an owner's graph is a partition of its own
                        # (revision 0022), and for one of a few thousand memories the planner
                        # costs reading and sorting them all below walking its graph, which
                        # took 3.9 against 5.1 ms of a team's statement at 100k memories
                        # (EXPLAIN ANALYZE, median of 40). Nothing else a search runs has a
                        # cheaper plan with a sequential scan; a table with no other path is
                        # still scanned (the memory_corpus row).
                        cur.execute("SET hnsw.iterative_scan = relaxed_order; SET synchronous_commit = off; "
                                    "SET enable_seqscan = off")
                    # The query vector goes over as binary (pgvector's adapter): its 384 floats
                    # as text took 0.2 ms a statement to print and parse. Nothing read here
                    # returns a vector column, so nothing else changes.
                    register_vector(dbapi_conn)
                    dbapi_conn.commit()  # before SQLAlchemy switches the connection to autocommit

                self._search_engine = engine
            return self._search_engine

    @property
    def hits(self) -> HitWriter:
        """The write-behind hit counts of searches (``ultron.db.hits``)."""
        engine = self.search_engine
        with self._search_lock:
            if self._hits is None:
                self._hits = HitWriter(engine)
            return self._hits

    @classmethod
    def open(cls, settings: Settings | None = None) -> "Database":
        """The process-wide Database for these settings (one engine per URL)."""
        settings = settings or Settings.from_env()
        urls = resolve_urls(settings)
        with cls._cache_lock:
            db = cls._cache.get(urls.ultron)
            if db is None:
                engine = sa.create_engine(
                    urls.ultron, pool_pre_ping=True, pool_size=5, max_overflow=5
                )
                try:
                    revision = migrate(engine)
                except sa.exc.OperationalError as exc:
                    engine.dispose()
                    raise DatabaseError(
                        f"Cannot connect to PostgreSQL at {redact(urls.ultron)}: {exc.orig}"
                    ) from exc
                db = cls(engine, urls, revision)
                cls._cache[urls.ultron] = db
            return db

    def ping(self) -> None:
        """One round trip; raises when the server does not answer."""
        with self.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    def dispose(self) -> None:
        if self._hits is not None:
            self._hits.flush(timeout=5.0)
        with self._cache_lock:
            self._cache.pop(self.urls.ultron, None)
        self.engine.dispose()
        if self._search_engine is not None:
            self._search_engine.dispose()
