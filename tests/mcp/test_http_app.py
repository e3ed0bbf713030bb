"""The HTTP app's probes, in-process over ASGI: readiness follows the schema, health the database."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import psycopg
import pytest

from stash_pipeline.config import load_settings
from stash_pipeline.store import Store
from stash_serve.http import build_app
from stash_serve.mcp.server import build_server
from tests.conftest import _with_db

pytestmark = pytest.mark.anyio


@pytest.fixture
def empty_store(pg_admin_dsn: str, tmp_path: Any) -> Iterator[Store]:
    """A store on a database that exists but was never migrated."""
    name = f"stash_empty_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    store = Store.open(
        load_settings(database_url=_with_db(pg_admin_dsn, name), home=tmp_path, embedder="hash")
    )
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _get(store: Store, path: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    app = build_app(store, build_server(store, auth=True), auth=True)
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as http:
        return await http.get(path, headers=headers or {})


async def test_ready_when_migrated(store: Store) -> None:
    response = await _get(store, "/readyz")
    assert response.status_code == 200 and response.json()["ready"] is True


async def test_not_ready_when_migrations_pending(empty_store: Store) -> None:
    health = await _get(empty_store, "/healthz")
    assert health.status_code == 200  # the database answers …
    ready = await _get(empty_store, "/readyz")
    assert ready.status_code == 503  # … but the schema is not there
    assert ready.json() == {
        "ready": False,
        "reason": "migrations pending; run `stash migrate`",
        "schema": None,
        "head": ready.json()["head"],
    }
    assert ready.json()["head"]


async def test_unreachable_database_is_unhealthy(tmp_path: Any) -> None:
    from stash_pipeline.db.gateway import Database
    from tests.conftest import free_port

    dsn = f"postgresql://nobody@127.0.0.1:{free_port()}/none"  # nothing listens there
    store = Store.open(
        load_settings(database_url=dsn, home=tmp_path, embedder="hash"), db=Database(dsn, timeout=1)
    )
    try:
        assert (await _get(store, "/healthz")).status_code == 503
        assert (await _get(store, "/readyz")).status_code == 503
        # the token check cannot reach the database either: 503, not a false 401
        denied = await _get(store, "/mcp", {"Authorization": "Bearer stash_x_y"})
        assert denied.status_code == 503 and denied.json()["error"] == "database_unavailable"
    finally:
        store.close()


def _rpc_result(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC result of a streamable-HTTP answer (plain JSON or one SSE event)."""
    import json

    assert response.status_code == 200, response.text
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()["result"]
    data = [line[len("data: "):] for line in response.text.splitlines() if line.startswith("data: ")]
    return json.loads(data[-1])["result"]


async def test_replicas_share_no_session_state(store: Store) -> None:
    """Two app instances (two replicas behind a load balancer): a call needs no prior session."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"content": "replica-agnostic write", "namespace": "/"}},
    }
    replicas = [build_app(store, build_server(store, auth=False), auth=False) for _ in range(2)]
    async with replicas[0].router.lifespan_context(replicas[0]), replicas[1].router.lifespan_context(replicas[1]):
        clients = [
            # host with a port: the SDK's DNS-rebinding guard expects 127.0.0.1:<port>
            httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8080")
            for app in replicas
        ]
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        }
        assert _rpc_result(await clients[0].post("/mcp", json=init, headers=headers))["serverInfo"]
        # the next request lands on the other replica, without any session id
        result = _rpc_result(await clients[1].post("/mcp", json=call, headers=headers))
        assert result.get("isError") is not True, result
        for client in clients:
            await client.aclose()
    with store.db.connection() as conn:
        rows = conn.execute("SELECT content FROM episodes").fetchall()
    assert [r["content"] for r in rows] == ["replica-agnostic write"]


async def _get_app(app: Any, path: str) -> httpx2.Response:
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        return await http.get(path)


async def test_ready_only_once_the_warmup_passed(empty_store: Store) -> None:
    """Ready means a recall can be served: the schema, a prepared connection, the model."""
    import anyio

    from stash_pipeline.db.migrate import migrate
    from stash_pipeline.recall.statement import prepare_on_connect
    from stash_serve.warmup import Warmup

    prepare_on_connect(empty_store)
    warmup = Warmup(empty_store).start()
    try:
        app = build_app(empty_store, build_server(empty_store, auth=True), auth=True, warmup=warmup)
        with anyio.fail_after(10):
            while warmup.waiting_on != "migrations":
                await anyio.sleep(0.05)
        waiting = await _get_app(app, "/readyz")
        assert waiting.status_code == 503
        assert waiting.json() == {"ready": False, "reason": "starting: waiting for migrations"}
        migrate(empty_store.settings, empty_store.db.dsn)
        with anyio.fail_after(10):
            while not warmup.ready.is_set():
                await anyio.sleep(0.05)
        ready = await _get_app(app, "/readyz")
        assert ready.status_code == 200 and ready.json()["ready"] is True
        assert empty_store._embedder is not None  # the model is loaded before the first call
        with empty_store.db.connection() as conn:  # and the pool's connection has recall prepared
            prepared = conn.execute("SELECT count(*) AS n FROM pg_prepared_statements"
                                    " WHERE position('query_vector AS MATERIALIZED' in statement) > 0").fetchone()
            conn.commit()
        assert prepared["n"] == 1
    finally:
        warmup.stop()
