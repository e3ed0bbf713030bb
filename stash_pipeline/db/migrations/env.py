"""Alembic environment for Stash's own schema (not Dagster's: that lives in its own database).

Migrations are raw SQL files applied through ``op.execute``; Alembic only records the
version (table ``stash_schema_version``). A session advisory lock makes concurrent
``stash migrate`` calls from several processes safe.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, text

MIGRATION_LOCK = (7311, 1)


def run_migrations_online() -> None:
    config = context.config
    url = config.get_main_option("sqlalchemy.url")
    engine = create_engine(url, future=True)
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:a, :b)"), {"a": MIGRATION_LOCK[0], "b": MIGRATION_LOCK[1]})
        connection.commit()
        try:
            context.configure(
                connection=connection,
                target_metadata=None,
                version_table="stash_schema_version",
                transaction_per_migration=True,
            )
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:a, :b)"), {"a": MIGRATION_LOCK[0], "b": MIGRATION_LOCK[1]})
            connection.commit()
    engine.dispose()


run_migrations_online()
