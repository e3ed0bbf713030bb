"""Failing fast with the database down: /healthz and /readyz answer 503 in under a second
(they do not wait on the pool) and a write fails with database_unavailable within the
bound docs/reliability.md states (10 s: twice the default STASH_DB_TIMEOUT_S of 5 s)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client

from stash_pipeline.config import load_settings
from stash_pipeline.store import Store
from stash_serve.http import build_app
from stash_serve.mcp.server import build_server
from tests.conftest import free_port
from tests.reliability.conftest import FIGURES

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

#: the write-failure bound docs/reliability.md promises
WRITE_FAILURE_BOUND_S = 10.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def down_store(tmp_path: Path) -> Iterator[Store]:
    """A store whose database is down (nothing listens on its port), default timeouts."""
    dsn = f"postgresql://stash:x@127.0.0.1:{free_port()}/stash"
    store = Store.open(load_settings(database_url=dsn, home=tmp_path, embedder="hash"))
    try:
        yield store
    finally:
        store.close()


async def test_health_answers_within_a_second_with_the_database_down(down_store: Store) -> None:
    app = build_app(down_store, build_server(down_store, auth=True), auth=True)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        for path in ("/healthz", "/readyz", "/healthz"):
            started = time.monotonic()
            response = await http.get(path)
            took = time.monotonic() - started
            assert response.status_code == 503, response.text
            assert took < 1.0, f"{path} took {took:.2f} s"
            FIGURES["slow failure"][f"{path} 503 with the database down, ms (max)"] = max(
                FIGURES["slow failure"][f"{path} 503 with the database down, ms (max)"], round(took * 1000)
            )


async def test_a_write_fails_within_the_bound_with_database_unavailable(down_store: Store) -> None:
    async with Client(build_server(down_store, auth=False)) as client:
        for tool, arguments in [
            ("remember", {"content": "written while the database is down", "namespace": "/"}),
            ("remember", {"content": "keyed write", "namespace": "/", "idempotency_key": "k1"}),
            ("remember_batch", {"namespace": "/", "items": [{"content": "a"}, {"content": "b"}]}),
        ]:
            started = time.monotonic()
            result = await client.call_tool(tool, arguments)
            took = time.monotonic() - started
            body = json.loads(result.content[0].text)
            assert result.is_error and body["error"] == "database_unavailable", body
            assert took <= WRITE_FAILURE_BOUND_S, f"{tool} took {took:.1f} s to fail"
            key = "write fails with database_unavailable after, s (max)"
            FIGURES["slow failure"][key] = max(FIGURES["slow failure"][key], round(took, 1))
