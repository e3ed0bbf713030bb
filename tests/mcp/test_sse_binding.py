"""SSE sessions belong to the token that opened them, and their ids stay out of the access log
(a real `stash serve mcp --transport http` process, SSE read with a streaming HTTP client)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from stash_pipeline import auth
from stash_pipeline.memory import namespaces
from tests.conftest import free_port
from tests.mcp.test_transports import INITIALIZE, _env, _stash

pytestmark = pytest.mark.anyio


@contextlib.contextmanager
def _server(settings: Any, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The HTTP server with access logging on (log level info); yields (base URL, log file)."""
    port = free_port()
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [_stash(), "serve", "mcp", "--transport", "http", "--port", str(port)],
            env={**os.environ, **_env(settings, tmp_path), "STASH_LOG_LEVEL": "info"},
            stdout=log, stderr=subprocess.STDOUT, cwd=str(Path(__file__).resolve().parents[2]),
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                assert process.poll() is None, log_path.read_text()
                with contextlib.suppress(httpx2.HTTPError):
                    if httpx2.get(base + "/healthz", timeout=1).status_code == 200:
                        break
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)
            yield base, log_path
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)


async def test_a_session_answers_only_the_token_that_opened_it(settings: Any, store: Any, tmp_path: Path) -> None:
    namespaces.create(store, "/a")
    namespaces.create(store, "/b")
    token_a = auth.create_token(store, ["/a"], ["read", "write"])["token"]
    token_b = auth.create_token(store, ["/b"], ["read", "write"])["token"]
    with _server(settings, tmp_path) as (base, log_path):
        async with httpx2.AsyncClient(base_url=base, timeout=30) as http:
            with anyio.fail_after(30):
                async with http.stream("GET", "/sse", headers={"Authorization": f"Bearer {token_a}"}) as stream:
                    assert stream.status_code == 200
                    # one iterator kept open: abandoning it would close the stream (and the session)
                    lines = stream.aiter_lines()
                    endpoint = None
                    while endpoint is None:
                        line = await lines.__anext__()
                        if line.startswith("data:") and "session_id=" in line:
                            endpoint = line.split(":", 1)[1].strip()
                    session_id = re.search(r"session_id=([0-9a-f]+)", endpoint).group(1)  # type: ignore[union-attr]
                    headers = {"Content-Type": "application/json"}
                    intruder = await http.post(
                        endpoint, json=INITIALIZE, headers={**headers, "Authorization": f"Bearer {token_b}"}
                    )
                    assert intruder.status_code == 404, intruder.text  # as if the session did not exist
                    owner = await http.post(
                        endpoint, json=INITIALIZE, headers={**headers, "Authorization": f"Bearer {token_a}"}
                    )
                    assert owner.status_code == 202, owner.text
    log = log_path.read_text()
    assert "POST /messages/" in log, log  # the access log is on …
    assert "Rejecting message for session" in log  # the SDK logged the intruder …
    dashed = str(uuid.UUID(hex=session_id))
    assert session_id not in log and dashed not in log, log  # … and no line carries the session id
