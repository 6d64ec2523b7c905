"""Dagster's instance storage on Ultron's Postgres server (dagster-postgres, psycopg2).

dagster.yaml names this class so that every Dagster process (webserver, daemon,
run workers, `dg check defs`, `dg launch`) finds the same server Ultron uses with
no URL to copy around: an explicit ``postgres_url`` or ULTRON_DAGSTER_PG_URL wins;
otherwise the URL comes from the ULTRON_* settings, starting the embedded server
on demand like any other Ultron process.
"""

from typing import Any

import dagster as dg
from dagster._serdes import ConfigurableClassData
from dagster_postgres import DagsterPostgresStorage

from ultron.db.database import resolve_urls
from ultron.db.urls import with_driver
from ultron.settings import Settings


def dagster_postgres_url(explicit: str | None = None) -> str:
    import os

    url = explicit or os.environ.get("ULTRON_DAGSTER_PG_URL") or resolve_urls(Settings.from_env()).dagster
    # dagster-postgres's LISTEN/NOTIFY needs psycopg2, whatever driver the URL named.
    return with_driver(url, "psycopg2")


class UltronDagsterStorage(DagsterPostgresStorage):
    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {
            "postgres_url": dg.Field(dg.StringSource, is_required=False),
            "should_autocreate_tables": dg.Field(bool, is_required=False, default_value=True),
        }

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: dict[str, Any]):  # type: ignore[override]
        return cls(
            postgres_url=dagster_postgres_url(config_value.get("postgres_url")),
            should_autocreate_tables=config_value.get("should_autocreate_tables", True),
            inst_data=inst_data,
        )
