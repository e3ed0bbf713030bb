"""The database layer, one module per role: ``gateway`` (pool, sessions, named queries,
error translation), ``sql`` (the named queries in ``queries/*.sql``), ``dsn`` (which
server to talk to), ``locks`` (every advisory lock), ``embedded`` (the bundled
PostgreSQL server) and ``migrate`` (Alembic)."""
