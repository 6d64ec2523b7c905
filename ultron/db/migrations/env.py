"""Alembic environment: always driven programmatically by ultron.db.database.migrate."""

from alembic import context

from ultron.db.database import VERSION_TABLE

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=None,
    version_table=VERSION_TABLE,
    transactional_ddl=True,
)
with context.begin_transaction():
    context.run_migrations()
