"""Admission control over a real `stash serve mcp --transport http` process and the MCP SDK client.

Small limits (2 running, 2 waiting) and a burst four times that size of remembers and
recalls, made slow by a lock the test holds on the episodes table and on the tokens (so
every token check waits too): the calls past the queue are answered at once with the
typed busy error (HTTP 503, Retry-After, JSON-RPC code -32005 with ``{"error": "busy",
"retry_after_s": …}``, which the SDK raises as ``MCPError``), without waiting for their
token checks, the admitted ones succeed once the lock goes, every remember is either
acknowledged and stored or refused and absent, and the server serves a full load after.
stdio has no such limit.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from stash_pipeline import auth
from stash_pipeline.memory import namespaces
from stash_serve.admission import BUSY_CODE
from stash_serve.token_check import POOL_SIZE
from tests.mcp.test_transports import MCP_HEADERS, _env, _serve_http, _session, _stash

pytestmark = pytest.mark.anyio

# one process (tests.mcp.test_transports._env): the limits are per process
LIMITS = {"STASH_HTTP_MAX_CONCURRENT": "2", "STASH_HTTP_MAX_QUEUE": "2", "STASH_HTTP_QUEUE_TIMEOUT_S": "60"}
IN_SYSTEM = 4  # running + waiting
BURST = 4 * IN_SYSTEM


@pytest.fixture
def token(store: Any) -> str:
    namespaces.create(store, "/b", "B", "burst")
    return auth.create_token(store, ["/b"], ["read", "write"], "agent")["token"]


def _stored(settings: Any) -> set[str]:
    with psycopg.connect(settings.database_url) as conn:
        return {row[0] for row in conn.execute("SELECT content FROM episodes")}


async def test_a_burst_past_the_queue_is_refused_at_once_and_nothing_is_half_written(
    settings: Any, store: Any, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in LIMITS.items():
        monkeypatch.setenv(key, value)
    with _serve_http(settings, tmp_path) as base, contextlib.ExitStack() as stack:
        async with _session(base, token) as session:
            await session.call_tool("recall", {"query": "warm", "namespaces": "/b"})
            # every call below, and every token check, now waits on this lock until it is released
            lock = stack.enter_context(psycopg.connect(settings.database_url))
            lock.execute("LOCK TABLE episodes, api_tokens IN ACCESS EXCLUSIVE MODE")

            outcomes: dict[int, tuple[str, float, Any]] = {}

            async def call(n: int) -> None:
                started = time.monotonic()
                if n % 2:
                    tool, arguments = "remember", {"content": f"burst note {n}", "namespace": "/b"}
                else:
                    tool, arguments = "recall", {"query": f"burst note {n}", "namespaces": "/b"}
                try:
                    result = await session.call_tool(tool, arguments)
                except MCPError as exc:
                    outcomes[n] = ("busy", time.monotonic() - started, exc)
                else:
                    assert not result.is_error, result.content[0].text
                    outcomes[n] = ("ok", time.monotonic() - started, result)

            async with anyio.create_task_group() as tasks:
                for n in range(BURST):
                    tasks.start_soon(call, n)
                # the calls past the queue are answered while the admitted ones wait
                with anyio.fail_after(60):
                    while len(outcomes) < BURST - IN_SYSTEM:
                        await anyio.sleep(0.05)
                # one more, in plain HTTP: 503, Retry-After, the JSON-RPC error with the request's id
                async with httpx2.AsyncClient(timeout=30) as http:
                    raw = await http.post(base + "/mcp", headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
                                          json={"jsonrpc": "2.0", "id": "raw-7", "method": "tools/call",
                                                "params": {"name": "recall", "arguments": {"query": "x"}}})
                assert len(outcomes) == BURST - IN_SYSTEM, "an admitted call finished while the lock was held"
                lock.rollback()  # the lock goes: the admitted calls go on

        assert raw.status_code == 503, raw.text
        assert int(raw.headers["retry-after"]) >= 1
        body = raw.json()
        assert body["id"] == "raw-7" and body["error"]["code"] == BUSY_CODE, body
        assert body["error"]["data"]["error"] == "busy" and body["error"]["data"]["retry_after_s"] > 0, body

        busy = {n: o for n, o in outcomes.items() if o[0] == "busy"}
        ok = {n: o for n, o in outcomes.items() if o[0] == "ok"}
        assert len(busy) == BURST - IN_SYSTEM and len(ok) == IN_SYSTEM, outcomes
        for n, (_, seconds, exc) in busy.items():
            assert exc.code == BUSY_CODE, exc
            assert exc.data["error"] == "busy" and exc.data["retry_after_s"] > 0, exc.data
            assert "retry after" in exc.message and "STASH_HTTP_MAX_QUEUE" in exc.message, exc.message
            assert seconds < 1.0, f"call {n} waited {seconds:.2f} s for its busy answer"

        # every remember acknowledged is stored, every one refused is not
        stored = _stored(settings)
        for n in range(1, BURST, 2):
            assert (f"burst note {n}" in stored) == (outcomes[n][0] == "ok"), (n, outcomes[n])

        # recovered: a load as large as the limits is served in full
        async with _session(base, token) as session:
            results = await _gather(session, IN_SYSTEM)
            assert all(not r.is_error for r in results)
        metrics = httpx2.get(base + "/metrics", timeout=10).text
        refused = re.search(r'^stash_http_busy_total\{reason="queue_full"\} (\S+)$', metrics, re.M)
        assert refused is not None and float(refused.group(1)) == BURST - IN_SYSTEM + 1, metrics


async def _gather(session: ClientSession, count: int) -> list[Any]:
    results: list[Any] = []

    async def one(n: int) -> None:
        results.append(await session.call_tool("recall", {"query": f"after {n}"}))

    async with anyio.create_task_group() as tasks:
        for n in range(count):
            tasks.start_soon(one, n)
    return results


async def test_stdio_has_no_admission_limit(settings: Any, tmp_path: Path) -> None:
    """The HTTP limits at their smallest leave a stdio client's concurrent calls alone."""
    params = StdioServerParameters(
        command=_stash(), args=["serve", "mcp", "--transport", "stdio"],
        env={**_env(settings, tmp_path), "STASH_HTTP_MAX_CONCURRENT": "1", "STASH_HTTP_MAX_QUEUE": "0"},
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            results = await _gather(session, 8)
    assert len(results) == 8 and all(not r.is_error for r in results), [r.content for r in results]
    assert all("results" in json.loads(r.content[0].text) for r in results)


async def test_a_token_check_with_no_connection_in_time_is_answered_busy(
    settings: Any, store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token not seen before is checked before admission, on the token-check pool's 4
    connections. With all 4 held by checks waiting on a lock, one more is answered busy
    within the answer limit (1 s here), not after the database timeout as "unavailable";
    the held checks are never cut, and end answered or busy once the lock goes."""
    monkeypatch.setenv("STASH_HTTP_QUEUE_TIMEOUT_S", "1")
    namespaces.create(store, "/b", "B", "burst")
    tokens = [auth.create_token(store, ["/b"], ["read"], f"agent {n}")["token"] for n in range(POOL_SIZE + 1)]

    def post(http: httpx2.AsyncClient, base: str, token: str, id_: str) -> Any:
        return http.post(base + "/mcp", headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
                         json={"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                               "params": {"name": "recall", "arguments": {"query": "x", "namespaces": "/b"}}})

    with _serve_http(settings, tmp_path) as base, contextlib.ExitStack() as stack:
        lock = stack.enter_context(psycopg.connect(settings.database_url))
        lock.execute("LOCK TABLE api_tokens IN ACCESS EXCLUSIVE MODE")
        held: list[httpx2.Response] = []
        async with httpx2.AsyncClient(timeout=60) as http, anyio.create_task_group() as tasks:
            async def held_check(n: int) -> None:
                held.append(await post(http, base, tokens[n], f"held-{n}"))

            for n in range(POOL_SIZE):
                tasks.start_soon(held_check, n)
            with psycopg.connect(settings.database_url, autocommit=True) as watch, anyio.fail_after(30):
                while watch.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                    " AND query LIKE '%api_tokens%'").fetchone()[0] < POOL_SIZE:
                    await anyio.sleep(0.05)
            started = time.monotonic()
            late = await post(http, base, tokens[POOL_SIZE], "late-1")
            took = time.monotonic() - started
            lock.rollback()  # the held checks go on

        assert late.status_code == 503, late.text
        assert took < 2.0, f"answered after {took:.2f} s"
        assert int(late.headers["retry-after"]) >= 1
        body = late.json()
        assert body["id"] is None and body["error"]["code"] == BUSY_CODE, body
        assert body["error"]["data"]["error"] == "busy" and "token check" in body["error"]["message"], body
        assert len(held) == POOL_SIZE
        for answer in held:  # looked up in full, then answered, or refused as too late for the limit
            assert answer.status_code in (200, 503), answer.text
            if answer.status_code == 503:
                assert answer.json()["error"]["code"] == BUSY_CODE, answer.text
        metrics = httpx2.get(base + "/metrics", timeout=10).text
        refused = re.search(r'^stash_http_busy_total\{reason="token_check"\} (\S+)$', metrics, re.M)
        assert refused is not None and float(refused.group(1)) == 1, metrics
