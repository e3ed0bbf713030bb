"""Schema migrations: ``stash migrate`` runs Alembic over ``db/migrations`` (idempotent).

The first migration creates the vector columns with ``STASH_VECTOR_DIM`` dimensions; the
embedding model and dimension are recorded in ``settings`` by the first embed (the lock
checked by ``stash_pipeline.embedding.cache.CachedEmbedder.check_lock``).

Logging: the read-only checks (``current_revision``, ``head_revision``) back the
``/readyz`` probe, which a load balancer calls every few seconds; Alembic would log two
INFO lines per check ("Context impl …", "Will assume transactional DDL") plus seven
"setup plugin" lines at its import. Those are dropped; ``migrate`` itself keeps Alembic's
"Running upgrade …" lines. Alembic is imported inside the functions, after the filter is
in place, so the import-time lines are caught too.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import create_engine

from stash_pipeline.config import Settings
from stash_pipeline.db.dsn import database_dsn
from stash_pipeline.db.gateway import translate_errors
from stash_pipeline.db.server import check as check_server

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"

# Per thread and task, so a readiness check never silences a migration running beside it.
_quiet = ContextVar("stash_quiet_alembic", default=False)


class _QuietAlembic(logging.Filter):
    """Drop Alembic's INFO chatter: always for plugin set-up, during read-only checks for the rest."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        return not (_quiet.get() or record.name == "alembic.runtime.plugins")


for _name in ("alembic.runtime.plugins", "alembic.runtime.migration"):
    logging.getLogger(_name).addFilter(_QuietAlembic())


@contextlib.contextmanager
def _quiet_alembic() -> Iterator[None]:
    token = _quiet.set(True)
    try:
        yield
    finally:
        _quiet.reset(token)


def _sqlalchemy_url(dsn: str) -> str:
    if dsn.startswith("postgresql://"):
        return "postgresql+psycopg://" + dsn.removeprefix("postgresql://")
    if dsn.startswith("postgres://"):
        return "postgresql+psycopg://" + dsn.removeprefix("postgres://")
    if "://" not in dsn:  # key=value conninfo
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
        user = parts.pop("user", "")
        password = parts.pop("password", "")
        host = parts.pop("host", "localhost")
        port = parts.pop("port", "5432")
        dbname = parts.pop("dbname", "")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        return f"postgresql+psycopg://{auth}{host}:{port}/{dbname}"
    return dsn


def _config(dsn: str, vector_dim: int) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", _sqlalchemy_url(dsn).replace("%", "%%"))
    cfg.attributes["vector_dim"] = vector_dim
    return cfg


def head_revision() -> str:
    with _quiet_alembic():
        from alembic.script import ScriptDirectory

        return ScriptDirectory.from_config(_config("postgresql://x/y", 1)).get_current_head() or ""


def current_revision(dsn: str) -> str | None:
    with _quiet_alembic():
        from alembic.runtime.migration import MigrationContext

        engine = create_engine(_sqlalchemy_url(dsn))
        try:
            with translate_errors(), engine.connect() as conn:
                ctx = MigrationContext.configure(conn, opts={"version_table": "stash_schema_version"})
                return ctx.get_current_revision()
        finally:
            engine.dispose()


def migrate(settings: Settings, dsn: str | None = None) -> tuple[str | None, str]:
    """Bring the schema to head; return (revision before, revision after)."""
    from alembic import command

    dsn = dsn or database_dsn(settings)
    check_server(dsn)  # refuses a PostgreSQL or pgvector too old, before any change
    before = current_revision(dsn)
    with translate_errors():
        command.upgrade(_config(dsn, settings.vector_dim), "head")
    return before, head_revision()
