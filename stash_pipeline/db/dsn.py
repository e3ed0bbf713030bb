"""The one decision of which PostgreSQL a process talks to.

``STASH_DATABASE_URL`` wins when set (another database on that server is reached by
swapping the database name). Otherwise the database lives in the embedded server under
``STASH_HOME`` (``stash_pipeline.db.embedded``). Reading the DSN never starts that
server; callers that may start it say so with ``start=True`` or call
``start_embedded_if_needed`` first (the CLI does, to tell the user it started it).
"""

from __future__ import annotations

from stash_pipeline.config import Settings
from stash_pipeline.db.embedded import EmbeddedServer


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
