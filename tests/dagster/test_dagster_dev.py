"""`dagster dev` in the repository root on Postgres: the daemon discovers a namespace and consolidates it.

The whole path from a checkout, no manual step: the root dagster.yaml and
workspace.yaml, found by `dagster dev` itself (storage in its own database on the test
server), the workspace's code location, the sensors running
by default, runs launched in subprocesses that call the scripted model over HTTP.
Slow (a minute or two): run with ``--run-slow``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from stash_pipeline.memory import namespaces as ns
from stash_pipeline.memory.episodes import remember
from stash_pipeline.stages import backlog_parameters
from stash_pipeline.store import Store
from testkit.openai_server import ScriptedOpenAI
from tests.conftest import free_port
from tests.support.dagster_dev import dagster_env, start_dagster_dev

TEXTS = ["Alice lives in Paris near the river Seine", "Bob deploys Kubernetes clusters every Friday"]


def graphql(port: int, query: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def wait_for(what: str, check: Any, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"dagster dev exited while waiting for {what}:\n{log.read_text()[-4000:]}")
        try:
            value = check()
        except Exception:
            value = None
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")


@pytest.fixture
def dagster_db(pg_admin_dsn: str) -> Iterator[str]:
    name = f"dagster_t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.slow
def test_dagster_dev_discovers_and_consolidates_a_new_namespace(
    store: Store, database_url: str, pg_admin_dsn: str, dagster_db: str, tmp_path: Path
) -> None:
    from testkit.scripted_model import ScriptedModel

    home = tmp_path / "dagster_home"
    port = free_port()
    log = tmp_path / "dagster-dev.log"
    with ScriptedOpenAI(ScriptedModel()) as server:
        env = dagster_env(home=home, pg_admin_dsn=pg_admin_dsn, dagster_db=dagster_db, database_url=database_url,
                          stash_home=tmp_path / "stash_home", model_url=server.base_url)
        proc = start_dagster_dev(home, env, port, tmp_path, log, from_checkout=True)
        try:
            nodes = wait_for(
                "the asset graph in the UI",
                lambda: graphql(port, "{ assetNodes { assetKey { path } } }")["data"]["assetNodes"],
                120,
                proc,
                log,
            )
            assert {n["assetKey"]["path"][0] for n in nodes} >= {"episodes", "facts", "causal_links", "decay"}

            ns.create(store, "/team/alpha")
            for text in TEXTS:
                remember(store, "/team/alpha", text)

            def consolidated() -> bool:
                rows = store.db.all("stage_backlog", **backlog_parameters())
                done = {r["stage"]: r for r in rows if r["slug"] == "/team/alpha"}
                return done["facts"]["cursor"] > 0 and done["relationships"]["cursor"] > 0

            wait_for("facts and relationships of /team/alpha", consolidated, 240, proc, log)
            runs = graphql(
                port,
                '{ runsOrError(filter: {tags: [{key: "stash/trigger", value: "watermark"}]}) '
                "{ ... on Runs { results { status tags { key value } } } } }",
            )["data"]["runsOrError"]["results"]
            assert any(
                r["status"] == "SUCCESS" and {"key": "dagster/partition", "value": "/team/alpha"} in r["tags"]
                for r in runs
            ), runs
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
