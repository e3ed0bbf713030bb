"""`stash up` end to end: embedded Postgres, MCP over HTTP with a token, Dagster UI, clean stop.

Runs the installed `stash` command in a subprocess on free ports, waits for both HTTP
endpoints, remembers and recalls through the MCP SDK's streamable-HTTP client with the
admin token `stash up` created, checks that Dagster's GraphQL endpoint lists the stage
assets and, once the daemon's discovery sensor has ticked, the new namespace's partition,
then sends SIGTERM and checks that every process of the tree is gone within seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import free_port
from tests.e2e.up_process import wait_port

STASH = shutil.which("stash", path=str(Path(sys.executable).parent)) or "stash"


async def _remember_and_recall(url: str, token: str) -> list[dict]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        created = await session.call_tool("create_namespace", {"namespace": "/projects/e2e", "name": "e2e"})
        assert not created.is_error, created.content
        stored = await session.call_tool(
            "remember", {"content": "The deploy uses blue-green on Fridays", "namespace": "/projects/e2e"}
        )
        assert not stored.is_error, stored.content
        found = await session.call_tool("recall", {"query": "how do we deploy", "namespaces": "/projects/e2e"})
        assert not found.is_error, found.content
        payload = found.structured_content or json.loads(found.content[0].text)
        return payload["results"]


def _graphql(port: int, query: str, token: str) -> dict:
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


async def _unauthenticated_status(url: str) -> int:
    import httpx2

    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        return response.status_code


def test_stash_up_serves_mcp_and_dagster_and_stops_cleanly(tmp_path):
    # not under tmp_path: pytest makes its root 0700, which the root-run database user can't traverse
    home = Path(tempfile.mkdtemp(prefix="stash-up-")) / "home"
    mcp_port, ui_port, db_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STASH_", "DAGSTER_"))}
    env.update({"STASH_HOME": str(home), "STASH_DB_PORT": str(db_port), "STASH_EMBEDDER": "hash"})
    log = tmp_path / "up.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [STASH, "up", "--mcp-port", str(mcp_port), "--dagster-port", str(ui_port)],
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    tree: list[psutil.Process] = []
    try:
        wait_port(mcp_port, 90, proc, log)
        wait_port(ui_port, 180, proc, log)
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        assert len(tree) >= 4  # stash up + mcp + webserver + daemon (+ their helpers)

        token = (home / "admin-token").read_text().strip()
        url = f"http://127.0.0.1:{mcp_port}/mcp"
        assert asyncio.run(_unauthenticated_status(url)) == 401
        results = asyncio.run(_remember_and_recall(url, token))
        assert results[0]["kind"] == "episode"
        assert results[0]["content"] == "The deploy uses blue-green on Fridays"
        assert "embedding" not in json.dumps(results)

        assert _graphql(ui_port, "{ version }", token)["data"]["version"]
        assets = {tuple(n["assetKey"]["path"]) for n in _graphql(ui_port, "{ assetNodes { assetKey { path } } }", token)["data"]["assetNodes"]}
        assert {("episodes",), ("facts",), ("relationships",), ("causal_links",), ("patterns",), ("goal_progress",),
                ("failure_patterns",), ("hypothesis_evidence",), ("decay",)} <= assets
        # the discovery sensor (run by the daemon stash up started) adds the new namespace's partition
        query = '{ assetNodeOrError(assetKey: {path: ["facts"]}) { ... on AssetNode { partitionKeys } } }'
        deadline = time.monotonic() + 120
        keys: list[str] = []
        while time.monotonic() < deadline and "/projects/e2e" not in keys:
            keys = _graphql(ui_port, query, token)["data"]["assetNodeOrError"].get("partitionKeys") or []
            time.sleep(2)
        assert "/projects/e2e" in keys, keys
    finally:
        tree = tree or [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("stash up did not exit within 30 s of SIGTERM")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in tree):
        time.sleep(0.2)
    alive = [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"still running after SIGTERM: {[p.cmdline() for p in alive]}"
    assert proc.returncode == 0, log.read_text()[-2000:]
    # the embedded database this command started is stopped too
    assert not (home / "pgdata" / "postmaster.pid").exists()
