"""`stash serve mcp --transport http --workers 2`: one port, two worker processes.

Over a real server process and the MCP SDK's client: the workers keep the guarded HTTP
edge (a head over 64 KiB is answered 431), connections are served by two distinct worker
PIDs (each client connection is matched to the worker holding its other end, read from
/proc through psutil: nothing in the server names its workers), a write
through one worker is read through the other, /metrics counts the calls of both, /readyz
waits for both, an SSE session's messages reach the worker holding its stream whichever
worker takes them, SIGTERM to the server or Ctrl-C to its process group stops every
process, a worker that dies is replaced, and workers stop once their server is killed.
A worker count the connection budget cannot hold is refused before anything starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from stash_pipeline import auth
from stash_pipeline.memory import namespaces
from tests.conftest import free_port
from tests.mcp.test_transports import INITIALIZE, _env, _stash

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads connections from /proc"),
]


class Server:
    def __init__(self, process: subprocess.Popen[bytes], base: str, port: int, log: Path) -> None:
        self.process, self.base, self.port, self.log = process, base, port, log

    def workers(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children()


@contextlib.contextmanager
def serve(settings: Any, tmp_path: Path, *args: str, start_new_session: bool = False) -> Iterator[Server]:
    """`stash serve mcp --transport http` with ``args``, yielded once /readyz answers 200."""
    port = free_port()
    log = tmp_path / f"http-{port}.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [_stash(), "serve", "mcp", "--transport", "http", "--port", str(port), *args],
            env={**os.environ, **_env(settings, tmp_path)}, start_new_session=start_new_session,
            stdout=out, stderr=subprocess.STDOUT, cwd=str(Path(__file__).resolve().parents[2]),
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, f"server exited: {log.read_text()}"
            with contextlib.suppress(httpx2.HTTPError):
                if httpx2.get(base + "/readyz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, f"server not ready: {log.read_text()}"
            time.sleep(0.3)
        yield Server(process, base, port, log)
    finally:
        tree: list[psutil.Process] = []
        with contextlib.suppress(psutil.NoSuchProcess):
            tree = psutil.Process(process.pid).children(recursive=True)
        if process.poll() is None:
            process.kill()
            process.wait(timeout=15)
        for child in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _owner(workers: list[psutil.Process], server_port: int, client_port: int) -> int | None:
    """The pid of the worker holding the server end of the connection from ``client_port``."""
    for worker in workers:
        with contextlib.suppress(psutil.NoSuchProcess):
            for conn in worker.net_connections(kind="tcp"):
                if conn.laddr and conn.laddr.port == server_port and conn.raddr and conn.raddr.port == client_port:
                    return worker.pid
    return None


class Client:
    """An MCP client on one connection at a time; ``served`` lists, per answer, the pid of
    the worker holding the server end of the connection it came on."""

    def __init__(self, session: ClientSession, served: list[int | None]) -> None:
        self.session, self.served = session, served

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.session.call_tool(tool, arguments)
        text = result.content[0].text
        assert not result.is_error, text
        return json.loads(text)


@contextlib.asynccontextmanager
async def client(server: Server, token: str) -> AsyncIterator[Client]:
    served: list[int | None] = []
    workers = server.workers()

    async def record(response: httpx2.Response) -> None:
        if response.request.method == "POST":
            stream = response.extensions["network_stream"]
            served.append(_owner(workers, server.port, stream.get_extra_info("client_addr")[1]))

    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=60,
            limits=httpx2.Limits(max_connections=1, max_keepalive_connections=1),
            event_hooks={"response": [record]},
        ) as http,
        streamable_http_client(server.base + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield Client(session, served)


@pytest.fixture
def token(store: Any) -> str:
    namespaces.create(store, "/w", "W", "workers")
    return auth.create_token(store, ["/w"], ["read", "write"], "agent")["token"]


async def test_two_workers_serve_one_port_and_share_the_database(
    settings: Any, store: Any, token: str, tmp_path: Path
) -> None:
    with serve(settings, tmp_path, "--workers", "2") as server:
        workers = server.workers()
        assert len(workers) == 2, [w.cmdline() for w in workers]
        pids = {w.pid for w in workers}
        ready = httpx2.get(server.base + "/readyz", timeout=10).json()
        assert ready["ready"] is True and ready["workers"] == 2, ready
        # the workers serve behind the guarded HTTP edge: a head over 64 KiB is answered 431
        for _ in range(4):
            oversized = httpx2.post(server.base + "/mcp", headers={"X-Padding": "a" * 70_000}, timeout=10)
            assert oversized.status_code == 431, oversized.text

        calls = 0
        clients: list[Client] = []
        async with contextlib.AsyncExitStack() as stack:
            # clients on connections of their own, calling concurrently, until both workers served
            for _ in range(20):
                clients.append(await stack.enter_async_context(client(server, token)))
                async with anyio.create_task_group() as tasks:
                    for one in clients:
                        tasks.start_soon(one.call, "list_namespaces", {})
                        calls += 1
                if {pid for one in clients for pid in one.served} >= pids:
                    break
            served = {pid for one in clients for pid in one.served}
            assert None not in served and served == pids, served

            # a write through one worker is read through the other
            for attempt in range(20):
                writer = next(one for one in clients if one.served[-1] is not None)
                reader = next((one for one in clients if one.served[-1] not in (None, writer.served[-1])), None)
                if reader is None:
                    clients.append(await stack.enter_async_context(client(server, token)))
                    continue
                text = f"Worker note {attempt}: the release checklist lives in the wiki"
                stored = await writer.call("remember", {"content": text, "namespace": "/w"})
                found = await reader.call("recall", {"query": f"worker note {attempt} release checklist",
                                                     "namespaces": "/w"})
                calls += 2
                if writer.served[-1] != reader.served[-1] and None not in (writer.served[-1], reader.served[-1]):
                    assert stored["id"] in [r["id"] for r in found["results"]], found
                    break
            else:
                raise AssertionError("no remember and recall served by two workers in 20 attempts")

        # /metrics sums both workers, whichever answers the scrape
        for _ in range(4):
            text = httpx2.get(server.base + "/metrics", timeout=10).text
            counted = sum(float(m) for m in re.findall(r"^stash_mcp_tool_calls_total\{[^}]*\} (\S+)$", text, re.M))
            assert counted == calls, (counted, calls)

        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=30) == 0, server.log.read_text()
        _gone(workers)
        assert "Traceback" not in server.log.read_text()


async def test_an_sse_session_is_served_whichever_worker_takes_its_messages(
    settings: Any, store: Any, token: str, tmp_path: Path
) -> None:
    with serve(settings, tmp_path, "--workers", "2") as server:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(base_url=server.base, timeout=30) as http:
            with anyio.fail_after(60):
                async with http.stream("GET", "/sse", headers=headers) as stream:
                    assert stream.status_code == 200
                    lines = stream.aiter_lines()
                    endpoint = None
                    while endpoint is None:
                        line = await lines.__anext__()
                        if line.startswith("data:") and "session_id=" in line:
                            endpoint = line.split(":", 1)[1].strip()
                    assert re.match(r"^/messages/[01]/\?session_id=", endpoint), endpoint
                    # every message on a new connection: some reach the other worker
                    owners = set()
                    for n in range(8):
                        async with httpx2.AsyncClient(
                            base_url=server.base, timeout=30,
                            event_hooks={"response": [lambda r: _note_owner(r, server, owners)]},
                        ) as poster:
                            message = {**INITIALIZE, "id": n + 1}
                            posted = await poster.post(endpoint, json=message,
                                                       headers={**headers, "Content-Type": "application/json"})
                            assert posted.status_code == 202, posted.text
                        answer = None
                        while answer is None:
                            line = await lines.__anext__()
                            if line.startswith("data:"):
                                answer = json.loads(line.split(":", 1)[1])
                        assert answer["id"] == n + 1 and answer["result"]["serverInfo"]["name"] == "stash", answer
                    assert len(owners) == 2, f"8 connections, all taken by one worker: {owners}"
                    # another token's post is refused by the worker holding the session, too
                    intruder = auth.create_token(store, ["/w"], ["read"], "other")["token"]
                    for _ in range(4):
                        async with httpx2.AsyncClient(base_url=server.base, timeout=30) as poster:
                            refused = await poster.post(endpoint, json=INITIALIZE, headers={
                                "Authorization": f"Bearer {intruder}", "Content-Type": "application/json"})
                            assert refused.status_code == 404, refused.text


async def _note_owner(response: httpx2.Response, server: Server, owners: set[int | None]) -> None:
    stream = response.extensions.get("network_stream")
    if stream is not None:
        owners.add(_owner(server.workers(), server.port, stream.get_extra_info("client_addr")[1]))


def test_ctrl_c_to_the_process_group_stops_every_worker_cleanly(settings: Any, tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the server and its workers at once: all drain and exit."""
    with serve(settings, tmp_path, "--workers", "2", start_new_session=True) as server:
        workers = server.workers()
        assert len(workers) == 2
        os.killpg(server.process.pid, signal.SIGINT)
        assert server.process.wait(timeout=30) == 0, server.log.read_text()
        _gone(workers)
        assert "Traceback" not in server.log.read_text(), server.log.read_text()


def test_a_dead_worker_is_replaced_and_workers_outlive_no_killed_server(settings: Any, tmp_path: Path) -> None:
    with serve(settings, tmp_path, "--workers", "2") as server:
        first = server.workers()
        first[0].kill()
        deadline = time.monotonic() + 90
        while True:  # a new worker in its place, and ready again once it can serve
            now = server.workers()
            with contextlib.suppress(httpx2.HTTPError):
                if (len(now) == 2 and first[0].pid not in {w.pid for w in now}
                        and httpx2.get(server.base + "/readyz", timeout=2).status_code == 200):
                    break
            assert time.monotonic() < deadline, server.log.read_text()
            time.sleep(0.3)
        assert "starting another" in server.log.read_text()
        # the server killed outright: its workers notice and stop by themselves
        server.process.kill()
        server.process.wait(timeout=10)
        _gone(now, within=20)


def _gone(workers: list[psutil.Process], within: float = 10) -> None:
    deadline = time.monotonic() + within
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(w) for w in workers), "a worker outlived its server"


def test_more_workers_than_the_connection_budget_holds_are_refused(settings: Any, tmp_path: Path) -> None:
    result = subprocess.run(
        [_stash(), "serve", "mcp", "--transport", "http", "--port", str(free_port())],
        env={**os.environ, **_env(settings, tmp_path), "STASH_HTTP_WORKERS": "64"},
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "64 workers do not fit the connection budget" in result.stderr, result.stderr
    assert re.search(r"at most \d+ fit", result.stderr), result.stderr
    assert "Traceback" not in result.stderr
