"""Database restart mid-run and mid-write: clients get errors, never corrupt state; no service restart.

The session's test server is shared by every test, so this module starts its OWN
embedded PostgreSQL (``EmbeddedServer``, temp STASH_HOME, free port), migrates it and
restarts it with ``pg_ctl`` (``stop()`` = fast shutdown, then ``start()``). In the server
suite (``tests/server.sh``, which names its container in ``STASH_TEST_PG_CONTAINER``) it
restarts that container instead (``docker stop``: the image's stop signal, SIGINT, is a
fast shutdown; then ``docker start``), between the other tests, which hold nothing open on
it; against a server only given by ``STASH_TEST_DATABASE_URL`` it keeps its own embedded
one (another's server is not this suite's to restart). The restart lands while

(a) a consolidation run is in flight (model calls slowed so the restart lands inside
    the run): the run fails with ``DatabaseUnavailable``; re-running until caught up
    gives exactly the rows of a clean run, no orphan lineage, no duplicates;
(b) an MCP HTTP server (a real subprocess) takes concurrent ``remember`` /
    ``remember_batch`` calls: calls fail with tool errors (never a hang, never a
    traceback); every acknowledged write is present exactly once, every batch is all
    or nothing, and the same server process serves a ``remember`` after the database
    is back.
"""

from __future__ import annotations

import json
import random
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import pytest
from mcp.shared.exceptions import MCPError

from stash_pipeline import errors
from stash_pipeline.config import load_settings
from stash_pipeline.consolidation import runner
from stash_pipeline.consolidation.reasoner import reset_mode_cache
from stash_pipeline.db.embedded import EmbeddedServer
from stash_pipeline.db.gateway import Database
from stash_pipeline.db.migrate import migrate
from stash_pipeline.memory import namespaces as ns_ops
from stash_pipeline.stages import STAGE_NAMES
from stash_pipeline.store import Store
from stash_serve.admission import BUSY_CODE as BUSY
from testkit.openai_server import ScriptedOpenAI
from tests.conftest import _ADMIN_DSN, _PG_CONTAINER, _with_db, free_port
from tests.mcp.test_transports import _serve_http, _session
from tests.reliability.conftest import (
    FIGURES,
    WORKER_SETTINGS,
    canonical,
    duplicate_rows,
    orphan_lineage,
    prepare,
    rows,
    trials,
    until_caught_up,
)
from tests.reliability.test_crash import SlowModel, _stage_of

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class ContainerServer:
    """The server suite's PostgreSQL container, with ``EmbeddedServer``'s stop/start/url."""

    def __init__(self, container: str, admin_dsn: str) -> None:
        self.container, self.admin_dsn = container, admin_dsn

    def url(self, database: str) -> str:
        return _with_db(self.admin_dsn, database)

    def _accepting(self) -> bool:
        try:
            with psycopg.connect(self.url("postgres"), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> bool:
        """Fast shutdown (the container's stop signal); False when it was not running."""
        state = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", self.container],
                               capture_output=True, text=True, check=True).stdout.strip()
        subprocess.run(["docker", "stop", "--time", "60", self.container], capture_output=True, check=True)
        return state == "true"

    def start(self, timeout: float = 60.0) -> Any:
        subprocess.run(["docker", "start", self.container], capture_output=True, check=True)
        deadline = time.monotonic() + timeout
        while not self._accepting():
            assert time.monotonic() < deadline, f"{self.container} did not accept connections in {timeout} s"
            time.sleep(0.1)
        return type("Status", (), {"running": True})()


Restartable = EmbeddedServer | ContainerServer


@pytest.fixture(scope="module")
def own_pg() -> Iterator[Restartable]:
    """A PostgreSQL this module may stop and start: the server suite's container, or a
    private embedded one."""
    if _PG_CONTAINER and _ADMIN_DSN:
        yield ContainerServer(_PG_CONTAINER, _ADMIN_DSN)
        return
    home = Path(tempfile.mkdtemp(prefix="stash-restart-"))
    pg = EmbeddedServer(load_settings(home=home, db_port=free_port(), embedder="hash"))
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def own_dsn(own_pg: Restartable) -> Iterator[str]:
    """A fresh migrated database on the private server."""
    own_pg.start()  # a previous test may have left it stopped on failure
    name = f"stash_r_{random.randrange(16**8):08x}"
    admin = own_pg.url("postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = _with_db(admin, name)
    migrate(load_settings(database_url=dsn, embedder="hash", vector_dim=384), dsn)
    yield dsn
    own_pg.start()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _restart(pg: Restartable, down_s: float) -> None:
    assert pg.stop() is True
    time.sleep(down_s)
    assert pg.start().running


@pytest.mark.parametrize("trial", trials(1, 3))
def test_restart_during_consolidation_run(
    own_pg: Restartable, own_dsn: str, tmp_path: Path, trial: int
) -> None:
    reset_mode_cache()
    model = SlowModel(timeout_s=1.5)
    with ScriptedOpenAI(model) as server:
        settings = load_settings(
            database_url=own_dsn, home=tmp_path / "home", openai_base_url=server.base_url, **WORKER_SETTINGS
        )
        store = Store.open(settings, db=Database(own_dsn, max_size=4, timeout=5))
        try:
            for slug in ("/clean", "/crash"):
                prepare(store, slug)
            until_caught_up(store, "/clean")
            calls_before = len(server.chat_requests())

            outcome: dict[str, Any] = {}

            def run() -> None:
                try:
                    outcome["reports"] = runner.run_all(store, "/crash")
                except BaseException as exc:  # what a client of the runner sees
                    outcome["error"] = exc

            worker = threading.Thread(target=run)
            worker.start()
            deadline = time.monotonic() + 60
            while len(server.chat_requests()) - calls_before < 4 + 6 * trial:  # inside the run, later each trial
                assert time.monotonic() < deadline and worker.is_alive()
                time.sleep(0.005)
            _restart(own_pg, down_s=1.0)
            worker.join(timeout=120)
            assert not worker.is_alive()
            # the run saw the outage as a typed error (or, if the batch in flight had just
            # committed and the stage was between queries, as a failed stage report)
            if "error" in outcome:
                assert isinstance(outcome["error"], errors.DatabaseUnavailable), repr(outcome["error"])
                FIGURES["db restart"]["consolidation: DatabaseUnavailable raised"] += 1
            else:
                assert any(r.status == "failed" for r in outcome["reports"]), outcome["reports"]
                FIGURES["db restart"]["consolidation: stage reported failed"] += 1

            # the same store (same pool) recovers; resuming the failed run at the stage it was in
            # (as in the crash suite: the clean run's stage order) catches up to exactly the clean rows
            seen = server.chat_requests()[calls_before:]
            failed_in = _stage_of(seen)
            runner.run_all(store, "/crash", stages=list(STAGE_NAMES[STAGE_NAMES.index(failed_in):]), wait=True)
            until_caught_up(store, "/crash", wait=True)
            clean, after = canonical(store, "/clean"), canonical(store, "/crash")
            for kind in clean:
                assert after[kind] == clean[kind], kind
            assert orphan_lineage(store) == []
            assert duplicate_rows(store, "/crash") == duplicate_rows(store, "/clean")
            FIGURES["db restart"]["consolidation restarts held"] += 1
        finally:
            store.close()
            reset_mode_cache()


class _Settings:
    """What ``_serve_http`` reads from a settings object."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url


@pytest.mark.parametrize("trial", trials(1, 3))
async def test_restart_during_mcp_http_writes(
    own_pg: Restartable, own_dsn: str, tmp_path: Path, trial: int
) -> None:
    store = Store.open(
        load_settings(database_url=own_dsn, home=tmp_path / "home", embedder="hash"),
        db=Database(own_dsn, max_size=2, timeout=5),
    )
    ns_ops.create(store, "/load")
    acked: list[tuple[str, int]] = []  # (content, id) of every acknowledged single write
    acked_batches: list[list[str]] = []
    attempted_batches: list[list[str]] = []
    failures: list[str] = []
    stop = anyio.Event()
    try:
        with _serve_http(_Settings(own_dsn), tmp_path, "--no-auth") as base:
            async with _session(base, None) as session:

                async def call(name: str, arguments: dict[str, Any]) -> Any:
                    """The tool's result, or None when the server refused it as busy (nothing ran):
                    while the database is down, requests pile up and admission turns the excess away."""
                    try:
                        return await session.call_tool(name, arguments)
                    except MCPError as exc:
                        if exc.code != BUSY:
                            raise
                        failures.append("busy")
                        await anyio.sleep(float((exc.data or {}).get("retry_after_s", 0.1)))
                        return None

                async def writer(w: int) -> None:
                    i = 0
                    while not stop.is_set():
                        i += 1
                        if i % 4 == 0:
                            items = [f"writer {w} batch {i} item {j}" for j in range(3)]
                            attempted_batches.append(items)
                            result = await call(
                                "remember_batch",
                                {"namespace": "/load", "items": [{"content": c} for c in items]},
                            )
                            if result is None:
                                continue
                            if not result.is_error:
                                acked_batches.append(items)
                        else:
                            content = f"writer {w} note {i}"
                            result = await call(
                                "remember",
                                {"content": content, "namespace": "/load", "idempotency_key": f"w{w}-{i}"},
                            )
                            if result is None:
                                continue
                            if not result.is_error:
                                acked.append((content, json.loads(result.content[0].text)["id"]))
                        if result.is_error:
                            text = result.content[0].text
                            assert "Traceback" not in text
                            failures.append(json.loads(text)["error"])
                        await anyio.sleep(0.01)

                async def chaos() -> None:
                    await anyio.sleep(0.5 + 0.5 * trial)
                    await anyio.to_thread.run_sync(own_pg.stop)
                    await anyio.sleep(1.0 + trial)
                    await anyio.to_thread.run_sync(own_pg.start)
                    await anyio.sleep(2.0)
                    stop.set()

                with anyio.fail_after(120):
                    async with anyio.create_task_group() as group:
                        for w in range(12):
                            group.start_soon(writer, w)
                        group.start_soon(chaos)

                # the same server process, no restart: a write now succeeds at once
                after = await session.call_tool("remember", {"content": "after the restart", "namespace": "/load"})
                assert not after.is_error, after.content[0].text
            async with httpx2.AsyncClient(timeout=30) as http:
                assert (await http.get(base + "/healthz")).status_code == 200
    finally:
        store.close()

    check = Store.open(load_settings(database_url=own_dsn, home=tmp_path / "home", embedder="hash"))
    try:
        stored = rows(
            check,
            "SELECT content, count(*) AS n, min(id) AS id FROM episodes WHERE deleted_at IS NULL GROUP BY content",
        )
    finally:
        check.close()
    counts = {r["content"]: int(r["n"]) for r in stored}
    ids = {r["content"]: int(r["id"]) for r in stored}
    assert all(n == 1 for n in counts.values()), {c: n for c, n in counts.items() if n != 1}
    for content, row_id in acked:  # every acknowledged write is there, once, with its id
        assert ids.get(content) == row_id, content
    for items in acked_batches:
        assert all(counts.get(c) == 1 for c in items), items
    for items in attempted_batches:  # all or nothing, acknowledged or not
        assert len({counts.get(c, 0) for c in items}) == 1, items
    assert counts.get("after the restart") == 1
    # a write fails as the database being down, or is refused at the door as busy (never started)
    assert set(failures) <= {"database_unavailable", "busy"}, set(failures)
    fig = FIGURES["db restart"]
    fig["mcp writes acknowledged"] += len(acked) + 3 * len(acked_batches)
    fig["mcp calls failed with database_unavailable"] += len(failures)
    fig["mcp batches all-or-nothing"] += len(attempted_batches)


def test_first_calls_after_a_restart_succeed(own_pg: Restartable, own_dsn: str, tmp_path: Path) -> None:
    """The first calls after the database came back must succeed (no per-connection failures)."""
    store = Store.open(
        load_settings(database_url=own_dsn, home=tmp_path / "home", embedder="hash"),
        db=Database(own_dsn, max_size=4, timeout=5),
    )
    try:
        ns_ops.create(store, "/p")

        def hold() -> None:  # fill the pool: four connections, then idle
            with store.db.transaction() as tx:
                tx.conn.execute("SELECT pg_sleep(0.2)")

        threads = [threading.Thread(target=hold) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        _restart(own_pg, down_s=0.5)
        from stash_pipeline.memory import episodes

        stored = [episodes.remember(store, "/p", f"after restart {i}").id for i in range(6)]
        assert len(set(stored)) == 6
        assert store.db.ping()
    finally:
        store.close()
