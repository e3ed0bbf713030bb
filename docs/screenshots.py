"""Refresh the Dagster screenshots in docs/img/ (used by docs/dagster.md).

    .venv/bin/python docs/screenshots.py            # needs `chromium` on PATH (Debian package)

It starts `stash up` in a throw-away STASH_HOME on free ports, with the repository's
scripted model server as the reasoning model (deterministic answers, no network),
then does what an operator would:

1. remembers a few episodes in ``/demo/team`` and submits a ``facts`` + downstream run
   for it (``stash consolidate run`` submits through Dagster);
2. launches ``facts`` for ``/demo/late`` before that namespace exists: the run fails at
   once ("namespace not found"); creates the namespace and re-executes the run from
   failure, which succeeds;
3. captures, with headless Chromium, the asset graph, the ``facts`` partition page, the
   failed run and its re-execution, as PNGs of 1280×800 (palette-compressed when
   Pillow is installed).

Everything it started is stopped at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stash_serve.runs import DagsterRuns  # noqa: E402  (after the path set-up above)
from testkit.openai_server import ScriptedOpenAI  # noqa: E402
from testkit.scripted_model import ScriptedModel  # noqa: E402

OUT = ROOT / "docs" / "img"
BIN = Path(sys.executable).parent
EPISODES = [
    "Alice leads the platform team and lives in Paris",
    "Bob deploys the Kubernetes clusters every Friday",
    "The billing service is written in Go and owned by Alice",
]
WIDTH, HEIGHT = 1280, 800


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait(what: str, check: Any, timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception:
            value = None
        if value:
            return value
        time.sleep(1)
    raise SystemExit(f"timed out waiting for {what}")


def stash(env: dict[str, str], *args: str) -> str:
    return subprocess.run([str(BIN / "stash"), *args], env=env, check=True, capture_output=True, text=True).stdout


def run_status(client: DagsterRuns, run_id: str) -> str:
    data = client.post("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", {"id": run_id})
    return str(data["runOrError"]["status"])


def finished(client: DagsterRuns, run_id: str) -> str:
    return str(wait(f"run {run_id}", lambda: (s := run_status(client, run_id)) in {"SUCCESS", "FAILURE"} and s))


def shoot(url: str, name: str, budget_ms: int = 20000) -> Path:
    """One headless Chromium screenshot of ``url`` after its scripts settled."""
    target = OUT / f"{name}.png"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium not found: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
             f"--virtual-time-budget={budget_ms}", f"--screenshot={target}", url],
            check=True, capture_output=True, timeout=120,
        )
    try:
        from PIL import Image

        with Image.open(target) as image:
            image.convert("RGB").quantize(colors=128).save(target, optimize=True)
    except ImportError:
        pass
    print(f"{target.relative_to(ROOT)}  {target.stat().st_size // 1024} KiB  {url}")
    return target


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="stash-shots-"))
    dagster_port, mcp_port = free_port(), free_port()
    with ScriptedOpenAI(ScriptedModel()) as model:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STASH_", "DAGSTER_"))}
        env.update({
            "STASH_HOME": str(home), "STASH_DB_PORT": str(free_port()), "STASH_EMBEDDER": "hash",
            "STASH_OPENAI_BASE_URL": model.base_url, "STASH_OPENAI_API_KEY": "demo",
            "STASH_REASONER_MODEL": "scripted", "STASH_ENV_FILE": "/nonexistent/.env",
        })
        up = subprocess.Popen(
            [str(BIN / "stash"), "up", "--mcp-port", str(mcp_port), "--dagster-port", str(dagster_port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        try:
            url = f"http://127.0.0.1:{dagster_port}"
            client = DagsterRuns(url, timeout_s=30)
            wait("the Dagster code location", client.repository, 240)
            client.post("mutation { setNuxSeen }")  # no "join the community" dialog over the pages
            env["STASH_DAGSTER_URL"] = url

            stash(env, "namespace", "create", "/demo/team")
            for text in EPISODES:
                stash(env, "remember", text, "-n", "/demo/team")
            runs = json.loads(stash(env, "consolidate", "run", "-n", "/demo/team", "--stage", "facts", "--json"))
            finished(client, runs[0]["run_id"])
            downstream = client.launch("/demo/team", ["relationships", "causal_links", "patterns"], trigger="demo")
            finished(client, downstream)

            failed = client.launch("/demo/late", ["facts"], trigger="demo")
            assert finished(client, failed) == "FAILURE"
            shoot(f"{url}/runs/{failed}", "failed-run")
            stash(env, "namespace", "create", "/demo/late")
            for text in EPISODES[:2]:
                stash(env, "remember", text, "-n", "/demo/late")
            child = client.post(
                "mutation($p: ReexecutionParams!) { launchRunReexecution(reexecutionParams: $p) "
                "{ __typename ... on LaunchRunSuccess { run { runId } } } }",
                {"p": {"parentRunId": failed, "strategy": "FROM_FAILURE"}},
            )["launchRunReexecution"]["run"]["runId"]
            assert finished(client, child) == "SUCCESS"

            location = client.repository()["repositoryLocationName"]
            shoot(f"{url}/locations/{location}/asset-groups/consolidation", "asset-graph")
            partition = urllib.parse.quote("/demo/team", safe="")
            shoot(f"{url}/assets/facts?view=partitions&partition={partition}", "facts-partition")
            shoot(f"{url}/runs/{child}", "re-execution")
        finally:
            os.killpg(up.pid, signal.SIGTERM)
            try:
                up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
