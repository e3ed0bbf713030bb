"""The database layer: ``gateway`` (pool, sessions, named queries, error translation),
``sql`` (the named queries in ``queries/*.sql``), ``dsn`` (which server to talk to),
``embedded`` (the bundled PostgreSQL server) and ``migrate`` (Alembic).

The gateway's names are re-exported here so ``from stash_pipeline.db import Database``
keeps working.
"""

from __future__ import annotations

from stash_pipeline.db.gateway import Database, Session, translate_errors
from stash_pipeline.db.sql import QUERIES, query

__all__ = ["QUERIES", "Database", "Session", "query", "translate_errors"]
