"""Driving the pipeline the way the UI does: a real webserver + daemon, through GraphQL.

One ``dagster dev`` (webserver and daemon, storage in its own Postgres database, the
workspace's code location, the scripted model over HTTP) serves the whole module. The
watermark sensor is stopped first, so only what a test launches runs. Each test then
launches what an operator would launch from the UI — a partition run (submitted by
``stash consolidate run`` and by the MCP ``consolidate`` tool), a backfill over several
namespaces, a rebuild, a re-execution from failure — and checks run status,
materializations and the data.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from stash_pipeline.config import load_settings
from stash_pipeline.memory import namespaces as ns
from stash_pipeline.memory.episodes import remember
from stash_pipeline.store import Store
from stash_serve.runs import DagsterRuns
from testkit.openai_server import ScriptedOpenAI
from testkit.scripted_model import ScriptedModel
from tests.conftest import _with_db, free_port
from tests.dagster.test_dagster_dev import graphql
from tests.support.dagster_dev import dagster_env, start_dagster_dev

TEXTS = ["Alice lives in Paris near the river Seine", "Bob deploys Kubernetes clusters every Friday"]
DONE = {"SUCCESS", "FAILURE", "CANCELED"}


class Deployment:
    """The running webserver + daemon, the Stash database they use, and GraphQL helpers."""

    def __init__(self, port: int, store: Store, env: dict[str, str], log: Path, proc: subprocess.Popen[bytes]):
        self.port, self.store, self.env, self.log, self.proc = port, store, env, log, proc
        self.url = f"http://127.0.0.1:{port}"
        self.client = DagsterRuns(self.url, timeout_s=30)

    def query(self, text: str, **variables: Any) -> dict[str, Any]:
        return dict(self.client.post(text, variables))

    def wait(self, what: str, check: Any, timeout: float = 120) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"dagster dev exited:\n{self.log.read_text()[-4000:]}"
            value = check()
            if value:
                return value
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}:\n{self.log.read_text()[-3000:]}")

    def run_status(self, run_id: str) -> str:
        data = self.query("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", id=run_id)
        return str(data["runOrError"]["status"])

    def finished(self, run_id: str, timeout: float = 120) -> str:
        return str(self.wait(f"run {run_id}", lambda: (s := self.run_status(run_id)) in DONE and s, timeout))

    def materialized(self, asset: str, partition: str) -> list[dict[str, Any]]:
        data = self.query(
            """query($key: AssetKeyInput!, $p: [String!]) { assetOrError(assetKey: $key) { ... on Asset {
                 assetMaterializations(partitions: $p) { partition runId
                   metadataEntries { label ... on IntMetadataEntry { intValue } ... on TextMetadataEntry { text } } } } } }""",
            key={"path": [asset]},
            p=[partition],
        )
        return list(data["assetOrError"]["assetMaterializations"])

    def facts(self, slug: str) -> list[int]:
        """Ids of the namespace's current facts (a test-only read)."""
        with self.store.db.connection() as conn:
            out = conn.execute(
                "SELECT f.id FROM facts f JOIN namespaces n ON n.id = f.namespace_id "
                "WHERE n.slug = %(s)s AND f.withdrawn_at IS NULL ORDER BY f.id",
                {"s": slug},
            ).fetchall()
            conn.commit()
        return [int(r["id"]) for r in out]


def metadata(event: dict[str, Any]) -> dict[str, Any]:
    return {e["label"]: e.get("intValue", e.get("text")) for e in event["metadataEntries"]}


@pytest.fixture(scope="module")
def deployment(pg_admin_dsn: str, template_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("graphql")
    stash_db, dagster_db = f"stash_g_{uuid.uuid4().hex[:10]}", f"dagster_g_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{stash_db}" TEMPLATE "{template_db}"')
        conn.execute(f'CREATE DATABASE "{dagster_db}"')
    database_url = _with_db(pg_admin_dsn, stash_db)
    home = tmp / "dagster_home"
    port = free_port()
    log = tmp / "dagster-dev.log"
    store = Store.open(load_settings(database_url=database_url, home=tmp / "stash_home", embedder="hash", vector_dim=384))
    with ScriptedOpenAI(ScriptedModel()) as server:
        env = dagster_env(home=home, pg_admin_dsn=pg_admin_dsn, dagster_db=dagster_db, database_url=database_url,
                          stash_home=tmp / "stash_home", model_url=server.base_url)
        proc = start_dagster_dev(home, env, port, tmp, log)
        deployment = Deployment(port, store, env, log, proc)
        try:
            sensors = deployment.wait(
                "the code location",
                lambda: _sensors(port),
                180,
            )
            stopped = deployment.query(
                "mutation($id: String) { stopSensor(id: $id) { __typename } }", id=sensors["watermark_sensor"]
            )
            assert stopped["stopSensor"]["__typename"] == "StopSensorMutationResult"
            yield deployment
        finally:
            store.close()
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{stash_db}" WITH (FORCE)')
                conn.execute(f'DROP DATABASE IF EXISTS "{dagster_db}" WITH (FORCE)')


def _sensors(port: int) -> dict[str, str] | None:
    try:
        data = graphql(
            port,
            '{ sensorsOrError(repositorySelector: {repositoryLocationName: "stash", repositoryName: "__repository__"}) '
            "{ ... on Sensors { results { name sensorState { id } } } } }",
        )
    except Exception:
        return None
    results = (data.get("data") or {}).get("sensorsOrError", {}).get("results")
    return {s["name"]: s["sensorState"]["id"] for s in results} if results else None


def seed(store: Store, slug: str) -> None:
    ns.create(store, slug)
    for text in TEXTS:
        remember(store, slug, text)


def test_stash_consolidate_run_submits_a_partition_run(deployment: Deployment) -> None:
    seed(deployment.store, "/g/a")
    env = {k: v for k, v in deployment.env.items() if k.startswith("STASH_")} | {"STASH_DAGSTER_URL": deployment.url}
    result = CliRunner().invoke(
        __import__("stash_serve.cli", fromlist=["cli"]).cli,
        ["consolidate", "run", "-n", "/g/a", "--stage", "facts", "--json"],
        env=env,
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.stdout)  # returned at once, before any model call
    assert run["namespace"] == "/g/a"
    # status from the same shell sees Dagster's runs (queued, running, or none once done)
    status = CliRunner().invoke(
        __import__("stash_serve.cli", fromlist=["cli"]).cli, ["consolidate", "status", "-n", "/g/a"],
        env=env, catch_exceptions=False,
    )
    assert status.exit_code == 0, status.output
    assert "Dagster runs queued or in flight: " in status.stdout
    assert deployment.finished(run["run_id"]) == "SUCCESS"
    (event,) = deployment.materialized("facts", "/g/a")
    assert event["runId"] == run["run_id"] and metadata(event)["rows_written"] == 2
    assert len(deployment.facts("/g/a")) == 2


def test_a_backfill_over_several_namespaces(deployment: Deployment) -> None:
    for slug in ("/g/b", "/g/c"):
        seed(deployment.store, slug)
        deployment.query(
            "mutation($k: String!, $r: RepositorySelector!) { addDynamicPartition(partitionsDefName: \"namespaces\", "
            "partitionKey: $k, repositorySelector: $r) { __typename } }",
            k=slug,
            r=deployment.client.repository(),
        )
    launched = deployment.query(
        """mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) {
             __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
        p={"assetSelection": [{"path": ["facts"]}], "partitionNames": ["/g/b", "/g/c"]},
    )["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    backfill = launched["backfillId"]

    def status() -> str | None:
        data = deployment.query(
            "query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { status } } }",
            id=backfill,
        )
        value = data["partitionBackfillOrError"]["status"]
        return value if value in {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"} else None

    assert deployment.wait(f"backfill {backfill}", status, 150) in {"COMPLETED", "COMPLETED_SUCCESS"}
    for slug in ("/g/b", "/g/c"):
        assert len(deployment.materialized("facts", slug)) == 1
        assert len(deployment.facts(slug)) == 2


def test_a_rebuild_run_replaces_the_facts(deployment: Deployment) -> None:
    if not deployment.facts("/g/a"):  # run on its own: derive the facts first
        seed(deployment.store, "/g/a")
        assert deployment.finished(deployment.client.launch("/g/a", ["facts"], trigger="test")) == "SUCCESS"
    old = deployment.facts("/g/a")
    # the launchpad of Jobs → rebuild_facts with one partition picked (a backfill over many
    # namespaces is the same job per partition; the backfill path is exercised above)
    params = {
        "selector": {**deployment.client.repository(), "jobName": "rebuild_facts"},
        "runConfigData": {},
        "mode": "default",
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "/g/a"}]},
    }
    launched = deployment.query(
        """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) {
             __typename ... on LaunchRunSuccess { run { runId tags { key value } } } ... on Error { message } } }""",
        p=params,
    )["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    assert {"key": "stash/rebuild", "value": "facts"} in launched["run"]["tags"]  # the job's tag
    assert deployment.finished(run_id) == "SUCCESS"
    assert deployment.run_status(run_id) == "SUCCESS"
    new = deployment.facts("/g/a")
    assert len(new) == len(old) and min(new) > max(old)  # the old facts withdrawn, new ones derived
    latest = [e for e in deployment.materialized("facts", "/g/a") if e["runId"] == run_id]
    assert metadata(latest[0])["cursor_from"] == 0  # re-read every episode
    assert deployment.materialized("relationships", "/g/a")  # downstream re-derived in the same run


def test_a_failed_partition_succeeds_when_re_executed_from_failure(deployment: Deployment) -> None:
    # The partition exists before its namespace: the run fails at once, without retry.
    run_id = deployment.client.launch("/g/late", ["facts"], trigger="test")
    assert deployment.finished(run_id) == "FAILURE"
    seed(deployment.store, "/g/late")  # the cause is gone
    retried = deployment.query(
        """mutation($p: ReexecutionParams!) { launchRunReexecution(reexecutionParams: $p) {
             __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }""",
        p={"parentRunId": run_id, "strategy": "FROM_FAILURE"},
    )["launchRunReexecution"]
    assert retried["__typename"] == "LaunchRunSuccess", retried
    child = retried["run"]["runId"]
    assert deployment.finished(child) == "SUCCESS"
    assert [e["runId"] for e in deployment.materialized("facts", "/g/late")] == [child]
    assert len(deployment.facts("/g/late")) == 2


def test_the_mcp_consolidate_tool_submits_runs_and_status_lists_them(deployment: Deployment) -> None:
    import anyio
    from mcp import Client

    from stash_serve.mcp.server import build_server
    from tests.mcp.conftest import ok

    seed(deployment.store, "/g/mcp")
    # the server sees the model the Dagster runs use (it refuses model stages without one)
    settings = deployment.store.settings.model_copy(update={
        "dagster_url": deployment.url, "reasoner_model": "scripted",
        "openai_base_url": deployment.env["STASH_OPENAI_BASE_URL"],
    })
    store = Store.open(settings)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(build_server(store, auth=False)) as client:
            started = await ok(client, "consolidate", {"namespaces": "/g/mcp", "stage": "facts"})
            status = await ok(client, "consolidation_status", {"namespaces": "/g/mcp"})
            return started, status

    try:
        started, status = anyio.run(scenario)
    finally:
        store.close()
    assert started["mode"] == "dagster"
    (run,) = started["runs"]
    assert run["namespace"] == "/g/mcp" and run["stages"] == ["facts"]
    assert status["mode"] == "dagster"
    # right after submitting, the run is queued or running — or already done on a fast machine
    assert [r["run_id"] for r in status["runs"]] in ([run["run_id"]], [])
    assert deployment.finished(run["run_id"]) == "SUCCESS"
    assert len(deployment.facts("/g/mcp")) == 2
