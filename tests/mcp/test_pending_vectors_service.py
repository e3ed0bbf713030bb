"""The service's pending-vector worker, over a real server process: a write committed
without its vector survives the process dying before the worker ran; the next process
embeds it, and recall by vector finds it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from stash_pipeline import recall
from stash_pipeline.memory import namespaces
from stash_pipeline.memory.pending import backlog
from tests.conftest import free_port
from tests.mcp.test_transports import _env, _session, _stash

pytestmark = pytest.mark.anyio

TEXT = "The nightly backup job writes to the cold storage bucket in Frankfurt"


@contextlib.contextmanager
def _server(settings: Any, tmp_path: Path, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    log_path = tmp_path / f"http-{port}.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [_stash(), "serve", "mcp", "--transport", "http", "--port", str(port), "--no-auth"],
            env={**os.environ, **_env(settings, tmp_path), **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None:
                    raise AssertionError(f"server exited: {log_path.read_text()}")
                with contextlib.suppress(httpx2.HTTPError):
                    if httpx2.get(base + "/healthz", timeout=1).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise AssertionError("server did not start")
                time.sleep(0.2)
            yield base, process
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=15)


def _vector_present(store: Any, episode_id: int) -> bool:
    with store.db.connection() as conn:
        row = conn.execute("SELECT embedding IS NOT NULL AS present FROM episodes WHERE id = %(id)s",
                           {"id": episode_id}).fetchone()
        conn.commit()
    return bool(row["present"])


async def test_a_waiting_vector_survives_a_killed_server(settings: Any, store: Any, tmp_path: Path) -> None:
    namespaces.create(store, "/ops")
    # the first server defers vectors and its worker waits 60 s after a wake-up: it dies first
    with _server(settings, tmp_path, STASH_EMBED_ON_WRITE="async", STASH_EMBED_PENDING_DELAY_S="60") as (base, process):
        async with _session(base, None) as session:
            result = await session.call_tool("remember", {"content": TEXT, "namespace": "/ops"})
            assert not result.is_error, result.content[0].text
            episode_id = json.loads(result.content[0].text)["id"]
        assert not _vector_present(store, episode_id)  # answered before the vector existed
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=15) == -signal.SIGKILL
    assert not _vector_present(store, episode_id)
    assert backlog(store).pending == 1
    assert recall.recall(store, "nightly backup cold storage", ["/ops"], mode="text")[0].id == episode_id

    # a new server (default settings) picks the row up on its first sweep
    with _server(settings, tmp_path):
        deadline = time.monotonic() + 30
        while not _vector_present(store, episode_id) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _vector_present(store, episode_id)
    hits = recall.recall(store, "nightly backup cold storage", ["/ops"], mode="vector")
    assert hits[0].id == episode_id and hits[0].score_parts["vector"] > 0
    assert backlog(store).pending == 0


#: shares no word with TEXT: only a vector finds TEXT for it
QUESTION = "where do the overnight copies end up"


async def test_sixteen_agents_each_recall_the_write_they_just_made(settings: Any, store: Any, tmp_path: Path) -> None:
    """Vectors deferred, and the service's worker held back: sixteen agents at once over
    HTTP, each remembering a text in its own namespace and at once recalling it by a
    question that shares no word with it. Every recall finds the write it follows (the
    recall embeds what still waits), with sixteen clients loading a two-core machine."""
    import anyio

    for i in range(16):
        namespaces.create(store, f"/ryw/a{i}")
    missed: list[str] = []

    async def agent(i: int, base: str) -> None:
        slug = f"/ryw/a{i}"
        async with _session(base, None) as session:
            for turn in range(3):
                made = await session.call_tool("remember", {"content": f"{TEXT} ({i}.{turn})", "namespace": slug})
                assert not made.is_error, made.content[0].text
                stored = json.loads(made.content[0].text)["id"]
                found = await session.call_tool("recall", {"query": QUESTION, "namespaces": slug})
                assert not found.is_error, found.content[0].text
                ids = [r["id"] for r in json.loads(found.content[0].text)["results"]]
                if stored not in ids:
                    missed.append(f"{slug}, turn {turn}: {stored} not in {ids}")

    with _server(settings, tmp_path, STASH_EMBED_ON_WRITE="async", STASH_EMBED_PENDING_DELAY_S="60") as (base, _):
        async with anyio.create_task_group() as group:
            for i in range(16):
                group.start_soon(agent, i, base)
    assert not missed, missed
