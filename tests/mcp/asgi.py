"""The MCP HTTP app in-process: the real SDK client over streamable HTTP through ASGI."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from stash_pipeline.store import Store
from stash_serve.http import build_app
from stash_serve.mcp.server import build_server

BASE = "http://127.0.0.1:8080"


@contextlib.asynccontextmanager
async def served(store: Store, *, auth: bool = True) -> AsyncIterator[Any]:
    """The ASGI app of ``store`` with its MCP session manager running."""
    server = build_server(store, auth=auth)
    app = build_app(store, server, auth=auth)
    async with server.session_manager.run():
        yield app


@contextlib.asynccontextmanager
async def session(app: Any, token: str | None, client: tuple[str, int] = ("127.0.0.1", 5000)) -> AsyncIterator[ClientSession]:
    """An initialised MCP client session on ``app`` presenting ``token`` from address ``client``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx2.ASGITransport(app=app, client=client)
    async with (
        httpx2.AsyncClient(transport=transport, base_url=BASE, headers=headers, timeout=60) as http,
        streamable_http_client(BASE + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as mcp_session,
    ):
        await mcp_session.initialize()
        yield mcp_session
