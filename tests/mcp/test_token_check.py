"""The HTTP fast paths: the token check from the event loop gives the same answers as
``authenticate``, still records use and refuses a revoked token from the very next
request; a call is answered with one JSON body."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from psycopg.rows import dict_row

from stash_pipeline import auth, errors
from stash_pipeline.memory import namespaces
from stash_serve.token_check import TokenCheck
from tests.mcp.test_transports import INITIALIZE, MCP_HEADERS, _serve_http

pytestmark = pytest.mark.anyio


async def test_the_one_round_trip_check_answers_as_authenticate_does(store: Any) -> None:
    made = auth.create_token(store, ["/projects/x"], ["read", "write"], "agent")
    async with await psycopg.AsyncConnection.connect(store.db.dsn, autocommit=True, row_factory=dict_row) as conn:
        info = await auth.authenticate_on(conn, f"  {made['token']} ")
        assert info == auth.authenticate(store, made["token"])
        assert (info.id, info.namespaces, info.rights) == (made["id"], ("/projects/x",), frozenset({"read", "write"}))
        for secret in (None, "", "stash_deadbeef_nope", made["token"] + "x", "a\x00b", "x" * 1000):
            with pytest.raises(errors.AccessDenied):
                await auth.authenticate_on(conn, secret)
        assert auth.revoke_token(store, made["id"]) is True
        with pytest.raises(errors.AccessDenied, match="revoked"):
            await auth.authenticate_on(conn, made["token"])


async def test_the_check_records_use_at_most_once_a_minute(store: Any) -> None:
    made = auth.create_token(store, ["/projects/x"], ["read"])
    assert auth.list_tokens(store)[0]["last_used_at"] is None
    check = TokenCheck(store)
    async with check.running():
        assert (await check.check(made["token"])).id == made["id"]
        first = auth.list_tokens(store)[0]["last_used_at"]
        assert first is not None
        await check.check(made["token"])
        assert auth.list_tokens(store)[0]["last_used_at"] == first  # within the minute: no write
        with pytest.raises(errors.AccessDenied):
            await check.check("stash_deadbeef_nope")


async def test_a_revoked_token_is_refused_from_the_next_request(settings: Any, store: Any, tmp_path: Path) -> None:
    namespaces.create(store, "/a")
    made = auth.create_token(store, ["/a"], ["read", "write"], "soon revoked")
    kept = auth.create_token(store, ["/a"], ["read"], "kept")

    def call(content: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "remember", "arguments": {"content": content, "namespace": "/a"}}}

    def headers(token: dict[str, Any]) -> dict[str, str]:
        return {**MCP_HEADERS, "Authorization": f"Bearer {token['token']}", "mcp-protocol-version": "2025-06-18"}

    with _serve_http(settings, tmp_path) as base:
        async with httpx2.AsyncClient(timeout=30) as http:
            assert (await http.post(base + "/mcp", json=INITIALIZE, headers=headers(made))).status_code == 200
            for attempt in range(5):  # after the first, the check runs alongside each request
                answer = await http.post(base + "/mcp", json=call(f"before {attempt}"), headers=headers(made))
                assert answer.status_code == 200 and '"isError":false' in answer.text.replace(" ", ""), answer.text
            assert auth.revoke_token(store, made["id"]) is True
            for attempt in range(5):  # the very next request, and every one after it
                refused = await http.post(base + "/mcp", json=call(f"after {attempt}"), headers=headers(made))
                assert refused.status_code == 401, refused.text
                assert refused.json()["error"] == "access_denied"
            assert (await http.post(base + "/mcp", json=INITIALIZE, headers=headers(kept))).status_code == 200
    with store.db.transaction() as tx:
        stored = sorted(r["content"] for r in tx.conn.execute("SELECT content FROM episodes").fetchall())
    assert stored == [f"before {i}" for i in range(5)]  # nothing of a refused request took effect


async def test_a_call_is_answered_with_one_json_body(store: Any) -> None:
    """Streamable HTTP answers a POST with plain JSON (no one-event SSE stream to frame and parse)."""
    from tests.mcp.asgi import BASE, served

    namespaces.create(store, "/a")
    made = auth.create_token(store, ["/a"], ["read"], "json")
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {made['token']}", "mcp-protocol-version": "2025-06-18"}
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_namespaces", "arguments": {}}}
    async with served(store) as app:
        transport = httpx2.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx2.AsyncClient(transport=transport, base_url=BASE, timeout=30) as http:
            answer = await http.post("/mcp", json=call, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    body = answer.json()
    assert body["id"] == 3 and [n["slug"] for n in body["result"]["structuredContent"]["items"]] == ["/a"]
