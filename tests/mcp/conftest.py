"""Fixtures for the MCP tests: the server bound to a fresh test database, and call helpers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from stash_serve.mcp.server import build_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server(store: Any) -> Any:
    return build_server(store, auth=False)


async def ok(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured result."""
    result = await client.call_tool(tool, arguments or {})
    text = result.content[0].text if result.content else ""
    assert not result.is_error, f"{tool} failed: {text}"
    assert result.structured_content is not None
    # the text block carries the same JSON for clients that ignore structured content
    assert json.loads(text) == result.structured_content
    return result.structured_content


async def fails(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool that must fail with a tool error; return {"error": code, "message": ...}."""
    result = await client.call_tool(tool, arguments or {})
    text = result.content[0].text if result.content else ""
    assert result.is_error, f"{tool} unexpectedly succeeded: {text}"
    body = json.loads(text)
    assert set(body) >= {"error", "message"}, body
    assert "Traceback" not in text
    return body
