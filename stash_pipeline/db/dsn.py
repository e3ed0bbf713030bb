"""The one decision of which PostgreSQL a process talks to.

``STASH_DATABASE_URL`` wins when set (another database on that server is reached by
swapping the database name). Otherwise the database lives in the embedded server under
``STASH_HOME`` (``stash_pipeline.db.embedded``). Reading the DSN never starts that
server. Only entry points start it — ``stash up``, the ``stash`` CLI commands (through
``start_embedded_if_needed``, to tell the user it started it) and the test fixtures;
a library path (``Store.open`` from a Dagster sensor tick, a run worker, an import)
finds a stopped server an error (``require_running``), never a reason to start one.
"""

from __future__ import annotations

from stash_pipeline.config import Settings
from stash_pipeline.db.embedded import EmbeddedServer
from stash_pipeline.errors import DatabaseUnavailable


def database_dsn(settings: Settings, database: str = "stash", *, start: bool = False) -> str:
    """DSN of the application database (or of ``database`` on the same server).

    With ``start=True`` an embedded server that is not running is started first.
    """
    if settings.database_url:
        if database == "stash":
            return settings.database_url
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        parts = conninfo_to_dict(settings.database_url)
        parts["dbname"] = database
        return make_conninfo(**parts)
    if start:
        start_embedded_if_needed(settings)
    return EmbeddedServer(settings).url(database)


def require_running(settings: Settings) -> None:
    """Raise ``DatabaseUnavailable`` when the embedded server is the database and is not running."""
    if not settings.embedded:
        return
    status = EmbeddedServer(settings).status()
    if status.running:
        return
    what = "is not running" if status.initialized else "has not been created yet"
    raise DatabaseUnavailable(
        f"the embedded PostgreSQL under {settings.home} {what} (127.0.0.1:{status.port}); "
        "start it with `stash db start` or `stash up`, or set STASH_DATABASE_URL"
    )


def start_embedded_if_needed(settings: Settings) -> bool:
    """Start the embedded server when it is the database and is not running.

    Returns True when this call started it (False with ``STASH_DATABASE_URL`` set).
    """
    if not settings.embedded:
        return False
    server = EmbeddedServer(settings)
    if server.status().running:
        return False
    server.start()
    return True
