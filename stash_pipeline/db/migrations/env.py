"""Alembic environment for Stash's own schema (not Dagster's: that lives in its own database).

Migrations are raw SQL files applied through ``op.execute``; Alembic only records the
version (table ``stash_schema_version``). A session advisory lock (``MIGRATION_LOCK`` in
``stash_pipeline/db/locks.py``) makes concurrent ``stash migrate`` calls from several
processes safe: a second migrator waits, then finds the schema at head.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from stash_pipeline.db.locks import MIGRATION_LOCK, session_lock


def run_migrations_online() -> None:
    config = context.config
    url = config.get_main_option("sqlalchemy.url")
    engine = create_engine(url, future=True)
    with engine.connect() as connection:
        # The lock is taken on the psycopg connection underneath SQLAlchemy's: the same
        # session, so it covers every migration below.
        driver_connection = connection.connection.driver_connection
        with session_lock(driver_connection, MIGRATION_LOCK, wait=True):
            context.configure(
                connection=connection,
                target_metadata=None,
                version_table="stash_schema_version",
                transaction_per_migration=True,
            )
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
    engine.dispose()


run_migrations_online()
