"""Every Stash connection runs with the session settings of ``server.sql``, whatever the
server's defaults: a stock PostgreSQL has JIT on, and JIT-compiling recall took seconds."""

from __future__ import annotations

import anyio
import psycopg

from stash_serve.token_check import TokenCheck


def _server_default_jit_on(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        database = conn.info.dbname
        conn.execute(f'ALTER DATABASE "{database}" SET jit = on')
    with psycopg.connect(dsn) as plain:  # what any other client of the server gets
        assert plain.execute("SHOW jit").fetchone()[0] == "on"


def test_pooled_connections_run_without_jit(database_url, make_store):
    _server_default_jit_on(database_url)
    store = make_store()
    with store.db.connection() as conn:
        assert conn.execute("SHOW jit").fetchone()["jit"] == "off"


def test_the_token_check_pool_runs_without_jit(database_url, make_store):
    _server_default_jit_on(database_url)
    store = make_store()

    async def main() -> str:
        check = TokenCheck(store)
        async with check.running():
            async with check._pool.connection() as conn:
                row = await (await conn.execute("SHOW jit")).fetchone()
                return row["jit"]

    assert anyio.run(main) == "off"


def test_a_slow_prepare_at_connect_is_cut_at_its_budget(database_url, make_store, monkeypatch, caplog):
    """A statement prepared at connect that runs long delays the waiting request by at most
    PREPARE_BUDGET_MS, and the connection is handed out unprepared."""
    import time

    from stash_pipeline.db import gateway, sql

    monkeypatch.setattr(gateway, "PREPARE_BUDGET_MS", 200)
    monkeypatch.setitem(sql.QUERIES, "test_slow_prepare", "SELECT pg_sleep(%(s)s)")
    store = make_store()
    store.db.prepare_on_connect(("test_slow_prepare", {"s": 5.0}))
    started = time.perf_counter()
    assert store.db.ping()
    assert time.perf_counter() - started < 2.0
    assert "over the 200 ms budget" in caplog.text


def test_the_server_check_reads_this_servers_versions(database_url):
    from stash_pipeline.db.server import SUPPORTED_MAJORS, check

    versions = check(database_url)
    assert versions.major in SUPPORTED_MAJORS
    assert versions.vector_installed and versions.problems() == []
