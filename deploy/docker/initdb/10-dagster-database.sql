-- Run once by the postgres image on an empty data directory (POSTGRES_DB=ultron is created
-- by the image itself). Dagster's runs and events live in a database of their own, so
-- wiping one never touches the other; ULTRON_DAGSTER_DATABASE_URL points at it.
CREATE DATABASE dagster;
-- Ultron's migrations create the extension too; doing it here as the superuser means the
-- application role never needs the right to.
\connect ultron
CREATE EXTENSION IF NOT EXISTS vector;
