"""The Dagster UI as `stash up` starts it refuses what a DNS-rebinding page, another site or
another local user would send, and serves an admin token.

One real UI process (the command `stash up` runs, ``stash_serve.up.dagster_ui_command``)
on the test PostgreSQL serves the module: the Stash database with its tokens, and a
Dagster database of its own. Each test sends what an attacker or an operator would:
a GraphQL mutation under a foreign Host, a request from a foreign Origin, none or the
wrong credential, a WebSocket upgrade; then the admin token as a bearer and through the
login page's cookie.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psycopg
import pytest

from stash_pipeline.auth import create_token, revoke_token
from stash_pipeline.config import load_settings
from stash_pipeline.store import Store
from stash_serve.up import DAGSTER_CONFIG, dagster_ui_command, wait_for_port
from tests.conftest import _with_db, free_port
from tests.support.dagster_dev import dagster_env

REPO = {"repositoryLocationName": "stash", "repositoryName": "__repository__"}
ADD_PARTITION = """mutation($key: String!, $repo: RepositorySelector!) {
  addDynamicPartition(partitionsDefName: "namespaces", partitionKey: $key, repositorySelector: $repo) { __typename } }"""
BODY_TIMEOUT_S = 2
PARTITIONS = '{ assetNodeOrError(assetKey: {path: ["facts"]}) { ... on AssetNode { partitionKeys } } }'


@dataclass
class UI:
    port: int
    store: Store
    admin: str  # admin on /
    writer: str  # read, write on /
    scoped_admin: str  # admin on /projects/x only
    log: Path

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def request(self, method: str, path: str, *, headers: dict[str, str] | None = None,
                body: bytes | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            sent = {"Host": self.host, **(headers or {})}
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            return response.status, response.headers, response.read()
        finally:
            conn.close()

    def graphql(self, query: str, variables: dict[str, Any] | None = None, *,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        status, _, data = self.request("POST", "/graphql", body=body,
                                       headers={"Content-Type": "application/json", **(headers or {})})
        try:
            return status, json.loads(data)
        except ValueError:
            return status, {"raw": data.decode(errors="replace")}

    def bearer(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def partitions(self) -> list[str]:
        status, body = self.graphql(PARTITIONS, headers=self.bearer(self.admin))
        assert status == 200, body
        return body["data"]["assetNodeOrError"].get("partitionKeys") or []

    def login(self, token: str) -> tuple[int, http.client.HTTPMessage, bytes]:
        form = urlencode({"token": token, "next": "/runs"}).encode()
        return self.request("POST", "/_stash/login", body=form, headers={
            "Content-Type": "application/x-www-form-urlencoded", "Origin": f"http://{self.host}",
        })


@pytest.fixture(scope="module")
def ui(pg_admin_dsn: str, template_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UI]:
    tmp = tmp_path_factory.mktemp("dagster_ui")
    stash_db, dagster_db = f"stash_ui_{uuid.uuid4().hex[:10]}", f"dagster_ui_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{stash_db}" TEMPLATE "{template_db}"')
        conn.execute(f'CREATE DATABASE "{dagster_db}"')
    database_url = _with_db(pg_admin_dsn, stash_db)
    store = Store.open(load_settings(database_url=database_url, home=tmp / "stash_home", embedder="hash", vector_dim=384))
    home = tmp / "dagster_home"
    home.mkdir()
    shutil.copy(DAGSTER_CONFIG / "dagster.yaml", home / "dagster.yaml")
    env = dagster_env(home=home, pg_admin_dsn=pg_admin_dsn, dagster_db=dagster_db, database_url=database_url,
                      stash_home=tmp / "stash_home", model_url="http://127.0.0.1:9/v1")
    # a short body-read timeout: a subscription must outlive it (the edge's timers stop at the upgrade)
    env["STASH_HTTP_BODY_TIMEOUT_S"] = str(BODY_TIMEOUT_S)
    port = free_port()
    log = tmp / "dagster-ui.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            dagster_ui_command(Path(sys.executable).parent, port), env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    try:
        if not wait_for_port("127.0.0.1", port, 240, lambda: proc.poll() is None):
            pytest.fail(f"the UI did not open port {port}:\n{log.read_text()[-4000:]}")
        yield UI(
            port=port,
            store=store,
            admin=create_token(store, ["/"], ["read", "write", "admin"], "ui admin")["token"],
            writer=create_token(store, ["/"], ["read", "write"], "ui writer")["token"],
            scoped_admin=create_token(store, ["/projects/x"], ["admin"], "scoped admin")["token"],
            log=log,
        )
    finally:
        store.close()
        with_group = proc.pid
        os.killpg(with_group, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(with_group, signal.SIGKILL)
            proc.wait()
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{stash_db}" WITH (FORCE)')
            conn.execute(f'DROP DATABASE IF EXISTS "{dagster_db}" WITH (FORCE)')


def test_an_admin_token_gets_graphql_data(ui: UI) -> None:
    status, body = ui.graphql("{ version assetNodes { assetKey { path } } }", headers=ui.bearer(ui.admin))
    assert status == 200, body
    assert body["data"]["version"]
    assert {"facts", "episodes", "decay"} <= {n["assetKey"]["path"][0] for n in body["data"]["assetNodes"]}


def test_a_mutation_under_a_rebinding_host_is_refused_and_not_executed(ui: UI) -> None:
    variables = {"key": "/rebound", "repo": REPO}
    for headers in ({}, ui.bearer(ui.admin)):  # refused before, and whatever, the credential
        status, body = ui.graphql(ADD_PARTITION, variables, headers={"Host": f"rebind.evil.example:{ui.port}", **headers})
        assert status == 421, body
        status, body = ui.graphql(ADD_PARTITION, variables, headers={"Host": "rebind.evil.example", **headers})
        assert status == 421, body
    assert "/rebound" not in ui.partitions()
    # the same mutation under the UI's own Host, with the admin token, does run
    status, body = ui.graphql(ADD_PARTITION, {"key": "/own-host", "repo": REPO}, headers=ui.bearer(ui.admin))
    assert status == 200 and body["data"]["addDynamicPartition"]["__typename"] == "AddDynamicPartitionSuccess", body
    assert "/own-host" in ui.partitions()


def test_a_foreign_origin_is_refused(ui: UI) -> None:
    for origin in ("http://evil.example", f"http://rebind.evil.example:{ui.port}",
                   "http://127.0.0.1:1", f"https://evil.example:{ui.port}", "null"):
        status, body = ui.graphql(ADD_PARTITION, {"key": "/cross-origin", "repo": REPO},
                                  headers={"Origin": origin, **ui.bearer(ui.admin)})
        assert status == 403, (origin, body)
    assert "/cross-origin" not in ui.partitions()
    # the UI's own origin passes
    status, body = ui.graphql("{ version }", headers={"Origin": f"http://{ui.host}", **ui.bearer(ui.admin)})
    assert status == 200 and body["data"]["version"], body


def test_a_request_without_a_credential_is_refused(ui: UI) -> None:
    status, body = ui.graphql(ADD_PARTITION, {"key": "/anonymous", "repo": REPO})
    assert status == 401, body
    status, body = ui.graphql("{ version }")
    assert status == 401, body
    status, headers, _ = ui.request("GET", "/runs", headers={"Accept": "text/html"})
    assert status == 303 and headers["Location"] == "/_stash/login?next=%2Fruns"
    for path in ("/server_info", "/logs/x", "/report_asset_materialization/facts"):
        assert ui.request("GET", path)[0] == 401, path
    status, _, _ = ui.request("GET", "/graphql", headers={"Authorization": "Bearer stash_nope_nope"})
    assert status == 401
    assert "/anonymous" not in ui.partitions()
    # only the health check answers without one
    assert ui.request("GET", "/_stash/healthz")[0] == 200


def test_a_token_without_the_admin_right_on_root_is_refused(ui: UI) -> None:
    for token in (ui.writer, ui.scoped_admin):
        status, body = ui.graphql(ADD_PARTITION, {"key": "/not-admin", "repo": REPO}, headers=ui.bearer(token))
        assert status == 403, body
        status, _, page = ui.login(token)
        assert status == 403 and b"admin" in page
    assert "/not-admin" not in ui.partitions()


def _cookie(headers: http.client.HTTPMessage) -> str:
    cookie = headers["Set-Cookie"]
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "samesite", "path"} <= attributes, cookie
    assert "samesite=strict" in cookie.lower().replace(" ", "")
    return cookie.split(";", 1)[0]


def test_the_login_page_sets_a_session_cookie_the_ui_accepts(ui: UI) -> None:
    status, headers, page = ui.request("GET", "/_stash/login?next=%2Fruns")
    assert status == 200 and b'name="token"' in page
    # with `no-referrer` a browser posts the form with `Origin: null`, which the guard refuses
    assert headers["Referrer-Policy"] == "same-origin"
    status, _, page = ui.login("stash_wrong_token")
    assert status == 401
    status, headers, _ = ui.login(ui.admin)
    assert status == 303 and headers["Location"] == "/runs"
    cookie = _cookie(headers)
    own = {"Cookie": cookie, "Origin": f"http://{ui.host}"}
    status, _, page = ui.request("GET", "/runs", headers={"Cookie": cookie, "Accept": "text/html",
                                                          "Sec-Fetch-Site": "same-origin"})
    assert status == 200 and b"<html" in page.lower()
    status, body = ui.graphql("{ version }", headers=own)
    assert status == 200 and body["data"]["version"], body
    # the cookie does not count on a request a page of another origin made
    status, body = ui.graphql("{ version }", headers={"Cookie": cookie, "Sec-Fetch-Site": "same-site"})
    assert status == 401, body
    # nor for GraphQL over GET (Dagster would run a mutation sent that way)
    for query in ("query=%7Bversion%7D", "op=x&%71uery=%7Bversion%7D"):  # the name escaped too
        status, _, _ = ui.request("GET", f"/graphql?{query}", headers={"Cookie": cookie})
        assert status == 403, query
    # logging out ends the session
    status, _, _ = ui.request("POST", "/_stash/logout", headers=own)
    assert status == 303
    assert ui.graphql("{ version }", headers=own)[0] == 401


def test_a_revoked_token_ends_its_session(ui: UI) -> None:
    made = create_token(ui.store, ["/"], ["admin"], "revoked later")
    status, headers, _ = ui.login(made["token"])
    assert status == 303
    own = {"Cookie": _cookie(headers), "Origin": f"http://{ui.host}"}
    assert ui.graphql("{ version }", headers=own)[0] == 200
    assert revoke_token(ui.store, made["id"])
    assert ui.graphql("{ version }", headers=own)[0] == 401
    assert ui.graphql("{ version }", headers=ui.bearer(made["token"]))[0] == 401


def _websocket(ui: UI, headers: dict[str, str], origin: str | None, host: str | None = None) -> Any:
    """A graphql-ws connection to the UI, its Host ``host`` (default: the UI's own address)."""
    import socket

    from websockets.sync.client import connect

    sock = socket.create_connection(("127.0.0.1", ui.port), timeout=30)
    return connect(f"ws://{host or ui.host}/graphql", sock=sock, subprotocols=["graphql-ws"], origin=origin,
                   additional_headers=headers, proxy=None, open_timeout=30)


def _refused_status(ui: UI, headers: dict[str, str], origin: str | None, host: str | None = None) -> int:
    from websockets.exceptions import InvalidStatus

    with pytest.raises(InvalidStatus) as refused:
        _websocket(ui, headers, origin, host).close()
    return int(refused.value.response.status_code)


def test_the_graphql_websocket_needs_the_credential_and_the_origin(ui: UI) -> None:
    own = f"http://{ui.host}"
    assert _refused_status(ui, {}, own) == 401
    assert _refused_status(ui, {}, None) == 401
    assert _refused_status(ui, ui.bearer(ui.writer), own) == 403
    status, headers, _ = ui.login(ui.admin)
    assert status == 303
    cookie = _cookie(headers)
    assert _refused_status(ui, {"Cookie": cookie}, "http://evil.example") == 403
    assert _refused_status(ui, {"Cookie": cookie}, own, host=f"rebind.evil.example:{ui.port}") == 421
    # authenticated, from its own page: the subscription protocol works through the guard
    with _websocket(ui, {"Cookie": cookie}, own) as ws:
        ws.send(json.dumps({"type": "connection_init", "payload": {}}))
        assert json.loads(ws.recv(timeout=30))["type"] == "connection_ack"
        ws.send(json.dumps({"type": "start", "id": "1", "payload": {
            "query": 'subscription { pipelineRunLogs(runId: "no-such-run") { __typename } }'}}))
        message = json.loads(ws.recv(timeout=30))
        assert message["type"] == "data" and message["id"] == "1", message
        assert message["payload"]["data"]["pipelineRunLogs"]["__typename"] == "PipelineRunLogsSubscriptionFailure"
        # an open subscription outlives the HTTP read timeouts
        time.sleep(BODY_TIMEOUT_S * 2 + 1)
        ws.send(json.dumps({"type": "start", "id": "2", "payload": {
            "query": 'subscription { pipelineRunLogs(runId: "another-run") { __typename } }'}}))
        answers: list[dict[str, Any]] = []
        while not any(a.get("id") == "2" and a["type"] == "data" for a in answers):  # id 1 may complete first
            answers.append(json.loads(ws.recv(timeout=30)))


def test_consolidate_submissions_present_the_admin_token_stash_up_wrote(ui: UI, tmp_path: Path) -> None:
    """MCP `consolidate` and `stash consolidate run` find the guarded UI through the files
    `stash up` writes; without the token they would be refused and fall back."""
    from stash_pipeline.config import load_settings
    from stash_serve.runs import TOKEN_FILE, URL_FILE, DagsterRuns

    (tmp_path / URL_FILE).parent.mkdir(parents=True)
    (tmp_path / URL_FILE).write_text(f"http://{ui.host}\n")
    settings = load_settings(home=tmp_path, embedder="hash")
    assert DagsterRuns.find(settings) is None  # no token: the UI answers 401
    (tmp_path / TOKEN_FILE).write_text(ui.admin + "\n")
    found = DagsterRuns.find(settings)
    assert found is not None and found.repository()["repositoryName"]
    configured = load_settings(home=tmp_path / "elsewhere", embedder="hash", dagster_url=f"http://{ui.host}",
                               dagster_token=ui.admin)
    assert DagsterRuns.find(configured) is not None
