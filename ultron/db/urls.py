"""Small helpers for rewriting Postgres URLs between drivers.

One server is reached through three drivers: psycopg 3 for our own SQLAlchemy
engine, psycopg2 for dagster-postgres (its LISTEN/NOTIFY breaks on psycopg 3),
and plain libpq URIs for tools such as psql.
"""

from __future__ import annotations

from sqlalchemy.engine import make_url


def with_driver(url: str, driver: str | None) -> str:
    """Return ``url`` using ``postgresql+driver`` (or plain ``postgresql`` if None)."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    parsed = make_url(url)
    if not parsed.drivername.startswith("postgresql"):
        raise ValueError(f"not a PostgreSQL URL: {redact(url)}")
    name = "postgresql" if driver is None else f"postgresql+{driver}"
    return parsed.set(drivername=name).render_as_string(hide_password=False)


def with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


def redact(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL is still worth showing redacted-ish
        return url.split("@")[-1]


def location(url: str) -> str:
    """Where a URL points, for people: ``host:port/db`` over TCP, ``/socket/dir (socket) db``
    for a Unix socket (the embedded server), never the user or password."""
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - never fail a status line on an odd URL
        return redact(url)
    socket_dir = parsed.query.get("host")
    if isinstance(socket_dir, tuple):
        socket_dir = socket_dir[0]
    database = parsed.database or ""
    if socket_dir and str(socket_dir).startswith("/"):
        return f"{socket_dir} (Unix socket), database {database}"
    host = parsed.host or "localhost"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{host}{port}/{database}"
