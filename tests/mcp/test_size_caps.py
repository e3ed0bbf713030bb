"""Size caps at the MCP boundary: episode metadata (STASH_MAX_METADATA_BYTES), a tool result
(STASH_MAX_RESULT_BYTES), and a result serialised once (one compact JSON text block)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from mcp import Client

from stash_serve.mcp.server import build_server
from tests.mcp.conftest import fails, ok

pytestmark = pytest.mark.anyio


def _count(store: Any) -> int:
    with store.db.connection() as conn:
        return int(conn.execute("SELECT count(*) AS n FROM episodes").fetchone()["n"])


async def test_oversized_metadata_is_refused_fast_and_nothing_is_stored(server: Any, store: Any) -> None:
    huge = {"blob": "m" * 3_900_000}
    async with Client(server) as client:
        await ok(client, "create_namespace", {"namespace": "/p", "description": "p"})
        started = time.monotonic()
        for _ in range(3):
            refused = await fails(client, "remember", {"content": "x", "namespace": "/p", "metadata": huge})
            assert refused["error"] == "content_too_large" and "STASH_MAX_METADATA_BYTES" in refused["message"]
        batch = await fails(
            client, "remember_batch",
            {"namespace": "/p", "items": [{"content": "a"}, {"content": "b", "metadata": {"k": "v" * 20_000}}]},
        )
        assert batch["error"] in ("content_too_large", "invalid_input")
        assert time.monotonic() - started < 30
        # just under the default cap is fine
        await ok(client, "remember", {"content": "ok", "namespace": "/p", "metadata": {"k": "v" * 16_000}})
    assert _count(store) == 1


async def test_a_result_over_the_cap_is_refused_not_sent(make_store: Any) -> None:
    small = make_store(max_result_bytes=20_000, max_metadata_bytes=16_384)
    async with Client(build_server(small, auth=False)) as client:
        await ok(client, "create_namespace", {"namespace": "/p", "description": "p"})
        for i in range(5):
            await ok(
                client, "remember",
                {"content": f"deploy note {i}", "namespace": "/p", "metadata": {"pad": "x" * 8_000}},
            )
        refused = await fails(client, "recall", {"query": "deploy note", "namespaces": "/p", "limit": 5})
        assert refused["error"] == "result_too_large" and "STASH_MAX_RESULT_BYTES" in refused["message"]
        # asking for fewer items fits
        fewer = await ok(client, "recall", {"query": "deploy note", "namespaces": "/p", "limit": 1})
        assert len(fewer["results"]) == 1


async def test_a_result_is_serialised_once(server: Any) -> None:
    async with Client(server) as client:
        await ok(client, "create_namespace", {"namespace": "/p", "description": "p"})
        await ok(client, "remember", {"content": "note", "namespace": "/p", "metadata": {"k": "é" * 100}})
        result = await client.call_tool("recall", {"query": "note", "namespaces": "/p"})
        text = result.content[0].text
        compact = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
        # one compact JSON text, not a second pretty-printed serialisation of the same answer
        assert len(result.content) == 1
        assert len(text.encode()) <= len(compact.encode())
        assert json.loads(text) == result.structured_content
