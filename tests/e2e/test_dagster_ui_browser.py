"""The Dagster UI of `stash up` in a real browser, as an operator sees it; the screenshots of
docs/dagster.md come from here.

`stash up` runs in a throw-away STASH_HOME on free ports with the repository's scripted
model server as its reasoning model. Namespaces ``/demo/team`` (its parent ``/demo`` has no
records of its own) and ``/ops`` are created; once the discovery sensor made their
partitions, episodes arrive in both and an agent asks to consolidate them (the MCP
``consolidate`` tool submits one Dagster run of every stage per namespace). The watermark
sensor fills the partitions with nothing to do, until its tick says "every stage is caught
up". Then:

* GraphQL: every partition of every stage asset is materialized (a run derived it, or the
  sensor filled it with its ``caught_up`` reason), none failed;
* headless Chromium, logged in through the guard's login page with the admin token:
  the asset graph shows "100% filled" on every node (``asset-graph.png``); the ``facts``
  partitions page lists no partition Missing or Failed, and ``/demo`` says why it is
  filled without a run (``caught-up-asset.png``); hovering a skipped tick of
  ``watermark_sensor`` shows its skip reason (``sensor-skip-reason.png``);
* the model endpoint starts refusing the API key (401) and a new episode arrives in
  ``/ops``: the sensor's run fails at once, its page shows the cause as the headline
  (``failed-run.png``) and the run carries ``stash/launched_by``.

Screenshots go to the test's tmp dir; with ``STASH_WRITE_SCREENSHOTS=1`` also to docs/img
(palette-compressed when Pillow is installed):

    STASH_WRITE_SCREENSHOTS=1 .venv/bin/python -m pytest tests/e2e/test_dagster_ui_browser.py
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psutil
import pytest

from testkit.browser import CHROMIUM, Browser
from testkit.database import WRITE_SCREENSHOTS
from tests.conftest import free_port
from tests.e2e.up_process import process_tree, wait_port, wait_ready
from tests.support.openai_server import Reply, ScriptedOpenAI
from tests.support.scripted_model import ScriptedModel

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (Debian: apt-get install -y chromium)"
)

BIN = Path(sys.executable).parent
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
#: a screenshot written to docs/img must stay below this size
MAX_PNG_BYTES = 200_000
EPISODES = {
    "/demo/team": [
        "Alice leads the platform team and lives in Paris",
        "Bob deploys the Kubernetes clusters every Friday",
        "The billing service is written in Go and owned by Alice",
    ],
    "/ops": ["Carol runs the on-call rotation for the ops team"],
}
#: every namespace is a partition: the root, the parent without records, and the two above
PARTITIONS = ["/", "/demo", "/demo/team", "/ops"]
STAGES = ["facts", "relationships", "causal_links", "patterns", "goal_progress", "failure_patterns",
          "hypothesis_evidence", "profiles", "decay"]
CAUGHT_UP = "every stage is caught up"
#: whether the run page's timeline draws the step as failed (red), its colour transition over
RED_STEP = """(() => { const box = document.querySelector('.chart-element.box'); if (!box) return false;
  const [r, g, b] = getComputedStyle(box).backgroundColor.match(/\\d+/g).map(Number); return r > 150 && g < 80 && b < 80; })()"""
REVOKED = "Incorrect API key provided: sk-demo-revoked"
HEADLINE = (f"facts failed for /ops: the model endpoint refuses the API key (401: {REVOKED}); "
            "check STASH_OPENAI_API_KEY")
SENSOR = {"repositoryLocationName": "stash", "repositoryName": "__repository__", "sensorName": "watermark_sensor"}
IN_FLIGHT = ["QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING"]

STATS = "{ assetNodes { assetKey { path } partitionStats { numMaterialized numPartitions numFailed numMaterializing } } }"
RUNS = """query($filter: RunsFilter) { runsOrError(filter: $filter) { ... on Runs { results {
  runId status endTime assetSelection { path } tags { key value } } } } }"""
FACTS_PARTITIONS = '{ assetNodeOrError(assetKey: {path: ["facts"]}) { ... on AssetNode { partitionKeys } } }'
TICKS = """query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { ... on Sensor {
  sensorState { ticks(limit: 1) { status timestamp skipReason } } } } }"""


class RevocableModel(ScriptedModel):
    """The scripted model, until its API key is revoked: then every request gets a 401."""

    revoked = False

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        if self.revoked:
            return Reply(status=401, error_message=REVOKED)
        return super().__call__(request)


@dataclass
class Stash:
    """A running `stash up`: its ports, admin token and log."""

    ui: str
    mcp: str
    token: str
    log: Path
    model: RevocableModel

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.ui}/graphql", data=json.dumps({"query": query, "variables": variables or {}}).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            body = json.loads(response.read())
        assert "errors" not in body, body
        return dict(body["data"])

    def runs(self, **filter_: Any) -> list[dict[str, Any]]:
        found = self.graphql(RUNS, {"filter": filter_})["runsOrError"]["results"]
        return [{**run, "tags": {t["key"]: t["value"] for t in run["tags"]}} for run in found]

    def wait(self, what: str, check: Callable[[], str], timeout_s: float) -> None:
        """Poll ``check`` (it answers what is still missing, "" once done) until done or timeout."""
        deadline = time.monotonic() + timeout_s
        missing = "not checked yet"
        while time.monotonic() < deadline:
            try:
                missing = check()
            except OSError as exc:  # the UI restarting its code location, a slow answer
                missing = f"GraphQL: {exc}"
            if not missing:
                return
            time.sleep(2)
        pytest.fail(f"{what} not reached within {timeout_s} s: {missing}\n--- stash up log ---\n"
                    f"{self.log.read_text()[-3000:]}")


async def _mcp(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each tool call in turn, in one MCP session; their structured results."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        results = []
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            assert not result.is_error, (name, arguments, result.content)
            results.append(result.structured_content or {})
        return results


@pytest.fixture
def stash(tmp_path: Path) -> Iterator[Stash]:
    # not under tmp_path: pytest makes its root 0700, which the root-run database user can't traverse
    home = Path(tempfile.mkdtemp(prefix="stash-ui-browser-")) / "home"
    mcp_port, ui_port = free_port(), free_port()
    log = tmp_path / "up.log"
    model = RevocableModel()
    with ScriptedOpenAI(model) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STASH_", "DAGSTER_"))}
        env.update({
            "STASH_HOME": str(home), "STASH_DB_PORT": str(free_port()), "STASH_EMBEDDER": "hash",
            "STASH_OPENAI_BASE_URL": server.base_url, "STASH_OPENAI_API_KEY": "sk-demo",
            "STASH_REASONER_MODEL": "scripted", "STASH_ENV_FILE": "/nonexistent/.env",
        })
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(BIN / "stash"), "up", "--mcp-port", str(mcp_port), "--dagster-port", str(ui_port)],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        tree: list[psutil.Process] = []
        try:
            wait_ready(mcp_port, 180, proc, log)
            wait_port(ui_port, 240, proc, log)
            tree = process_tree(proc)
            yield Stash(ui=f"http://127.0.0.1:{ui_port}", mcp=f"http://127.0.0.1:{mcp_port}/mcp",
                        token=(home / "admin-token").read_text().strip(), log=log, model=model)
        finally:
            with contextlib.suppress(psutil.NoSuchProcess):
                tree = tree or process_tree(proc)
            proc.terminate()  # stash up stops its children and the embedded database
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
            for process in tree:  # whatever outlived it
                try:
                    process.kill()
                except psutil.NoSuchProcess:
                    pass
            if (home / "logs").is_dir():  # the children's logs, for a failure's post-mortem
                shutil.copytree(home / "logs", tmp_path / "logs", dirs_exist_ok=True)
            shutil.rmtree(home.parent, ignore_errors=True)


def _unfilled(stash: Stash) -> str:
    """A stage asset with a partition not materialized, or failed ("" when every one is filled)."""
    stats = {n["assetKey"]["path"][0]: n["partitionStats"] for n in stash.graphql(STATS)["assetNodes"]}
    filled = {"numMaterialized": len(PARTITIONS), "numPartitions": len(PARTITIONS), "numFailed": 0, "numMaterializing": 0}
    return next((f"{stage} partitions: {stats[stage]}" for stage in STAGES if stats[stage] != filled), "")


def _latest_tick(stash: Stash) -> dict[str, Any]:
    return dict(stash.graphql(TICKS, {"s": SENSOR})["sensorOrError"]["sensorState"]["ticks"][0])


def _just_ticked(stash: Stash) -> str:
    """"" while the watermark sensor's latest tick is over and started less than 22 s ago: its next
    starts 30 s after it (minimum_interval_seconds), later on a loaded machine, never sooner."""
    tick = _latest_tick(stash)
    age = time.time() - tick["timestamp"]
    return "" if tick["status"] != "STARTED" and age < 22 else f"latest tick {age:.0f} s ago: {tick['status']}"


def _caught_up(stash: Stash) -> str:
    """What keeps the system from being caught up ("" when it is)."""
    flying = stash.runs(statuses=IN_FLIGHT)
    if flying:
        return "runs in flight: " + ", ".join(
            f"{r['runId'][:8]} {r['status']} {r['tags'].get('dagster/partition')} "
            f"{'+'.join(a['path'][0] for a in r['assetSelection'])}" for r in flying)
    done = stash.runs(statuses=["SUCCESS"])
    for slug in EPISODES:
        if not any(r["tags"].get("dagster/partition") == slug and ["facts"] in [a["path"] for a in r["assetSelection"]]
                   for r in done):
            return f"no successful facts run for {slug} yet"
    unfilled = _unfilled(stash)
    if unfilled:
        return unfilled
    tick = _latest_tick(stash)
    last_run = max(float(r["endTime"] or 0) for r in done)
    if tick["status"] != "SKIPPED" or tick["skipReason"] != CAUGHT_UP or tick["timestamp"] <= last_run:
        return f"the sensor's latest tick: {tick}"
    return ""


def _save(page: Browser, out: Path, name: str) -> Path:
    """A screenshot in ``out``, palette-compressed if Pillow is there; also in docs/img if asked to."""
    shot = page.screenshot(out / f"{name}.png")
    try:
        from PIL import Image
    except ImportError:
        pass
    else:
        with Image.open(shot) as image:
            image.convert("RGB").quantize(colors=128).save(shot, optimize=True)
    if WRITE_SCREENSHOTS:
        size = shot.stat().st_size
        assert size < MAX_PNG_BYTES, f"{name}.png is {size} bytes; docs/img takes < {MAX_PNG_BYTES}"
        shutil.copyfile(shot, DOCS_IMG / f"{name}.png")
    return shot


def _log_in(page: Browser, stash: Stash, path: str) -> None:
    """Open ``path`` as an operator: the guard sends to its login page, the admin token opens the UI there."""
    page.goto(stash.ui + path)
    page.wait_for("#token")
    assert "/_stash/login" in page.url, page.url
    page.fill("#token", stash.token)
    page.click(text="Log in")
    page.wait_until("the page after login",
                    lambda: page.url == stash.ui + path and page.evaluate("document.readyState") == "complete")
    _mouse_away(page)


def _mouse_away(page: Browser) -> None:
    """The mouse to the page's corner: no tooltip or hover effect in what follows."""
    page.move_mouse(0, 0)


def test_an_operator_sees_caught_up_partitions_skip_reasons_and_failure_causes(stash: Stash, tmp_path: Path) -> None:
    out = tmp_path / "screenshots"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("create_namespace", {"namespace": slug, "name": slug.rsplit("/", 1)[-1]}) for slug in EPISODES
    ]
    asyncio.run(_mcp(stash.mcp, stash.token, calls))
    stash.graphql("mutation { setNuxSeen }")  # no "join the community" dialog over the pages

    def partitions() -> str:
        keys = stash.graphql(FACTS_PARTITIONS)["assetNodeOrError"].get("partitionKeys") or []
        return "" if set(PARTITIONS) <= set(keys) else f"partitions so far: {keys}"

    stash.wait("a partition per namespace (the discovery sensor)", partitions, 180)
    # right after a tick: the runs `consolidate` submits are queued before the sensor's next
    # tick, which then leaves their namespaces to them instead of requesting runs of its own
    stash.wait("a fresh tick of the watermark sensor", lambda: _just_ticked(stash), 90)
    *_, submitted = asyncio.run(_mcp(stash.mcp, stash.token, [
        *(("remember", {"content": text, "namespace": slug}) for slug, texts in EPISODES.items() for text in texts),
        ("consolidate", {"namespaces": list(EPISODES)}),
    ]))
    assert submitted.get("mode") == "dagster", submitted  # runs in Dagster, not a job of the MCP server
    stash.wait("a caught-up system", lambda: _caught_up(stash), 360)

    with Browser() as page:
        _log_in(page, stash, "/locations/stash/asset-groups/consolidation")
        page.wait_for_text("hypothesis_evidence")
        # each node of the graph says how much of it is filled: all of it, for every stage in view
        page.wait_until("every node 100% filled",
                        lambda: (fills := re.findall(r"(\d+)% filled", page.text())) and len(fills) >= 5
                        and set(fills) == {"100"})
        _save(page, out, "asset-graph")

        page.goto(f"{stash.ui}/assets/facts?view=partitions&partition={quote('/demo', safe='')}")
        page.wait_for_text(f"Materialized ({len(PARTITIONS)})")
        page.wait_for_text("no input yet (no episodes in this namespace)")  # /demo: filled by the sensor
        shown = page.text()
        assert "Missing (0)" in shown and "Failed (0)" in shown, shown[:2000]
        _save(page, out, "caught-up-asset")

        page.goto(f"{stash.ui}/locations/stash/sensors/watermark_sensor")
        page.wait_for_text("View logs")  # the tick list
        assert CAUGHT_UP not in page.text()  # only the tick's tooltip shows it
        page.hover("tr:has(> td:nth-child(6)) > td:nth-child(2) span[data-state]")  # a tick's status
        page.wait_for_text(CAUGHT_UP, 20)
        _save(page, out, "sensor-skip-reason")

        # the key is revoked; new input arrives: the sensor's run must fail at once and say why
        stash.model.revoked = True
        revoked_at = time.time()
        asyncio.run(_mcp(stash.mcp, stash.token, [
            ("remember", {"content": "Dave rotated the model API key of the ops team", "namespace": "/ops"}),
        ]))
        failed: list[dict[str, Any]] = []

        def failure() -> str:
            failed[:] = [r for r in stash.runs(statuses=["FAILURE"], tags=[{"key": "dagster/partition", "value": "/ops"}])
                         if float(r["endTime"] or 0) > revoked_at]
            return "" if failed else "no failed run for /ops yet"

        stash.wait("the failed run", failure, 180)
        run = failed[0]
        assert run["tags"].get("stash/launched_by") == "sensor watermark_sensor", run["tags"]
        page.goto(f"{stash.ui}/runs/{run['runId']}?logs={quote('type:STEP_FAILURE')}")
        page.wait_for_text(HEADLINE)
        assert "Exceeded max_retries" not in page.text()
        page.wait_until("the step's bar in the chart red", lambda: page.evaluate(RED_STEP))
        _mouse_away(page)
        _save(page, out, "failed-run")
