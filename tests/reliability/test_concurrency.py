"""Concurrency: four kinds of runner on one (namespace, stage); 100 MCP writers over 10 namespaces.

1. The CLI (a `stash consolidate run` subprocess), the Dagster asset (``materialize``),
   the MCP ``consolidate`` tool (in-process client) and a library thread
   (``run_stage``) start on the same namespace and stage at once, against a model slow
   enough that their runs overlap. Exactly one of them does the work (writes rows); the
   others report ``busy`` (Dagster: the step fails ``StageBusy`` after its retries) or
   find nothing left (``idle``). The namespace ends with exactly the rows of a clean
   run: zero duplicates, no orphan lineage.
2. 100 MCP writers (one in-process client each) write to 10 namespaces at once; a
   subset uses idempotency keys and every keyed write is replayed concurrently by
   another writer. Every distinct write is stored exactly once, every replay returns the
   original id with ``created: false``.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
import dagster as dg
import pytest
from mcp import Client

from stash_pipeline.consolidation import runner
from stash_pipeline.memory import namespaces as ns_ops
from stash_serve.mcp.server import build_server
from testkit.openai_server import Reply
from testkit.scripted_model import ScriptedModel
from tests.dagster.conftest import resource_for
from tests.dagster.test_assets import materialize
from tests.reliability.conftest import (
    FIGURES,
    REPO,
    STASH,
    WORKER_SETTINGS,
    canonical,
    duplicate_rows,
    orphan_lineage,
    prepare,
    rows,
    worker_env,
)
from tests.reliability.test_crash import SlowModel

pytestmark = pytest.mark.reliability

warnings.filterwarnings("ignore", category=dg.PreviewWarning)
warnings.filterwarnings("ignore", category=dg.BetaWarning)


class SlowerModel(SlowModel):
    """Answers take ~0.25 s, so one runner holds the stage while the others arrive."""

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        time.sleep(0.23)
        return super().__call__(request)


@pytest.fixture
def model() -> ScriptedModel:
    return SlowerModel(timeout_s=1.5)


#: (stage, which runner starts first; the others start when its first model request arrives)
CASES = [
    pytest.param("facts", "cli", id="facts-cli-first"),
    pytest.param("facts", "dagster", id="facts-dagster-first", marks=pytest.mark.slow),
    pytest.param("facts", "mcp", id="facts-mcp-first", marks=pytest.mark.slow),
    pytest.param("relationships", "library", id="relationships-library-first", marks=pytest.mark.slow),
    pytest.param("patterns", "cli", id="patterns-cli-first", marks=pytest.mark.slow),
    pytest.param("goal_progress", "mcp", id="goal_progress-mcp-first", marks=pytest.mark.slow),
    pytest.param("hypothesis_evidence", "dagster", id="hypothesis_evidence-dagster-first", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("stage", "leader"), CASES)
def test_four_runners_one_namespace_one_stage(
    wstore: Any, server: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str, leader: str
) -> None:
    from stash_pipeline.stages import STAGE_NAMES

    # every runner (including Dagster's resource, which reads the environment) uses WORKER_SETTINGS
    for key, value in WORKER_SETTINGS.items():
        monkeypatch.setenv(f"STASH_{key.upper()}", str(value))
    before = list(STAGE_NAMES[: STAGE_NAMES.index(stage)])
    for slug in ("/clean", "/race"):
        prepare(wstore, slug)
        if before:
            runner.run_all(wstore, slug, stages=before)
    clean = runner.run_stage(wstore, "/clean", stage)
    assert clean.rows_written > 0

    outcomes: dict[str, Any] = {}
    start = threading.Event()
    baseline = len(server.chat_requests())

    def gate() -> None:  # the others go once the leader is inside the stage
        deadline = time.monotonic() + 60
        while len(server.chat_requests()) == baseline and time.monotonic() < deadline:
            time.sleep(0.003)
        start.set()

    def wait_turn(name: str) -> None:
        if name != leader:
            start.wait()

    def library() -> None:
        wait_turn("library")
        outcomes["library"] = runner.run_stage(wstore, "/race", stage).to_json()

    def mcp_tool() -> None:
        async def go() -> Any:
            async with Client(build_server(wstore, auth=False)) as client:
                result = await client.call_tool("consolidate", {"namespaces": "/race", "stage": stage})
                assert not result.is_error, result.content[0].text
                # the tool returns a background job at once; its reports come with its status
                job_id = result.structured_content["job"]["job_id"]
                for _ in range(2400):
                    status = await client.call_tool("consolidation_status", {"namespaces": "/race"})
                    (job,) = [j for j in status.structured_content["runs"] if j["job_id"] == job_id]
                    if job["status"] in ("done", "failed"):
                        break
                    await anyio.sleep(0.05)
                assert job["status"] == "done", job
                return job["reports"]

        wait_turn("mcp")
        (outcomes["mcp"],) = anyio.run(go)

    def cli() -> None:
        wait_turn("cli")
        out = subprocess.run(
            [STASH, "consolidate", "run", "-n", "/race", "--stage", stage, "--json"],
            env=worker_env(settings.database_url, tmp_path / "home", server.base_url),
            cwd=str(REPO), capture_output=True, text=True, timeout=120,
        )
        (outcomes["cli"],) = json.loads(out.stdout)

    threads = [threading.Thread(target=f) for f in (gate, library, mcp_tool, cli)]
    for t in threads:
        t.start()
    stash = resource_for(settings, openai_base_url=server.base_url, reasoner_model="scripted",
                         reasoner_timeout_s=5.0, reasoner_max_retries=1, reasoner_backoff_s=0.01)
    wait_turn("dagster")
    with dg.instance_for_test() as instance:  # Dagster runs in the main thread (signal handlers)
        result = materialize(instance, stash, "/race", stage)
        if result.success:
            (event,) = result.asset_materializations_for_node(stage)
            outcomes["dagster"] = {k: v.value for k, v in event.metadata.items()}
        else:  # only a busy stage may fail the step (after its retries)
            failure = result.failure_data_for_node(stage)
            assert failure is not None and "another runner" in str(failure.error), failure
            outcomes["dagster"] = {"status": "busy"}
    for t in threads:
        t.join(timeout=120)
    assert set(outcomes) == {"cli", "dagster", "mcp", "library"}, outcomes

    statuses = {name: o["status"] for name, o in outcomes.items()}
    writers = [name for name, o in outcomes.items() if int(o.get("rows_written") or 0) > 0]
    assert len(writers) == 1, outcomes
    assert outcomes[writers[0]]["rows_written"] == clean.rows_written
    assert all(s in ("busy", "idle") for name, s in statuses.items() if name != writers[0]), statuses
    FIGURES["concurrency: the one runner that did the work"][writers[0]] += 1
    for name, s in statuses.items():
        if name != writers[0]:
            FIGURES["concurrency: the others"][s] += 1
    assert canonical(wstore, "/race") == canonical(wstore, "/clean")
    assert duplicate_rows(wstore, "/race") == duplicate_rows(wstore, "/clean")
    assert orphan_lineage(wstore) == []


WRITERS = 100
NAMESPACES = 10
PER_WRITER = 5


@pytest.mark.anyio
@pytest.mark.parametrize("rounds", [pytest.param(1, id="1-round"), pytest.param(3, id="3-rounds", marks=pytest.mark.slow)])
async def test_hundred_concurrent_mcp_writers(store: Any, rounds: int) -> None:
    server = build_server(store, auth=False)
    for n in range(NAMESPACES):
        ns_ops.create(store, f"/w/n{n}")
    results: list[tuple[str, str | None, dict[str, Any]]] = []
    errors_seen: list[str] = []

    async def writer(w: int, r: int) -> None:
        async with Client(server) as client:
            for i in range(PER_WRITER):
                namespace = f"/w/n{(w + i) % NAMESPACES}"
                keyed = i % 2 == 0
                content = f"round {r} writer {w} note {i}"
                arguments: dict[str, Any] = {"content": content, "namespace": namespace}
                key = None
                if keyed:
                    key = f"r{r}-w{w}-i{i}"
                    arguments["idempotency_key"] = key
                result = await client.call_tool("remember", arguments)
                if result.is_error:
                    errors_seen.append(result.content[0].text)
                    continue
                results.append((content, key, result.structured_content))
                if keyed:  # the replay comes from another writer, possibly at the same moment
                    replay = (w + 37) % WRITERS
                    pending.append((replay, namespace, content, key))

    pending: list[tuple[int, str, str, str]] = []

    async def replayer(w: int) -> None:
        async with Client(server) as client:
            while True:
                mine = [p for p in pending if p[0] == w]
                for p in mine:
                    pending.remove(p)
                    _, namespace, content, key = p
                    result = await client.call_tool(
                        "remember", {"content": content, "namespace": namespace, "idempotency_key": key}
                    )
                    if result.is_error:
                        errors_seen.append(result.content[0].text)
                    else:
                        results.append((content, key, result.structured_content))
                if done.is_set() and not any(p[0] == w for p in pending):
                    return
                await anyio.sleep(0.01)

    with anyio.fail_after(300):
        for r in range(rounds):
            done = anyio.Event()
            async with anyio.create_task_group() as replays:
                for w in range(WRITERS):
                    replays.start_soon(replayer, w)
                async with anyio.create_task_group() as group:
                    for w in range(WRITERS):
                        group.start_soon(writer, w, r)
                done.set()

    assert errors_seen == []
    stored = rows(store, "SELECT e.id, e.content, n.slug FROM episodes e JOIN namespaces n ON n.id = e.namespace_id")
    by_content: dict[str, list[dict[str, Any]]] = {}
    for row in stored:
        by_content.setdefault(row["content"], []).append(row)
    expected = {f"round {r} writer {w} note {i}" for r in range(rounds) for w in range(WRITERS) for i in range(PER_WRITER)}
    assert set(by_content) == expected
    assert all(len(v) == 1 for v in by_content.values())
    for content, _key, answer in results:
        (row,) = by_content[content]
        assert answer["id"] == row["id"]
    created = [a["created"] for c, k, a in results if k is not None]
    keyed = len([1 for c, k, a in results if k is not None]) // 2
    assert sorted(created) == [False] * keyed + [True] * keyed  # each key: one create, one replay
    fig = FIGURES["concurrency: 100 MCP writers"]
    fig["rows"] += len(stored)
    fig["idempotent replays"] += keyed
