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
