"""HTTP-level hardening of the MCP app, in-process over ASGI: DNS-rebinding checks on every
loopback address, and scopes other than HTTP refused before any route sees them."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from stash_pipeline.store import Store
from stash_serve.http import build_app
from stash_serve.mcp.server import build_server

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def _post_initialize(store: Store, bind: str, headers: dict[str, str]) -> httpx2.Response:
    server = build_server(store, auth=False)
    app = build_app(store, server, auth=False, host=bind)
    async with server.session_manager.run(), httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8080"
    ) as http:
        return await http.post("/mcp", json=INITIALIZE, headers={**HEADERS, **headers})


@pytest.mark.parametrize("bind", ["127.0.0.1", "127.0.0.2", "127.1.2.3", "localhost", "::1"])
async def test_no_auth_loopback_refuses_a_foreign_host_and_origin(store: Store, bind: str) -> None:
    rebound = await _post_initialize(
        store, bind, {"host": "evil.example", "origin": "http://evil.example"}
    )
    assert rebound.status_code in (403, 421), rebound.text
    foreign_origin = await _post_initialize(
        store, bind, {"host": "127.0.0.1:8080", "origin": "http://evil.example"}
    )
    assert foreign_origin.status_code == 403, foreign_origin.text


@pytest.mark.parametrize("bind", ["127.0.0.2", "::1"])
async def test_no_auth_loopback_serves_its_own_address(store: Store, bind: str) -> None:
    name = f"[{bind}]" if ":" in bind else bind
    own = await _post_initialize(store, bind, {"host": f"{name}:8080", "origin": f"http://{name}:8080"})
    assert own.status_code == 200, own.text
    assert "serverInfo" in own.text


async def _websocket(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    incoming = [{"type": "websocket.connect"}]

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "websocket.disconnect", "code": 1000}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "websocket", "asgi": {"version": "3.0"}, "scheme": "ws", "path": path, "raw_path": path.encode(),
        "query_string": b"", "root_path": "", "headers": [(b"host", b"127.0.0.1:8080"), *headers],
        "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8080), "subprotocols": [],
    }
    await app(scope, receive, send)
    return sent


@pytest.mark.parametrize("auth", [True, False])
@pytest.mark.parametrize("path", ["/messages/", "/mcp", "/sse", "/healthz"])
async def test_websocket_upgrades_are_refused(store: Store, auth: bool, path: str) -> None:
    app = build_app(store, build_server(store, auth=auth), auth=auth)
    sent = await _websocket(app, path, [])
    assert sent == [{"type": "websocket.close", "code": 1008}]
