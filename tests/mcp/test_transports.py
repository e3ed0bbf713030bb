"""The server over real transports: stdio (spawned process) and HTTP (subprocess on a free port).

The HTTP tests cover the auth matrix (no token, bad token, revoked token, wrong scope,
read-only token writing), health/readiness/metrics, SSE for older clients, 50 concurrent
`remember` calls and malformed arguments.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from stash_pipeline import auth
from stash_pipeline.memory import episodes, namespaces
from tests.conftest import free_port

pytestmark = pytest.mark.anyio


def _env(settings: Any, tmp_path: Path) -> dict[str, str]:
    return {
        "STASH_DATABASE_URL": settings.database_url,
        "STASH_EMBEDDER": "hash",
        "STASH_VECTOR_DIM": "384",
        "STASH_HOME": str(tmp_path / "home"),
        "STASH_ENV_FILE": "/nonexistent/.env",
        "STASH_LOG_LEVEL": "warning",
        # vectors before the commit: "auto" defers them when the forward pass is slow (a
        # loaded machine), and the worker's later write would show in the tests' snapshots
        "STASH_EMBED_ON_WRITE": "sync",
        # every tool: these tests call tools outside the default toolset
        "STASH_TOOLSETS": "all",
        # one HTTP process: the limits these tests count are per process (one per CPU would
        # start two here); tests/mcp/test_workers.py serves with two
        "STASH_HTTP_WORKERS": "1",
    }


def _structured(result: Any) -> dict[str, Any]:
    text = result.content[0].text
    assert not result.is_error, text
    return json.loads(text)


def _error(result: Any) -> dict[str, Any]:
    text = result.content[0].text
    assert result.is_error, text
    return json.loads(text)


# --- stdio ---------------------------------------------------------------------------------


@functools.cache
def _stash() -> str:
    """The `stash` console script of this environment (the one way to start the server),
    probed once a session: every test that starts a server calls this."""
    stash = str(Path(sys.executable).with_name("stash"))
    probe = subprocess.run([stash, "serve", "mcp", "--help"], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, f"`stash serve mcp --help` failed: {probe.stderr}"
    return stash


async def test_stdio_session_protocol_end_to_end(settings: Any, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=_stash(),
        args=["serve", "mcp", "--transport", "stdio"],
        env=_env(settings, tmp_path),
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.instructions and "init" in init.instructions
            created = _structured(await session.call_tool("init", {}))
            assert "/self/preferences" in created["namespaces"]
            _structured(
                await session.call_tool("create_namespace", {"namespace": "/projects/x", "description": "X"})
            )
            stored = _structured(
                await session.call_tool(
                    "remember",
                    {"content": "Deploys to production happen on Fridays", "namespace": "/projects/x"},
                )
            )
            hits = _structured(
                await session.call_tool("recall", {"query": "when do we deploy", "namespaces": "/projects/x"})
            )
            assert hits["results"][0]["id"] == stored["id"] and hits["results"][0]["kind"] == "episode"
            h = _structured(
                await session.call_tool(
                    "create_hypothesis",
                    {
                        "content": "Friday deploys cause weekend incidents",
                        "verification_plan": "Compare incident logs",
                        "namespace": "/projects/x",
                    },
                )
            )
            assert (
                _structured(await session.call_tool("test_hypothesis", {"id": h["id"]}))["status"]
                == "testing"
            )
            confirmed = _structured(await session.call_tool("confirm_hypothesis", {"id": h["id"]}))
            assert confirmed["hypothesis"]["status"] == "confirmed"
            bad = _error(await session.call_tool("remember", {"content": "", "namespace": "/projects/x"}))
            assert bad["error"] == "empty_content"


def _stdio_server(settings: Any, tmp_path: Path) -> subprocess.Popen[bytes]:
    """`stash serve mcp --transport stdio`, its three streams piped."""
    return subprocess.Popen(
        [_stash(), "serve", "mcp", "--transport", "stdio"],
        env={**os.environ, **_env(settings, tmp_path)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(Path(__file__).resolve().parents[2]),
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stdio_server_exits_cleanly_on_signal(settings: Any, tmp_path: Path, signum: int) -> None:
    process = _stdio_server(settings, tmp_path)
    try:
        # one request/answer round trip proves the server is up and serving before the signal
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "stash"
        process.send_signal(signum)
        out, err = process.communicate(timeout=15)
        assert process.returncode == 0, err.decode()
        assert out == b""  # nothing else was written to stdout
        assert b"Traceback" not in err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _read_line(stream: Any, timeout: float = 15) -> dict[str, Any]:
    """The next JSON line on ``stream``, or fail after ``timeout`` seconds of silence."""
    import select

    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, f"no answer within {timeout:g} s"
    line = stream.readline()
    assert line, "the server closed stdout"
    return json.loads(line)


def test_stdio_answers_a_request_it_cannot_decode_with_a_parse_error(settings: Any, tmp_path: Path) -> None:
    """A line the stdio transport cannot decode (a lone surrogate, no JSON, a cut-off line)
    gets a JSON-RPC error with id null, as over HTTP, and the server goes on serving."""
    process = _stdio_server(settings, tmp_path)
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        process.stdin.flush()
        assert _read_line(process.stdout)["id"] == 1
        lines = [
            # a lone surrogate, escaped: JSON text, but no string Python's JSON reader accepts
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call",'
            b'"params":{"name":"recall","arguments":{"query":"\\ud800"}}}',
            b"not json at all",
            b'{"jsonrpc":"2.0","id":8,"method":',  # cut off
        ]
        for line in lines:
            process.stdin.write(line + b"\n")
            process.stdin.flush()
            answer = _read_line(process.stdout)
            assert answer["jsonrpc"] == "2.0" and answer["id"] is None, answer
            assert answer["error"]["code"] == -32700, answer
        process.stdin.write(b'{"jsonrpc":"2.0","id":9,"method":"ping"}\n')  # still serving
        process.stdin.flush()
        assert _read_line(process.stdout) == {"jsonrpc": "2.0", "id": 9, "result": {}}
        process.stdin.close()
        assert process.wait(timeout=15) == 0
        assert b"Traceback" not in process.stderr.read()  # type: ignore[union-attr]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# --- HTTP ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _serve_http(settings: Any, tmp_path: Path, *extra: str, until: str = "/readyz") -> Iterator[str]:
    """A `stash serve mcp --transport http` process, yielded once ``until`` answers 200."""
    port = free_port()
    log = (tmp_path / f"http-{port}.log").open("w")
    process = subprocess.Popen(
        [_stash(), "serve", "mcp", "--transport", "http", "--port", str(port), *extra],
        env={**os.environ, **_env(settings, tmp_path)},
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise AssertionError(f"server exited: {(tmp_path / f'http-{port}.log').read_text()}")
            try:
                if httpx2.get(base + until, timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("server did not start")
            time.sleep(0.2)
        yield base
        process.terminate()
        assert process.wait(timeout=15) == 0, "server did not exit cleanly on SIGTERM"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=15)
        log.close()


@contextlib.asynccontextmanager
async def _session(base: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(base + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def scoped(store: Any) -> dict[str, Any]:
    """Two projects, an episode in the other one, and tokens of each kind."""
    namespaces.create(store, "/projects/x", "X", "project x")
    namespaces.create(store, "/projects/y", "Y", "project y")
    other = episodes.remember(store, "/projects/y", "Project Y secret: the launch date is May 3")
    revoked = auth.create_token(store, ["/projects/x"], ["read", "write"], "old")
    assert auth.revoke_token(store, revoked["id"]) is True
    return {
        "rw": auth.create_token(store, ["/projects/x"], ["read", "write"], "agent")["token"],
        "ro": auth.create_token(store, ["/projects/x"], ["read"], "viewer")["token"],
        "revoked": revoked["token"],
        "other_episode": other.id,
    }


def _count(store: Any, slug: str) -> int:
    with store.db.transaction() as tx:
        return int(
            tx.conn.execute(
                "SELECT count(*) AS n FROM episodes e JOIN namespaces n ON n.id = e.namespace_id WHERE n.slug = %s",
                (slug,),
            ).fetchone()["n"]
        )


async def test_http_auth_matrix_health_and_metrics(
    settings: Any, store: Any, scoped: dict[str, Any], tmp_path: Path
) -> None:
    with _serve_http(settings, tmp_path) as base:
        async with httpx2.AsyncClient(timeout=30) as http:
            for headers in (
                {},
                {"Authorization": "Bearer stash_nope_nope"},
                {"Authorization": "Basic abc"},
                {"Authorization": f"Bearer {scoped['revoked']}"},
            ):
                response = await http.post(base + "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers})
                assert response.status_code == 401, headers
                assert response.json()["error"] == "access_denied"
                assert response.headers["www-authenticate"].startswith("Bearer")
            assert (await http.get(base + "/sse")).status_code == 401
            assert (await http.get(base + "/not-a-route")).status_code == 401  # closed by default
            health = await http.get(base + "/healthz")
            assert health.status_code == 200 and health.json() == {"status": "ok"}, health.text
            ready = await http.get(base + "/readyz")
            assert ready.status_code == 200 and ready.json()["ready"] is True, ready.text

        async with _session(base, scoped["rw"]) as session:
            visible = _structured(await session.call_tool("list_namespaces", {}))
            assert [n["slug"] for n in visible["items"]] == ["/projects/x"]
            denied = _error(await session.call_tool("list_namespaces", {"namespaces": "/"}))
            assert denied["error"] == "access_denied"
            stored = _structured(
                await session.call_tool(
                    "remember", {"content": "We use trunk-based development", "namespace": "/projects/x"}
                )
            )
            assert stored["created"] is True
            outside = _error(
                await session.call_tool("remember", {"content": "sneaky write", "namespace": "/projects/y"})
            )
            assert outside["error"] == "access_denied"
            no_self = _structured(await session.call_tool("init", {}))
            assert no_self["self_available"] is False and no_self["namespaces_created"] == []
            assert "/projects/x" in no_self["message"]
            assert (
                _error(await session.call_tool("get_episode", {"id": scoped["other_episode"]}))["error"]
                == "record_not_found"
            )
            assert (
                _error(await session.call_tool("purge_episode", {"id": scoped["other_episode"]}))["error"]
                == "record_not_found"
            )
            assert (
                _error(await session.call_tool("delete_namespace", {"namespace": "/projects/x", "confirm": True}))[
                    "error"
                ]
                == "access_denied"
            )
            hits = _structured(await session.call_tool("recall", {"query": "launch date secret"}))
            assert {h["namespace"] for h in hits["results"]} == {"/projects/x"}

        async with _session(base, scoped["ro"]) as session:
            hits = _structured(await session.call_tool("recall", {"query": "trunk-based development"}))
            assert hits["results"][0]["id"] == stored["id"]
            readonly = _error(
                await session.call_tool(
                    "remember", {"content": "read-only tokens cannot write", "namespace": "/projects/x"}
                )
            )
            assert readonly["error"] == "access_denied"
            assert (
                _error(await session.call_tool("forget", {"about": "We use trunk-based development"}))[
                    "error"
                ]
                == "access_denied"
            )

        # nothing leaked across the scope: only the one permitted write happened
        assert (_count(store, "/projects/x"), _count(store, "/projects/y")) == (1, 1)
        assert store.db.one("get_namespace_by_slug", slug="/self") is None
        assert episodes.get(store, scoped["other_episode"]).content.startswith("Project Y secret")

        # SSE transport for older clients, with the same token check
        async with (
            sse_client(base + "/sse", headers={"Authorization": f"Bearer {scoped['ro']}"}) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = (await session.list_tools()).tools
            assert "recall" in {t.name for t in tools}
            assert (
                _error(await session.call_tool("remember", {"content": "x", "namespace": "/projects/x"}))[
                    "error"
                ]
                == "access_denied"
            )

        metrics = httpx2.get(base + "/metrics").text
        assert 'stash_mcp_tool_calls_total{outcome="ok",tool="remember"} 1.0' in metrics
        assert 'stash_mcp_tool_errors_total{code="access_denied",tool="remember"} 3.0' in metrics
        assert "stash_mcp_tool_duration_seconds_bucket" in metrics
        assert 'stash_http_auth_failures_total{status="401"} 6.0' in metrics  # 4 POSTs + 2 GETs
    tokens = {t["name"]: t for t in auth.list_tokens(store)}
    assert tokens["agent"]["last_used_at"] is not None and tokens["old"]["revoked_at"] is not None
    assert all("token" not in t and "token_hash" not in t for t in tokens.values())


async def test_http_concurrent_remember_and_malformed_arguments(
    settings: Any, store: Any, scoped: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # all 50 take a place or wait for one, however slow this machine is today (admission
    # control would refuse what it expects to wait past STASH_HTTP_QUEUE_TIMEOUT_S)
    monkeypatch.setenv("STASH_HTTP_QUEUE_TIMEOUT_S", "120")
    with _serve_http(settings, tmp_path) as base:
        async with _session(base, scoped["rw"]) as session:
            results: list[dict[str, Any]] = []

            async def remember(i: int, key: str | None = None) -> None:
                arguments = {"content": f"concurrent note {i}", "namespace": "/projects/x"}
                if key:
                    arguments = {
                        "content": "the same retried note",
                        "namespace": "/projects/x",
                        "idempotency_key": key,
                    }
                results.append(_structured(await session.call_tool("remember", arguments)))

            async with anyio.create_task_group() as group:
                for i in range(50):
                    group.start_soon(remember, i)
            assert len({r["id"] for r in results}) == 50 and all(r["created"] for r in results)

            results.clear()
            async with anyio.create_task_group() as group:
                for i in range(10):
                    group.start_soon(remember, i, "retry-1")
            assert len({r["id"] for r in results}) == 1
            assert sorted(r["created"] for r in results) == [False] * 9 + [True]

            malformed: list[tuple[str, dict[str, Any], str]] = [
                (
                    "remember",
                    {"content": ["not", "a", "string"], "namespace": "/projects/x"},
                    "invalid_input",
                ),
                ("remember", {"namespace": "/projects/x"}, "invalid_input"),
                ("remember", {"content": "nul \x00 byte", "namespace": "/projects/x"}, "invalid_input"),
                ("remember", {"content": "x", "namespace": "/projects/x\x00"}, "invalid_namespace"),
                ("recall", {"query": "x", "limit": 10**18}, "invalid_input"),
                ("list_namespaces", {"limit": -1}, "invalid_input"),
                ("get_episode", {"id": "abc"}, "invalid_input"),
                ("query_facts", {"namespaces": {"a": 1}}, "invalid_input"),
                ("remember_batch", {"namespace": "/projects/x", "items": "nope"}, "invalid_input"),
                ("create_goal", {"content": "x" * 20_000, "namespace": "/projects/x"}, "content_too_large"),
            ]
            for tool, arguments, code in malformed:
                assert _error(await session.call_tool(tool, arguments))["error"] == code, (tool, arguments)
            # the server still answers, and nothing bad was stored
            assert _structured(await session.call_tool("stats", {}))["episodes"] == 51

        async with httpx2.AsyncClient(timeout=30) as http:
            garbage = await http.post(
                base + "/mcp",
                content=b"{not json",
                headers={**MCP_HEADERS, "Authorization": f"Bearer {scoped['rw']}"},
            )
            assert 400 <= garbage.status_code < 500
            assert (await http.get(base + "/healthz")).status_code == 200
    assert _count(store, "/projects/x") == 51


async def test_http_no_auth_on_loopback(settings: Any, store: Any, tmp_path: Path) -> None:
    with _serve_http(settings, tmp_path, "--no-auth") as base:
        async with _session(base, None) as session:
            await session.call_tool("create_namespace", {"namespace": "/dev", "description": "local"})
            stored = _structured(
                await session.call_tool("remember", {"content": "no token needed", "namespace": "/dev"})
            )
            assert stored["created"] is True
    assert _count(store, "/dev") == 1


def test_no_auth_refuses_non_loopback_hosts(settings: Any) -> None:
    from stash_pipeline import errors
    from stash_serve.serve import run

    with pytest.raises(errors.ConfigurationError, match="loopback"):
        run(settings, transport="http", host="0.0.0.0", no_auth=True)
    with pytest.raises(errors.ConfigurationError, match="transport"):
        run(settings, transport="carrier-pigeon")


async def test_calls_in_the_first_seconds_after_a_start_succeed(
    settings: Any, store: Any, scoped: dict[str, Any], tmp_path: Path
) -> None:
    """Sixteen agents calling as soon as the process answers at all (before /readyz passes)
    are all served: none waits out the pool for a connection still being prepared."""
    import anyio

    episodes.remember(store, "/projects/x", "The deploy uses blue-green on Fridays")
    results: list[dict[str, Any]] = []

    async def agent(i: int, base: str) -> None:
        async with _session(base, scoped["rw"]) as session:
            found = await session.call_tool("recall", {"query": f"how do we deploy ({i})", "namespaces": "/projects/x"})
            results.append(_structured(found))

    with _serve_http(settings, tmp_path, until="/healthz") as base:
        async with anyio.create_task_group() as group:
            for i in range(16):
                group.start_soon(agent, i, base)
    assert len(results) == 16
    assert all(r["results"][0]["content"] == "The deploy uses blue-green on Fridays" for r in results)
